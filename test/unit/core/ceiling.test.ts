// The learned session ceiling (relay, §12.7, ceiling.ts): a concurrency refusal
// teaches the destination the server's limit, the window holds there and probes past it on a
// backing-off schedule counted in deliveries (the relay's default, 1 h of memory); off (0) it is
// Postfix's feedback, unchanged.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  applyDestinationReport,
  createDestination,
  isConcurrencyRefusal,
  mustParseSchedulerConfig,
  PROBE_GAP_MAX,
  transportParams,
  type DestinationParams,
  type DestinationRecord,
} from "../../../durable-objects/core";

const params = (input: Record<string, unknown> = {}): DestinationParams => {
  const cfg = mustParseSchedulerConfig(input);
  return { ...transportParams(cfg, "smtp"), deadTimeSec: 300, idleMemorySec: 600 };
};
const postfix = params({ default_destination_concurrency_ceiling_memory: 0 });
const learning = params({
  default_destination_concurrency_ceiling_memory: 3600,
  default_destination_concurrency_probe_delay: 1,
});
const REFUSAL = {
  dsnStatus: "4.7.0",
  reason: "host mx.test[192.0.2.1] refused to talk to me: 421 4.7.0 Too many connected clients",
};
const LOST = {
  dsnStatus: "4.4.2",
  reason: "lost connection with mx.test[192.0.2.1] while receiving the initial server greeting",
};

/**
 * A server that takes `limit(t)` sessions at once and refuses the rest at the greeting, driven
 * for `seconds`: every second the client opens as many sessions as its window allows (it always
 * has mail); the refusals report first (they are quick), then the deliveries, each with the
 * sessions still in flight.
 */
function run(p: DestinationParams, seconds: number, limit: (t: number) => number, start = 1000) {
  let rec: DestinationRecord = createDestination("smtp", p);
  let refused = 0;
  let delivered = 0;
  const windows: number[] = [];
  for (let t = start; t < start + seconds; t++) {
    const open = Math.max(1, rec.window);
    const ok = Math.min(open, limit(t));
    let busy = open;
    for (let i = ok; i < open; i++)
      rec = applyDestinationReport(rec, { busy: busy--, siteFailure: REFUSAL }, t, p).record;
    for (let i = 0; i < ok; i++) rec = applyDestinationReport(rec, { busy: busy--, siteFailure: null }, t, p).record;
    refused += open - ok;
    delivered += ok;
    windows.push(rec.window);
  }
  return { refused, delivered, windows, rec };
}

describe("which site failures are concurrency refusals", () => {
  it.each([
    [
      "host mx.test[192.0.2.1] refused to talk to me: 421 4.7.0 Too many connected clients, try again in a moment",
      true,
    ],
    ["host mx.test refused to talk to me: 421 mx.test Service not available", true],
    ["host mx.test said: 452 4.7.0 too many concurrent SMTP connections", true],
    ["host mx.test refused to talk to me: 554 5.7.1 go away", false],
    ["connect to mx.test[192.0.2.1]:25: Connection refused", false],
    [LOST.reason, false],
  ])("%s → %s", (reason, want) => {
    expect(isConcurrencyRefusal(reason)).toBe(want);
  });
});

describe("the learned ceiling", () => {
  it("off (ceiling memory 0): a server that takes 5 sessions costs one refusal per cycle, as Postfix's arithmetic predicts", () => {
    const r = run(postfix, 600, () => 5);
    expect(r.rec.ceiling ?? null).toBeNull();
    expect(r.refused).toBeGreaterThan(250);
  });

  it("a fixed limit of 5: learned from the first refusal, then held; only the probes are refused, every 10 then 20 deliveries", () => {
    const off = run(postfix, 600, () => 5);
    const on = run(learning, 600, () => 5);
    console.log(
      `fixed limit 5, 600 s: refused ${off.refused} (Postfix) vs ${on.refused} (ceiling); delivered ${off.delivered} vs ${on.delivered}`,
    );
    expect(on.rec.ceiling).toMatchObject({ limit: 5, gap: 20 });
    // One refused probe per 20 deliveries at the ceiling (5 a second here) once the gap has doubled
    // from 10: a quarter of Postfix's one refusal per 5 deliveries, with every slot used.
    expect(on.refused).toBeLessThanOrEqual(Math.ceil(off.refused / 4) + 3);
    // It keeps probing: a server that raises its limit is found again.
    expect(on.refused).toBeGreaterThanOrEqual(600 / 8);
    expect(on.delivered).toBeGreaterThanOrEqual(off.delivered);
    expect(on.windows.slice(10).every((w) => w >= 5 && w <= 6)).toBe(true);
  });

  it("never probes twice within destination_concurrency_probe_delay, however many deliveries pass", () => {
    const slow = params({
      default_destination_concurrency_ceiling_memory: 3600,
      default_destination_concurrency_probe_delay: 30,
    });
    const r = run(slow, 600, () => 5);
    expect(r.refused).toBeLessThanOrEqual(600 / 30 + 3);
  });

  it("a limit that rises from 5 to 10 is found by the next probe (at most 20 deliveries away), and the window climbs from there", () => {
    const on = run(learning, 1200, (t) => (t < 1300 ? 5 : 10));
    const off = run(postfix, 1200, (t) => (t < 1300 ? 5 : 10));
    const reached = (r: { windows: number[] }) => r.windows.slice(300).findIndex((w) => w >= 10);
    console.log(`limit 5 → 10 at 300 s: window 10 after ${reached(on)} s (ceiling) vs ${reached(off)} s (Postfix)`);
    expect(reached(on)).toBeGreaterThanOrEqual(0);
    // This model opens sessions once a second, so a climb takes a second per step: the probe
    // within 4 s (20 deliveries at 5 a second), then five steps. bench:limiter compares the
    // speed with Postfix's against a real server.
    expect(reached(on)).toBeLessThanOrEqual(4 + 5 + 1);
    expect(on.rec.ceiling?.limit ?? 0).toBeGreaterThanOrEqual(10);
  });

  it("a limit that falls from 10 to 3 is learned at once and held", () => {
    const on = run(learning, 900, (t) => (t < 1300 ? 10 : 3));
    const after = on.windows.slice(305);
    expect(on.rec.ceiling).toMatchObject({ limit: 3 });
    expect(after.every((w) => w <= 4)).toBe(true);
  });

  it("is forgotten ceiling_memory after the last refusal: the window then grows as Postfix's", () => {
    const p = params({
      default_destination_concurrency_ceiling_memory: 120,
      default_destination_concurrency_probe_delay: 1000,
    });
    const r = run(p, 400, (t) => (t < 1010 ? 5 : 50));
    expect(r.rec.ceiling ?? null).toBeNull();
    expect(r.rec.window).toBe(20);
  });

  it("dead detection still works: a server that refuses every session dies as with Postfix's feedback", () => {
    let rec = createDestination("smtp", learning);
    let died = false;
    for (let i = 0; i < 10 && !died; i++) {
      const step = applyDestinationReport(
        rec,
        { busy: Math.max(1, rec.window), siteFailure: REFUSAL },
        1000 + i,
        learning,
      );
      rec = step.record;
      died = step.answer.deadUntil > 0;
    }
    expect(died).toBe(true);
  });

  it("other site failures (a lost connection) teach nothing", () => {
    const rec = applyDestinationReport(
      createDestination("smtp", learning),
      { busy: 5, siteFailure: LOST },
      1000,
      learning,
    ).record;
    expect(rec.ceiling ?? null).toBeNull();
  });

  it("the relay's default keeps a ceiling for an hour and probes at most once a second", () => {
    expect(params()).toMatchObject({ ceilingMemory: 3600, probeDelay: 1 });
  });

  const ceilingPropertyTitle =
    "property: with the option off, every report sequence gives exactly Postfix's records; " +
    "with it on, the window never passes the ceiling by more than the one probe step";
  it(ceilingPropertyTitle, () => {
    const report = fc.record({
      busy: fc.integer({ min: 1, max: 25 }),
      kind: fc.constantFrom("ok", "refusal", "lost"),
      dt: fc.integer({ min: 0, max: 90 }),
    });
    fc.assert(
      fc.property(fc.array(report, { maxLength: 200 }), (reports) => {
        let plain = createDestination("smtp", postfix);
        let off = createDestination(
          "smtp",
          params({ default_destination_concurrency_ceiling_memory: 0, default_destination_concurrency_probe_delay: 5 }),
        );
        let on = createDestination("smtp", learning);
        let t = 1000;
        for (const r of reports) {
          t += r.dt;
          const siteFailure = r.kind === "ok" ? null : r.kind === "refusal" ? REFUSAL : LOST;
          plain = applyDestinationReport(plain, { busy: r.busy, siteFailure }, t, postfix).record;
          off = applyDestinationReport(off, { busy: r.busy, siteFailure }, t, postfix).record;
          on = applyDestinationReport(on, { busy: r.busy, siteFailure }, t, learning).record;
          expect(off).toEqual(plain);
          if (on.ceiling && on.window > 0) expect(on.window).toBeLessThanOrEqual(Math.max(on.ceiling.limit + 1, 1));
          expect(on.window).toBeGreaterThanOrEqual(0);
        }
      }),
      { numRuns: 300 },
    );
  });

  /**
   * One completion at a time: a session finishes (a success with the sessions then in flight),
   * then the client opens sessions up to its window; one past the server's limit is refused at
   * once (reported with the sessions in flight counting it). `limit(k)` is the server's limit
   * at completion k. Returns the window after each completion and the refusals.
   */
  function serial(p: DestinationParams, completions: number, limit: (k: number) => number) {
    let rec: DestinationRecord = createDestination("smtp", p);
    let open = 0;
    let refused = 0;
    const windows: number[] = [];
    let t = 1000;
    const fill = (k: number) => {
      while (open < Math.max(1, rec.window)) {
        if (open + 1 > limit(k)) {
          refused++;
          rec = applyDestinationReport(rec, { busy: open + 1, siteFailure: REFUSAL }, t, p).record;
          if (rec.window <= open) break;
          continue;
        }
        open++;
      }
    };
    fill(0);
    for (let k = 0; k < completions; k++) {
      t += 1;
      rec = applyDestinationReport(rec, { busy: open, siteFailure: null }, t, p).record;
      open--;
      fill(k);
      windows.push(rec.window);
    }
    return { refused, windows };
  }

  it("property: against a fixed limit, the probes cost at most one refusal per 2 × limit deliveries at the ceiling, and never stop", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 15 }), (limit) => {
        const n = 2000;
        const r = serial(learning, n, () => limit);
        // The first refusals teach the limit; then one refused probe per gap, the gap ≥ 2 × limit.
        expect(r.refused).toBeLessThanOrEqual(Math.ceil(n / (2 * limit)) + 3);
        expect(r.refused).toBeGreaterThanOrEqual(Math.floor(n / (PROBE_GAP_MAX * limit + limit + 2)) - 1);
        expect(r.windows.slice(50).every((w) => w >= Math.min(limit, 20) && w <= limit + 1)).toBe(true);
      }),
      { numRuns: 30 },
    );
  });

  it("property: a limit that rises is reached within one probe gap, one round and one delivery per step", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10 }), fc.integer({ min: 1, max: 9 }), (from, up) => {
        const to = Math.min(from + up, 20);
        const riseAt = 500;
        const r = serial(learning, 2000, (k) => (k < riseAt ? from : to));
        const reached = r.windows.slice(riseAt).findIndex((w) => w >= to);
        expect(reached).toBeGreaterThanOrEqual(0);
        expect(reached).toBeLessThanOrEqual(PROBE_GAP_MAX * from + (from + 2) + 2 * (to - from) + 2);
      }),
      { numRuns: 60 },
    );
  });
});
