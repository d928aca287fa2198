import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { admissionsOf, KEPT_RETRIES_MAX, type AdmissionRecord } from "../../durable-objects/transport/admissions";
import { emptyRing } from "../../durable-objects/transport/journal-schema";
import { pendingRecipients } from "../../durable-objects/transport/delivery-state";
import type { TransportQueue } from "../../durable-objects/transport/transport-queue";
import { REPORT_WAIT_MS } from "../../durable-objects/transport/transport-core";
import { eventually } from "./helpers";

// The workers project runs with TRANSPORT_TINY_SNAPSHOT_CHARS 0 (its ring tests see the ring);
// these objects are switched to the default after each start.
type Stub = DurableObjectStub<TransportQueue>;
type Probe = { journal: { tinyChars: number }; done: { waiting: Map<string, number> } };

function tiny(stub: Stub, chars = 65_536): Promise<void> {
  return runInDurableObject(stub, (instance, state) => {
    (instance as unknown as Probe).journal.tinyChars = chars;
    admissionsOf(state.storage.sql).enabled = chars > 0;
  });
}

function rcpts(n: number, domain: string) {
  return Array.from({ length: n }, (_, i) => ({ address: `user${i}@${domain}`, transport: "smtp", nexthop: domain }));
}

/** Admission rows, the records kept with the stored snapshot, and ring rows. */
function stored(stub: Stub): Promise<{ rows: string[]; kept: string[]; ring: number }> {
  return runInDurableObject(stub, (_i, state) => {
    const sql = state.storage.sql;
    const meta = sql.exec<{ admissions: string | null }>("SELECT admissions FROM snapshot_meta").toArray()[0];
    return {
      rows: sql
        .exec<{ core_id: string }>("SELECT core_id FROM admission ORDER BY core_id")
        .toArray()
        .map((r) => r.core_id),
      kept: (JSON.parse(meta?.admissions ?? "[]") as { coreId: string }[]).map((r) => r.coreId).sort(),
      ring: sql.exec<{ n: number }>("SELECT count(*) AS n FROM journal_ring").one().n,
    };
  });
}

/** Retry and final-recipient rows. */
function retryRows(stub: Stub): Promise<{ retries: number; finals: number }> {
  return runInDurableObject(stub, (_i, state) => {
    const sql = state.storage.sql;
    return {
      retries: sql.exec<{ n: number }>("SELECT count(*) AS n FROM retry_due").one().n,
      finals: sql.exec<{ n: number }>("SELECT count(*) AS n FROM final_rcpt").one().n,
    };
  });
}

/** The records kept in memory now. */
function keptRecords(stub: Stub): Promise<AdmissionRecord[]> {
  return runInDurableObject(stub, (_i, state) => {
    const kept = admissionsOf(state.storage.sql);
    return [...kept.ids()].map((id) => ({ ...kept.get(id)! }));
  });
}

/** Admits and dispatches one lone message, and expects its report to leave the alarm its dispatch armed. */
async function expectReportKeepsAlarm(stub: Stub, id: string, domain: string): Promise<void> {
  await stub.admit({ id, createTime: 1, rcpts: rcpts(1, domain) });
  const { entries } = await stub.dispatch(10);
  const alarm = () => runInDurableObject(stub, (_i, state) => state.storage.getAlarm());
  const armed = await alarm();
  expect(armed).not.toBeNull();
  for (const e of entries) await stub.report(e.entryId, { status: "ok" });
  expect(await alarm()).toBe(armed);
}

async function evict(name: string): Promise<Stub> {
  await expect(
    runInDurableObject(env.TRANSPORT_QUEUE.getByName(name), (_i, state) => state.abort("evict for test")),
  ).rejects.toThrow("evict for test");
  return env.TRANSPORT_QUEUE.getByName(name);
}

// What a Transport DO writes for its records, its alarm and its ring (rows are billed one by one).
describe("a Transport DO's rows: admission records kept with a tiny core's snapshot (admissions.ts), the alarm, the ring", () => {
  it("writes no admission row; after an eviction the snapshot's records admit nothing twice and give the recipients; the done one goes with a new snapshot after its grace", async () => {
    let stub = env.TRANSPORT_QUEUE.getByName("adm-tiny");
    await tiny(stub);
    await stub.admit({ id: "m1", createTime: 1, rcpts: rcpts(2, "a.example") });
    expect(await stored(stub)).toEqual({ rows: [], kept: ["m1"], ring: 0 });

    stub = await evict("adm-tiny");
    await tiny(stub);
    await stub.admit({ id: "m1", createTime: 1, rcpts: rcpts(2, "a.example") }); // nothing twice
    const { entries } = await stub.dispatch(10);
    expect(entries.flatMap((e) => e.rcpts.map((r) => `${e.messageId}:${r.address}`))).toEqual([
      "m1:user0@a.example",
      "m1:user1@a.example",
    ]);
    for (const e of entries) await stub.report(e.entryId, { status: "ok" });
    expect(await stored(stub)).toEqual({ rows: [], kept: ["m1"], ring: 0 });
    // Within the grace a late admit changes nothing; after it, the record goes.
    await stub.admit({ id: "m1", createTime: 1, rcpts: rcpts(2, "a.example") });
    expect((await stub.dispatch(10)).entries).toEqual([]);
    await runInDurableObject(stub, (instance) => {
      const waiting = (instance as unknown as Probe).done.waiting;
      for (const [id, at] of waiting) waiting.set(id, at - 61);
    });
    await stub.dispatch(1);
    await runDurableObjectAlarm(stub);
    await eventually(
      async () => ((await stored(stub)).kept.length === 0 ? true : undefined),
      5000,
      "a snapshot without the record",
    );
    expect(await stored(stub)).toEqual({ rows: [], kept: [], ring: 0 });
  });

  it("keeps a deferred attempt's retry with its record (no admission, retry_due or final_rcpt row); after an eviction the retry comes with the recipients not final, and every record and retry is a row before the journal writes a ring row", async () => {
    let stub = env.TRANSPORT_QUEUE.getByName("adm-rows");
    await tiny(stub);
    const now = Math.floor(Date.now() / 1000);
    await stub.admit({ id: "d1", createTime: now, rcpts: rcpts(2, "b.example") });
    await stub.admit({ id: "k1", createTime: now, rcpts: rcpts(1, "c.example") });
    expect(await stored(stub)).toEqual({ rows: [], kept: ["d1", "k1"], ring: 0 });
    const sent = (await stub.dispatch(10)).entries;
    for (const e of sent.filter((x) => x.messageId === "d1")) await stub.report(e.entryId, { status: "defer" }, [0]);
    expect(await stored(stub)).toEqual({ rows: [], kept: ["d1", "k1"], ring: 0 });
    expect(await retryRows(stub)).toEqual({ retries: 0, finals: 0 });
    const due = (await keptRecords(stub)).find((r) => r.coreId === "d1")!.due!;
    expect(due).toBeGreaterThan(Date.now()); // the back-off, in ms
    expect(await runInDurableObject(stub, (_i, state) => state.storage.getAlarm())).toBeLessThanOrEqual(due);

    stub = await evict("adm-rows");
    await tiny(stub);
    expect((await stub.metrics(5)).deferred).toBe(1);
    expect((await stub.inspect()).deferred[0]).toMatchObject({ destination: "TOTAL", total: 1 });
    await runInDurableObject(stub, (_o, state) => admissionsOf(state.storage.sql).flushDue(0));
    await runDurableObjectAlarm(stub);
    const retried = (await stub.dispatch(10)).entries.filter((e) => e.messageId === "d1#2");
    expect(retried.flatMap((e) => e.rcpts.map((r) => r.address))).toEqual(["user1@b.example"]);
    // d1 was replaced: its record goes after the grace, as a done attempt's does, with no row.
    expect(await stored(stub)).toEqual({ rows: [], kept: ["d1", "d1#2", "k1"], ring: 0 });
    // k1's entry, restored, was asked about at that alarm (a start's leases are due at the first
    // check): no agent holds it (dispatched by hand), so it was crashed and waits for its retry.
    const records = await keptRecords(stub);
    expect(records.filter((r) => r.coreId !== "k1").every((r) => r.due === undefined && r.final === undefined)).toBe(
      true,
    );
    expect(records.find((r) => r.coreId === "k1")?.due).toBeGreaterThan(Date.now());
    expect(await runInDurableObject(stub, (i) => [...(i as unknown as Probe).done.waiting.keys()])).toEqual(["d1"]);

    // No longer tiny: the next flush is a ring row, and every record is a row before it.
    for (const e of sent.filter((x) => x.messageId === "k1")) await stub.report(e.entryId, { status: "defer" });
    await tiny(stub, 1);
    await stub.admit({ id: "x1", createTime: now, rcpts: rcpts(1, "c.example") });
    const after = await stored(stub);
    expect(after.ring).toBeGreaterThan(0);
    expect(after.rows).toEqual(["d1", "d1#2", "k1", "x1"]);
    expect((await retryRows(stub)).retries).toBe(1); // k1's retry, a row with its record
    stub = await evict("adm-rows");
    const all = (await stub.dispatch(10)).entries.map((e) => e.messageId).sort();
    expect(all).toEqual(["x1"]); // d1#2 is in flight, k1 waits for its retry, x1 replayed from the ring with its record
  });

  it("keeps at most KEPT_RETRIES_MAX retries with the records: past them a deferred attempt's record and retry are rows", async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("adm-retry-cap");
    await tiny(stub);
    const now = Math.floor(Date.now() / 1000);
    const n = KEPT_RETRIES_MAX + 2;
    for (let i = 0; i < n; i++) await stub.admit({ id: `c${i}`, createTime: now, rcpts: rcpts(1, `c${i}.example`) });
    const sent = (await stub.dispatch(n)).entries;
    expect(sent.length).toBe(n);
    for (const e of sent) await stub.report(e.entryId, { status: "defer" });
    expect((await keptRecords(stub)).filter((r) => r.due !== undefined).length).toBe(KEPT_RETRIES_MAX);
    expect(await retryRows(stub)).toEqual({ retries: 2, finals: 0 });
    expect((await stored(stub)).rows.length).toBe(2);
    expect((await stub.metrics(5)).deferred).toBe(n);
  });

  it("keeps recipients final while their attempt goes on in its record, not in rows; after an eviction the retry names only the others", async () => {
    let stub = env.TRANSPORT_QUEUE.getByName("adm-final");
    await tiny(stub);
    const now = Math.floor(Date.now() / 1000);
    const two = [...rcpts(1, "fa.example"), { address: "user1@fb.example", transport: "smtp", nexthop: "fb.example" }];
    await stub.admit({ id: "f1", createTime: now, rcpts: two });
    const sent = (await stub.dispatch(10)).entries;
    const to = (domain: string) => sent.find((e) => e.nexthop === domain)!.entryId;
    await stub.report(to("fa.example"), { status: "ok" }, [0]);
    const kept = () =>
      runInDurableObject(stub, (_i, state) => {
        const sql = state.storage.sql;
        const meta = sql.exec<{ admissions: string | null }>("SELECT admissions FROM snapshot_meta").one();
        return {
          rows: sql.exec<{ n: number }>("SELECT count(*) AS n FROM final_rcpt").one().n,
          final: (JSON.parse(meta.admissions ?? "[]") as { coreId: string; final?: number[] }[]).map((r) => [
            r.coreId,
            r.final ?? [],
          ]),
        };
      });
    expect(await kept()).toEqual({ rows: 0, final: [["f1", [0]]] });
    // What an expiry's notice and the operator's views read as the attempt's open recipients.
    const pending = await runInDurableObject(stub, (_i, state) => pendingRecipients(state.storage.sql, "f1"));
    expect(pending.map((r) => r.address)).toEqual(["user1@fb.example"]);

    stub = await evict("adm-final");
    await tiny(stub);
    await stub.report(to("fb.example"), { status: "defer" });
    // Deferred: the record keeps its retry and its final recipient, no row.
    expect(await stored(stub)).toMatchObject({ rows: [], kept: ["f1"] });
    expect(await kept()).toEqual({ rows: 0, final: [["f1", [0]]] });
    await runInDurableObject(stub, (_o, state) => admissionsOf(state.storage.sql).flushDue(0));
    await runDurableObjectAlarm(stub);
    const retried = (await stub.dispatch(10)).entries.filter((e) => e.messageId === "f1#2");
    expect(retried.flatMap((e) => e.rcpts.map((r) => r.address))).toEqual(["user1@fb.example"]);
  });

  it("a lone message's report leaves the alarm its dispatch armed: the grace of its records ends on the agent check's grid", async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("adm-alarm");
    await tiny(stub);
    await expectReportKeepsAlarm(stub, "a1", "d.example");
  });

  it("a lone message's report keeps the alarm its dispatch armed when the grace of its records is shorter than the agent check's step (a short retention)", async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("adm-alarm-short");
    await tiny(stub);
    await runInDurableObject(stub, (instance) => {
      (instance as unknown as { done: { graceSec: number } }).done.graceSec = 1;
    });
    await expectReportKeepsAlarm(stub, "s1", "s.example");
    // It forgets the records when it fires (here as soon as their grace is over).
    await new Promise((r) => setTimeout(r, 1_100));
    await runDurableObjectAlarm(stub);
    expect(await runInDurableObject(stub, (i) => (i as unknown as Probe).done.waiting.size)).toBe(0);
  });

  it("a report that ends its message while other entries are in flight writes no row; a deferral does, and so does the last report, REPORT_WAIT_MS later while mail flows", async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("lazy-report");
    await tiny(stub);
    for (const id of ["r1", "r2", "r3"]) await stub.admit({ id, createTime: 1, rcpts: rcpts(1, `${id}.example`) });
    const entries = (await stub.dispatch(10)).entries;
    const entry = (id: string) => entries.find((e) => e.messageId === id)!.entryId;
    const snapshot = () =>
      runInDurableObject(stub, (_i, state) =>
        state.storage.sql.exec<{ data: string | null }>("SELECT data FROM snapshot_meta").one(),
      );
    const dispatched = await snapshot();
    await stub.report(entry("r1"), { status: "ok" }, [0]);
    expect(await snapshot()).toEqual(dispatched);
    await stub.report(entry("r2"), { status: "defer" });
    const deferred = await snapshot();
    expect(deferred).not.toEqual(dispatched);
    expect(deferred.data).not.toContain('"r1"'); // the waiting report went with it
    await stub.report(entry("r3"), { status: "ok" }, [0]);
    // Three admissions just came: mail flows, so the row waits for the next one, or REPORT_WAIT_MS.
    expect(await snapshot()).toEqual(deferred);
    await eventually(
      async () => ((await snapshot()).data?.includes('"r3"') ? undefined : true),
      REPORT_WAIT_MS * 8,
      "the waiting report's row",
    );
  });

  it("a lone message's report writes its row at once: nothing in flight and no mail flowing (an idle object could be evicted first)", async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("lone-report");
    await tiny(stub);
    await stub.admit({ id: "l1", createTime: 1, rcpts: rcpts(1, "l1.example") });
    const [entry] = (await stub.dispatch(10)).entries;
    await runInDurableObject(stub, (i) => {
      (i as unknown as { admittedAt: number[] }).admittedAt = [0, Date.now() - 60_000]; // the last came a minute ago
    });
    await stub.report(entry!.entryId, { status: "ok" }, [0]);
    const data = await runInDurableObject(stub, (_i, state) =>
      state.storage.sql.exec<{ data: string | null }>("SELECT data FROM snapshot_meta").one(),
    );
    expect(data.data).not.toContain('"l1"');
  });

  it("a stop before that row loses only the report: its entry comes back in flight, leased, and is not dispatched again", async () => {
    let stub = env.TRANSPORT_QUEUE.getByName("lazy-report-stop");
    await tiny(stub);
    for (const id of ["s1", "s2"]) await stub.admit({ id, createTime: 1, rcpts: rcpts(1, `${id}.example`) });
    const entries = (await stub.dispatch(10)).entries;
    await stub.report(entries.find((e) => e.messageId === "s1")!.entryId, { status: "ok" }, [0]);
    stub = await evict("lazy-report-stop");
    await tiny(stub);
    const leased = await runInDurableObject(stub, (i) =>
      (i as unknown as { leases: { list(): { coreId: string }[] } }).leases.list().map((l) => l.coreId),
    );
    expect(leased.sort()).toEqual(["s1", "s2"]);
    expect((await stub.dispatch(10)).entries).toEqual([]);
  });

  it("empties an idle ring of many rows for two rows written: the table dropped and made again, not each row deleted", async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("ring-empty"); // the ring is used here (tiny 0)
    for (let i = 0; i < 20; i++) await stub.admit({ id: `e${i}`, createTime: 1, rcpts: rcpts(1, "e.example") });
    const r = await runInDurableObject(stub, (_i, state) => {
      const sql = state.storage.sql;
      const before = sql.exec<{ n: number }>("SELECT count(*) AS n FROM journal_ring").one().n;
      const written = emptyRing(sql, before);
      sql.exec("INSERT INTO journal_ring (slot, seq, cmd) VALUES (1, 1, '[]')"); // made again, as it was
      return { before, written, after: sql.exec<{ n: number }>("SELECT count(*) AS n FROM journal_ring").one().n };
    });
    expect(r.before).toBeGreaterThan(10);
    expect(r).toMatchObject({ written: 2, after: 1 });
  });
});
