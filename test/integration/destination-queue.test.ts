import { env, runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { HISTORY_LIMIT } from "../../durable-objects/destination/destination-queue";

const fail = { dsnStatus: "4.4.1", reason: "connection refused" };

describe("DestinationQueue Durable Object", () => {
  it("keeps the last 500 feedback events, oldest first", async () => {
    const stub = env.DESTINATION_QUEUE.getByName("smtp:history.example");
    for (let i = 0; i < HISTORY_LIMIT + 20; i++) await stub.report({ transport: "smtp", busy: 1, siteFailure: null });
    const { record, history } = await stub.get();
    expect(history).toHaveLength(HISTORY_LIMIT);
    expect(history.every((h) => h.kind === "success")).toBe(true);
    expect(record?.window).toBe(6); // the safety rule: busy 1 + initial 5
  }, 30_000); // 520 RPCs: seconds on a loaded machine

  it("ignores site failures while dead, revives on an in-flight success with window = busy, and a flush revives at once", async () => {
    const stub = env.DESTINATION_QUEUE.getByName("smtp:flaky.example");
    for (const busy of [5, 3, 2]) await stub.report({ transport: "smtp", busy, siteFailure: fail });
    const dead = await stub.report({ transport: "smtp", busy: 4, siteFailure: fail });
    expect(dead.window).toBe(0);
    expect((await stub.get()).history.at(-1)).toMatchObject({ kind: "site_failure", outcome: "ignored" });
    expect(await stub.report({ transport: "smtp", busy: 4, siteFailure: null })).toEqual({ window: 4, deadUntil: 0 });
    for (const busy of [4, 3, 2]) await stub.report({ transport: "smtp", busy, siteFailure: fail });
    expect((await stub.get()).record?.window).toBe(0);
    expect(await stub.flush()).toEqual({ window: 5, deadUntil: 0 });
    expect(await runDurableObjectAlarm(stub)).toBe(false); // the revival alarm was cancelled
  });

  it("answers dead-until, and its alarm revives the destination at the initial window", async () => {
    const stub = env.DESTINATION_QUEUE.getByName("smtp:down.example");
    let answer = { window: 5, deadUntil: 0 };
    for (const busy of [5, 3, 2]) answer = await stub.report({ transport: "smtp", busy, siteFailure: fail });
    const now = Math.floor(Date.now() / 1000);
    expect(answer.window).toBe(0);
    expect(answer.deadUntil).toBeGreaterThanOrEqual(now + 299);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect((await stub.get()).record).toMatchObject({ window: 5, deadUntil: 0, reason: null });
  });

  it("applies a batch of reports exactly as the same reports one by one", async () => {
    const reports = [5, 3, 2, 4].map((busy, i) => ({ transport: "smtp", busy, siteFailure: i === 3 ? null : fail }));
    const one = env.DESTINATION_QUEUE.getByName("smtp:one-by-one.example");
    let last = { window: 0, deadUntil: 0 };
    for (const r of reports) last = await one.report(r);
    const batch = env.DESTINATION_QUEUE.getByName("smtp:batched.example");
    expect(await batch.reportMany(reports)).toEqual(last);
    const [a, b] = [await one.get(), await batch.get()];
    // The two runs may fall in different seconds: the report time is the only field that may differ.
    expect({ ...b.record, lastReportAt: 0 }).toEqual({ ...a.record, lastReportAt: 0 });
    expect(b.history.map((h) => ({ ...h, at: 0 }))).toEqual(a.history.map((h) => ({ ...h, at: 0 })));
  });
});
