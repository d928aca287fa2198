// The Transport DO's dispatch-to-report times (issue 11: "report the time an entry spends from
// dispatch to report beside the rates"): kept with the in-memory leases, over the last reports.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Leases, RECENT_REPORTS } from "../../../durable-objects/transport/leases";

/** Just enough SqlStorage for Leases: no stored horizon, writes ignored. */
const sql = { exec: () => ({ toArray: () => [] }) } as unknown as SqlStorage;

describe("Leases.inFlightTimes", () => {
  it("is null before any report, then times each entry from add to take", () => {
    const l = Leases.restore(sql, [], [], 1000, 30);
    expect(l.inFlightTimes()).toBeNull();
    l.add(
      [
        { entryId: 1, messageId: "a#1" },
        { entryId: 2, messageId: "b#1" },
      ],
      2000,
      10_000,
    );
    expect(l.take(1, 10_250)).toBe("a#1");
    expect(l.take(2, 11_000)).toBe("b#1");
    expect(l.take(2, 12_000)).toBeNull(); // reported twice: the second is not timed
    expect(l.inFlightTimes()).toEqual({
      reports: 2,
      mean_ms: 625,
      p50_ms: 250,
      p99_ms: 1000,
      max_ms: 1000,
      peak_in_flight: 2,
    });
  });

  it("does not time entries leased before a start (their dispatch time is unknown), nor a take without a clock", () => {
    const l = Leases.restore(sql, [], [[7, "c#1"]], 1000, 30);
    expect(l.take(7, 50_000)).toBe("c#1");
    l.add([{ entryId: 8, messageId: "d#1" }], 2000);
    expect(l.take(8, 60_000)).toBe("d#1");
    l.add([{ entryId: 9, messageId: "e#1" }], 2000, 1);
    expect(l.take(9)).toBe("e#1");
    expect(l.inFlightTimes()).toBeNull();
  });

  it("keeps the last RECENT_REPORTS times, whatever came before (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 100_000 }), { minLength: 1, maxLength: 3 * RECENT_REPORTS }),
        (times) => {
          const l = Leases.restore(sql, [], [], 1000, 30);
          times.forEach((t, i) => {
            l.add([{ entryId: i, messageId: `m${i}#1` }], 2000, 0);
            l.take(i, t);
          });
          const last = times.slice(-RECENT_REPORTS).sort((a, b) => a - b);
          const got = l.inFlightTimes()!;
          expect(got.reports).toBe(last.length);
          expect(got.max_ms).toBe(last[last.length - 1]);
          expect(got.p50_ms).toBe(last[Math.ceil(last.length / 2) - 1]);
          expect(got.mean_ms).toBe(Math.round(last.reduce((a, x) => a + x, 0) / last.length));
          expect(got.peak_in_flight).toBe(1); // one entry leased at a time
        },
      ),
      { numRuns: 50 },
    );
  });
});

describe("Leases: when to ask a delivery agent about an entry", () => {
  it("counts an entry's age from its hand-off, its restore or its last confirmation", () => {
    const l = Leases.restore(sql, [], [[7, "c#1"]], 1000, 30, null, 5_000); // restored at 5 s
    l.add([{ entryId: 8, messageId: "d#1" }], 2000, 6_000);
    expect(l.unconfirmed(6_999, 2_000)).toEqual([]);
    expect(l.unconfirmed(7_000, 2_000)).toEqual([7]);
    expect(l.unconfirmed(8_000, 2_000)).toEqual([7, 8]); // oldest first
    l.confirm([7], 8_000);
    expect(l.unconfirmed(8_000, 2_000)).toEqual([8]);
    expect(l.unconfirmed(10_000, 2_000)).toEqual([8, 7]);
    l.take(8);
    expect(l.unconfirmed(10_000, 2_000)).toEqual([7]);
    l.confirm([99], 10_000); // not leased: nothing to confirm
    expect(l.list().map((x) => x.entryId)).toEqual([7]);
  });

  it("is due for the alarm at the oldest entry's age, rounded up to the check period (unix s)", () => {
    const l = Leases.restore(sql, [], [], 1000, 30);
    expect(l.nextCheck(60_000)).toBeNull();
    l.add([{ entryId: 1, messageId: "a#1" }], 2000, 1_000_000); // 1000 s: due at 1060 s, rounded up to 1080 s
    l.add([{ entryId: 2, messageId: "b#1" }], 2000, 1_030_000);
    expect(l.nextCheck(60_000)).toBe(1080);
    l.take(1);
    expect(l.nextCheck(60_000)).toBe(1140); // 1090 s → 1140 s
  });

  it("moves the alarm at most once per check period while entries come and go (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 2_000 }), { minLength: 1, maxLength: 300 }), (steps) => {
        const l = Leases.restore(sql, [], [], 1000, 30);
        let now = 10_000_000,
          id = 0;
        const seen = new Set<number>();
        l.add([{ entryId: id, messageId: `m${id}#1` }], 2000, now);
        for (const dt of steps) {
          // entries in flight for under a second each, one after another
          now += dt;
          l.add([{ entryId: ++id, messageId: `m${id}#1` }], 2000, now);
          l.take(id - 1);
          const at = l.nextCheck(60_000)!;
          expect(at * 1000).toBeGreaterThanOrEqual(now + 60_000); // never before the entry is due
          expect(at * 1000).toBeLessThan(now + 120_000);
          expect(at % 60).toBe(0);
          seen.add(at);
        }
        expect(seen.size).toBeLessThanOrEqual(Math.ceil((now - 10_000_000) / 60_000) + 1);
      }),
      { numRuns: 50 },
    );
  });
});
