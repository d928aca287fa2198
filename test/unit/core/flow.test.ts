// Inflow control (issue 11, flow control): Postfix's in_flow_delay rule, "arrival rate exceeds
// delivery rate", as core/flow.ts measures it (each Outbox shard, for the recipients it accepts
// and the outcomes that come back to it).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FlowMeter } from "../../../durable-objects/core";
import { settingsOf } from "../../../worker/settings/settings";

const T = 1_700_000_000;

describe("FlowMeter", () => {
  it("is not over for a burst below minBacklog, is over when arrivals outrun delivery, and recovers as delivery catches up", () => {
    const f = new FlowMeter({ windowSec: 10, slackSec: 2, minBacklog: 100 });
    f.arrive(100, T);
    expect(f.over(T)).toBe(false); // a batch of 100: never held back
    f.arrive(1, T);
    expect(f.over(T)).toBe(true);
    // Delivery at 50/s for 4 s: the net inflow falls to 101 - 200 < 0.
    for (let s = 1; s <= 4; s++) f.leave(50, T + s);
    expect(f.over(T + 4)).toBe(false);
    // Steady arrivals of 150/s against 100/s delivered: over once the excess passes 2 s of delivery.
    const g = new FlowMeter({ windowSec: 10, slackSec: 2, minBacklog: 100 });
    const overAt: number[] = [];
    for (let s = 0; s < 10; s++) {
      g.arrive(150, T + s);
      g.leave(100, T + s);
      if (g.over(T + s)) overAt.push(s);
    }
    // Net inflow after s+1 seconds: 50(s+1); the threshold: max(100, 2 × 100(s+1)/10) = 100 up to s = 4, then 20(s+1).
    expect(overAt).toEqual([2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it("forgets what fell out of its window, also across a long silence", () => {
    const f = new FlowMeter({ windowSec: 10, slackSec: 2, minBacklog: 100 });
    f.arrive(500, T);
    expect(f.totals(T + 9)).toEqual({ arrived: 500, left: 0 });
    expect(f.totals(T + 10)).toEqual({ arrived: 0, left: 0 });
    f.arrive(7, T + 10_000);
    f.leave(3, T + 10_005);
    expect(f.totals(T + 10_005)).toEqual({ arrived: 7, left: 3 });
    expect(f.over(T + 10_005)).toBe(false);
  });

  it("matches a plain sum over the last window seconds, for any sequence of events (property)", () => {
    const event = fc.record({
      dt: fc.integer({ min: 0, max: 15 }),
      arrive: fc.boolean(),
      n: fc.integer({ min: 0, max: 300 }),
    });
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 30 }),
        fc.integer({ min: 0, max: 5 }),
        fc.integer({ min: 0, max: 500 }),
        fc.array(event, { maxLength: 200 }),
        (windowSec, slackSec, minBacklog, events) => {
          const f = new FlowMeter({ windowSec, slackSec, minBacklog });
          const log: { at: number; arrive: boolean; n: number }[] = [];
          let now = T;
          for (const e of events) {
            now += e.dt;
            if (e.arrive) f.arrive(e.n, now);
            else f.leave(e.n, now);
            log.push({ at: now, arrive: e.arrive, n: e.n });
            const inWindow = log.filter((x) => x.at > now - windowSec);
            const arrived = inWindow.filter((x) => x.arrive).reduce((a, x) => a + x.n, 0);
            const left = inWindow.filter((x) => !x.arrive).reduce((a, x) => a + x.n, 0);
            expect(f.totals(now)).toEqual({ arrived, left });
            expect(f.over(now)).toBe(arrived - left > Math.max(minBacklog, (left / windowSec) * slackSec));
          }
        },
      ),
    );
  });
});

describe("IN_FLOW_DELAY_MS", () => {
  it("reads IN_FLOW_DELAY_MS: default 1000 ms (Postfix's in_flow_delay), at most 10 s, invalid as the default", () => {
    expect(settingsOf({}).inFlowDelayMs).toBe(1000);
    expect(settingsOf({ IN_FLOW_DELAY_MS: "" }).inFlowDelayMs).toBe(1000);
    expect(settingsOf({ IN_FLOW_DELAY_MS: "250" }).inFlowDelayMs).toBe(250);
    expect(settingsOf({ IN_FLOW_DELAY_MS: "60000" }).inFlowDelayMs).toBe(10_000);
    expect(settingsOf({ IN_FLOW_DELAY_MS: "-1" }).inFlowDelayMs).toBe(1000);
    expect(settingsOf({ IN_FLOW_DELAY_MS: "x" }).inFlowDelayMs).toBe(1000);
  });
});
