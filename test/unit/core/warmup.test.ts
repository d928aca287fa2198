// IP warm-up (issue 13, item 4): plans ramp caps per provider over days (core/warmup.ts), and
// caps per UTC hour and day on a policy key hold mail back (blocked_by warmup) without
// bouncing it.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  admitMessage,
  DEFAULT_WARMUP_RAMP,
  dispatchAll,
  explainMessage,
  parseWarmupPlan,
  reportDelivery,
  setPolicy,
  tick,
  warmupCaps,
  warmupDay,
  warmupKey,
} from "../../../durable-objects/core";
import { makeQmgr, type TestRcpt } from "./harness";

describe("warm-up plans", () => {
  it("cap each provider per day and hour by the ramp's day, scaled per provider, and end with the ramp", () => {
    const plan = { ramp: [{ per_day: 50 }, { per_day: 100, per_hour: 40 }], scale: { yahoo: 0.5 } };
    expect(warmupCaps(plan, 0, "google")).toEqual({ perDay: 50, perHour: 5 });
    expect(warmupCaps(plan, 1, "google")).toEqual({ perDay: 100, perHour: 40 });
    expect(warmupCaps(plan, 1, "yahoo")).toEqual({ perDay: 50, perHour: 20 });
    expect(warmupCaps(plan, 2, "google")).toBeNull();
    expect(warmupDay(1000, 1000 + 86_399)).toBe(0);
    expect(warmupDay(1000, 1000 + 86_400)).toBe(1);
    expect(warmupKey("1.2.3.4:1080", "google")).toBe("egress:1.2.3.4:1080+site:google");
  });

  it("the default ramp is valid and never falls; invalid plans are refused with each problem", () => {
    expect(parseWarmupPlan({ ramp: DEFAULT_WARMUP_RAMP })).toMatchObject({ ok: true });
    for (let d = 1; d < DEFAULT_WARMUP_RAMP.length; d++)
      expect(DEFAULT_WARMUP_RAMP[d]!.per_day).toBeGreaterThanOrEqual(DEFAULT_WARMUP_RAMP[d - 1]!.per_day);
    const bad = parseWarmupPlan({
      ramp: [{ per_day: 10 }, { per_day: 5 }, { per_day: 0 }],
      scale: { google: -1 },
      extra: 1,
    });
    expect(!bad.ok && bad.errors.map((e) => e.split(":")[0])).toEqual(["extra", "ramp[1]", "ramp[2]", "scale"]);
  });
});

function setup(n: number) {
  const { q, src } = makeQmgr({ default_destination_recipient_limit: 2, initial_destination_concurrency: 5 });
  for (let i = 0; i < n; i++) {
    src.files.set(`m${i}`, [
      {
        n: i,
        address: `u${i}@a.test`,
        transport: "smtp",
        nexthop: "a.test",
        egress: "ip1",
        site: "google",
      } as TestRcpt,
    ]);
    admitMessage(q, { id: `m${i}`, createTime: 0, rcptTotal: 1 }, 0);
  }
  return q;
}

describe("caps on a key", () => {
  it("hold selections beyond the hour's cap until the next hour, and beyond the day's until the next day, as warmup", () => {
    const q = setup(10);
    setPolicy(q, "egress:ip1+site:google", { caps: { perHour: 2, perDay: 3, label: "warmup" } }, 0);
    const first = dispatchAll(q, 0);
    expect(first).toHaveLength(2);
    for (const e of first) reportDelivery(q, e.id, { status: "ok" }, 1);
    expect(dispatchAll(q, 1)).toHaveLength(0);
    const waiting = explainMessage(q, "m9", 1)[0]!.blockedBy;
    expect(waiting).toMatchObject({
      kind: "policy",
      key: "egress:ip1+site:google",
      reason: "cap",
      label: "warmup",
      until: 3600,
    });
    tick(q, 3600);
    const second = dispatchAll(q, 3600);
    expect(second).toHaveLength(1); // the day's third
    for (const e of second) reportDelivery(q, e.id, { status: "ok" }, 3601);
    expect(explainMessage(q, "m9", 3601)[0]!.blockedBy).toMatchObject({ reason: "cap", until: 86_400 });
    tick(q, 86_400);
    expect(dispatchAll(q, 86_400)).toHaveLength(2);
  });

  it("a delivery selected before its destination's provider and egress were known counts against their caps once its report tells them", () => {
    const { q, src } = makeQmgr({ default_destination_recipient_limit: 2, initial_destination_concurrency: 5 });
    for (let i = 0; i < 4; i++) {
      src.files.set(`n${i}`, [{ n: i, address: `u${i}@b.test`, transport: "smtp", nexthop: "b.test" } as TestRcpt]);
      admitMessage(q, { id: `n${i}`, createTime: 0, rcptTotal: 1 }, 0);
    }
    setPolicy(q, "egress:ip1+site:google", { caps: { perHour: 2, label: "warmup" } }, 0);
    const [e] = dispatchAll(q, 0, 1);
    reportDelivery(q, e!.id, { status: "ok", site: { name: "google" }, egress: "ip1" }, 1);
    expect(q.policies.get("egress:ip1+site:google")!.hour).toEqual({ start: 0, n: 1 });
    expect(dispatchAll(q, 1)).toHaveLength(1); // the hour's second
    expect(explainMessage(q, "n3", 1)[0]!.blockedBy).toMatchObject({ reason: "cap", label: "warmup" });
  });

  it("property: no UTC hour sees more selections than the hour's cap, no day more than the day's", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 12 }),
        fc.array(fc.integer({ min: 1, max: 4000 }), { minLength: 1, maxLength: 60 }),
        (perHour, perDay, gaps) => {
          const q = setup(60);
          setPolicy(q, "egress:ip1+site:google", { caps: { perHour, perDay, label: "warmup" } }, 0);
          const hours = new Map<number, number>();
          const days = new Map<number, number>();
          let t = 0;
          for (const gap of gaps) {
            t += gap;
            tick(q, t);
            for (const e of dispatchAll(q, t)) {
              hours.set(Math.floor(t / 3600), (hours.get(Math.floor(t / 3600)) ?? 0) + 1);
              days.set(Math.floor(t / 86_400), (days.get(Math.floor(t / 86_400)) ?? 0) + 1);
              reportDelivery(q, e.id, { status: "ok" }, t);
            }
          }
          for (const n of hours.values()) expect(n).toBeLessThanOrEqual(perHour);
          for (const n of days.values()) expect(n).toBeLessThanOrEqual(perDay);
        },
      ),
      { numRuns: 200 },
    );
  });
});
