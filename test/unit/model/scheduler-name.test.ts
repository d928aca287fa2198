/**
 * A transport on several Transport DOs (TRANSPORT_SHARDS, worker/model/delivery.ts): each
 * destination has one scheduler, one shard keeps the transport's own name, and a job's report
 * goes back to the Transport DO that handed it over.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  schedulerName,
  schedulerNames,
  schedulerOf,
  transportOfScheduler,
  type DeliverJob,
} from "../../../worker/model/delivery";
import { settingsOf } from "../../../worker/settings/settings";

describe("schedulerName", () => {
  it("is the transport's own name with one shard, whatever the destination", () => {
    fc.assert(fc.property(fc.string(), fc.string(), (t, n) => schedulerName(t, n, 1) === t));
  });

  it("puts each destination on exactly one of the transport's shards, the same one every time and in any letter case", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("smtp", "bulk", "a~b"),
        fc.domain(),
        fc.integer({ min: 2, max: 64 }),
        (t, n, shards) => {
          const name = schedulerName(t, n, shards);
          expect(schedulerNames(t, shards)).toContain(name);
          expect(schedulerName(t, n.toUpperCase(), shards)).toBe(name);
          expect(transportOfScheduler(name)).toBe(t);
        },
      ),
    );
  });

  it("spreads many destinations over every shard", () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 4000; i++) {
      const name = schedulerName("smtp", `d${i}.example`, 8);
      counts.set(name, (counts.get(name) ?? 0) + 1);
    }
    expect(counts.size).toBe(8);
    for (const n of counts.values()) expect(n).toBeGreaterThan(350);
  });

  it("sends a job's report to the Transport DO that handed it over, or to its destination's shard for a job that does not say", () => {
    const job = {
      entryId: 1,
      messageId: "m",
      attempt: 1,
      transport: "smtp",
      nexthop: "x.example",
      rcpts: [],
      leaseUntil: 0,
    } as DeliverJob;
    expect(schedulerOf({ ...job, scheduler: "smtp~3" }, 8)).toBe("smtp~3");
    expect(schedulerOf(job, 8)).toBe(schedulerName("smtp", "x.example", 8));
  });

  it("TRANSPORT_SHARDS: default 1, at most 64, anything invalid the default", () => {
    expect(settingsOf({}).transportShards).toBe(1);
    expect(settingsOf({ TRANSPORT_SHARDS: "8" }).transportShards).toBe(8);
    expect(settingsOf({ TRANSPORT_SHARDS: "1000" }).transportShards).toBe(64);
    expect(settingsOf({ TRANSPORT_SHARDS: "0" }).transportShards).toBe(1);
    expect(settingsOf({ TRANSPORT_SHARDS: "many" }).transportShards).toBe(1);
  });
});
