import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { snapshotQmgr } from "../../durable-objects/core";
import { restoreLeases } from "../../durable-objects/transport/delivery-state";
import { SMALL_SNAPSHOT_CHARS } from "../../durable-objects/transport/journal-sizes";
import type { TransportQueue } from "../../durable-objects/transport/transport-queue";
import { expireLeases, leasesIn } from "./leases-probe";
import { eventually } from "./helpers";

function rcpts(n: number, domains: string[]) {
  return Array.from({ length: n }, (_, i) => {
    const d = domains[i % domains.length]!;
    return { address: `user${i}@${d}`, transport: "smtp", nexthop: d };
  });
}

function snapshotOf(stub: DurableObjectStub<TransportQueue>) {
  return runInDurableObject(stub, (instance) =>
    JSON.stringify(snapshotQmgr((instance as unknown as { qmgr: Parameters<typeof snapshotQmgr>[0] }).qmgr)),
  );
}

/** A snapshot with clock readings (unix seconds within an hour of now) as "T": two objects driven alike may straddle a second. */
function timeless(json: string): string {
  const now = Date.now() / 1000;
  return JSON.stringify(JSON.parse(json), (_k, v: unknown) =>
    typeof v === "number" && Math.abs(v - now) < 3600 ? "T" : v,
  );
}

/** Rows in one of a Transport DO's tables. */
function count(stub: DurableObjectStub<TransportQueue>, table: string): Promise<number> {
  return runInDurableObject(
    stub,
    (_i, state) => state.storage.sql.exec<{ n: number }>(`SELECT count(*) AS n FROM ${table}`).one().n,
  );
}

/** The done attempts whose records wait for their grace (done-records.ts), in the order they ended. */
type DoneProbe = { done: { waiting: Map<string, number> } };
function waitingDone(stub: DurableObjectStub<TransportQueue>): Promise<string[]> {
  return runInDurableObject(stub, (instance) => [...(instance as unknown as DoneProbe).done.waiting.keys()]);
}

/** Moves the end of every waiting done attempt `sec` seconds back. */
function endedAgo(stub: DurableObjectStub<TransportQueue>, sec: number): Promise<void> {
  return runInDurableObject(stub, (instance) => {
    const waiting = (instance as unknown as DoneProbe).done.waiting;
    for (const [id, at] of waiting) waiting.set(id, at - sec);
  });
}

/** Writes what the object holds only in memory: reports that ended their message while other entries were in flight (TransportCore.arm). */
function written(stub: DurableObjectStub<TransportQueue>): Promise<void> {
  return runInDurableObject(stub, (instance) => {
    const t = instance as unknown as { journal: { flush(q: unknown): void }; qmgr: unknown };
    t.journal.flush(t.qmgr);
  });
}

describe("TransportQueue Durable Object (shell over the core)", () => {
  it("admits, dispatches and completes through RPC, persisting the core state in its SQLite", async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("smtp-basic");
    await stub.admit({ id: "m1", createTime: 1, rcpts: rcpts(120, ["a.example", "b.example", "c.example"]) });
    const { entries } = await stub.dispatch(100);
    // 3 destinations × initial window 5, recipients batched 50 per entry: 3 entries of 40.
    expect(entries.map((e) => e.rcpts.length).sort()).toEqual([40, 40, 40]);
    const done = [];
    for (const e of entries) done.push(...(await stub.report(e.entryId, { status: "ok" })).effects);
    expect(done).toContainEqual({ kind: "message-done", messageId: "m1" });
    const again = await stub.report(entries[0]!.entryId, { status: "ok" });
    expect(again.applied).toBe(false); // reports are idempotent by entry id
  });

  const smallMessageTitle =
    "keeps the recipients of a small message in its admission row (no rcpt rows), a large " +
    "one's as rows; both read, deferred, shaped and retried alike";
  it(smallMessageTitle, async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("smtp-inline-rcpts");
    const now = Math.floor(Date.now() / 1000);
    await stub.admit({ id: "small", createTime: now, rcpts: rcpts(3, ["a.example"]) });
    await stub.admit({ id: "large", createTime: now, rcpts: rcpts(60, ["a.example"]) });
    const stored = await runInDurableObject(stub, (_o, state) => ({
      rows: state.storage.sql
        .exec<{ message_id: string; n: number }>("SELECT message_id, count(*) AS n FROM rcpt GROUP BY message_id")
        .toArray(),
      inline: state.storage.sql
        .exec<{ core_id: string; n: number | null }>(
          "SELECT core_id, json_array_length(rcpts) AS n FROM admission ORDER BY core_id",
        )
        .toArray(),
    }));
    expect(stored).toEqual({
      rows: [{ message_id: "large", n: 60 }],
      inline: [
        { core_id: "large", n: null },
        { core_id: "small", n: 3 },
      ],
    });
    const { entries } = await stub.dispatch(100);
    expect(entries.flatMap((e) => e.rcpts.map((r) => `${e.messageId}:${r.idx}:${r.address}`)).sort()).toEqual(
      [
        ...rcpts(60, ["a.example"]).map((r, i) => `large:${i}:${r.address}`),
        ...rcpts(3, ["a.example"]).map((r, i) => `small:${i}:${r.address}`),
      ].sort(),
    );
    for (const e of entries) await stub.report(e.entryId, { status: "defer" }, e.messageId === "small" ? [0] : []);
    // Deferred: 2 of small (one final) and 60 of large wait for their retry.
    expect((await stub.inspect()).deferred[0]).toMatchObject({ destination: "TOTAL", total: 62 });
    await runInDurableObject(stub, (_o, state) => {
      state.storage.sql.exec("UPDATE retry_due SET due = 0");
    });
    await runDurableObjectAlarm(stub);
    const retried = (await stub.dispatch(100)).entries;
    expect(retried.filter((e) => e.messageId === "small#2").flatMap((e) => e.rcpts.map((r) => r.address))).toEqual(
      rcpts(3, ["a.example"])
        .slice(1)
        .map((r) => r.address),
    );
    expect(retried.filter((e) => e.messageId === "large#2").reduce((n, e) => n + e.rcpts.length, 0)).toBe(60);
  });

  it("applies a batch of reports as the same reports one by one, idempotent by entry id", async () => {
    const one = env.TRANSPORT_QUEUE.getByName("smtp-reports-one");
    const many = env.TRANSPORT_QUEUE.getByName("smtp-reports-many");
    for (const stub of [one, many])
      await stub.admit({ id: "m1", createTime: 1, rcpts: rcpts(120, ["a.example", "b.example", "c.example"]) });
    const [a, b] = [await one.dispatch(100), await many.dispatch(100)];
    const outcome = (i: number) =>
      i === 1
        ? { status: "defer" as const, siteFailure: { dsnStatus: "4.4.1", reason: "connection refused" } }
        : { status: "ok" as const };
    const singly = [];
    for (const [i, e] of a.entries.entries()) singly.push(await one.report(e.entryId, outcome(i)));
    const batched = await many.reportMany(
      b.entries.map((e, i) => ({ entryId: e.entryId, report: outcome(i), finalIdx: [] })),
    );
    expect(batched.map((r) => ({ ...r, effects: r.effects.map((e) => e.kind) }))).toEqual(
      singly.map((r) => ({ ...r, effects: r.effects.map((e) => e.kind) })),
    );
    expect(timeless(await snapshotOf(many))).toEqual(timeless(await snapshotOf(one)));
    expect(
      (await many.reportMany([{ entryId: b.entries[0]!.entryId, report: { status: "ok" }, finalIdx: [] }]))[0]!.applied,
    ).toBe(false);
  });

  it("restores exactly the same core state after the object is evicted", async () => {
    const id = env.TRANSPORT_QUEUE.idFromName("smtp-evict");
    let stub = env.TRANSPORT_QUEUE.get(id);
    for (let i = 0; i < 5; i++)
      await stub.admit({ id: `m${i}`, createTime: 1, rcpts: rcpts(30 + i * 7, ["x.example", "y.example"]) });
    const first = await stub.dispatch(7);
    await stub.report(first.entries[0]!.entryId, {
      status: "defer",
      siteFailure: { dsnStatus: "4.4.1", reason: "connection refused" },
    });
    const before = await snapshotOf(stub);
    // Evict: a new object instance must rebuild the same state from SQLite alone.
    await expect(runInDurableObject(stub, (_instance, state) => state.abort("evict for test"))).rejects.toThrow(
      "evict for test",
    );
    stub = env.TRANSPORT_QUEUE.get(id);
    const after = await snapshotOf(stub);
    expect(after).toBe(before);
    // And it goes on: everything still in flight completes, the rest is dispatched.
    let delivered = 0;
    for (const e of first.entries.slice(1))
      delivered += (await stub.report(e.entryId, { status: "ok" })).applied ? 1 : 0;
    expect(delivered).toBe(first.entries.length - 1);
  });

  it("survives eviction across journal checkpoints: snapshot plus replayed commands give the same state", async () => {
    const id = env.TRANSPORT_QUEUE.idFromName("smtp-journal");
    let stub = env.TRANSPORT_QUEUE.get(id);
    // 7 commands per checkpoint in tests: 20 admits and the reports below cross several.
    for (let i = 0; i < 20; i++)
      await stub.admit({
        id: `j${i}`,
        createTime: 1,
        rcpts: rcpts(3 + (i % 4), ["p.example", "q.example", "r.example"]),
      });
    const sent = await stub.dispatch(30);
    for (const e of sent.entries.slice(0, 9)) await stub.report(e.entryId, { status: "ok" });
    await written(stub); // reports that ended their message wait for the next row (transport-rows.test.ts)
    const rows = await runInDurableObject(
      stub,
      (_i, state) =>
        state.storage.sql
          .exec<{ n: number }>(
            "SELECT count(*) AS n FROM journal_ring WHERE seq > (SELECT seq FROM snapshot_meta WHERE id = 1)",
          )
          .one().n,
    );
    expect(rows).toBeLessThan(7); // older commands were folded into a snapshot
    const before = await snapshotOf(stub);
    await expect(runInDurableObject(stub, (_instance, state) => state.abort("evict for test"))).rejects.toThrow(
      "evict for test",
    );
    stub = env.TRANSPORT_QUEUE.get(id);
    expect(await snapshotOf(stub)).toBe(before);
    for (const e of sent.entries.slice(9)) expect((await stub.report(e.entryId, { status: "ok" })).applied).toBe(true);
  });

  it("journals into a ring: past its size a flush rewrites a dead slot (one row written), and replay after eviction still gives the same state", async () => {
    const id = env.TRANSPORT_QUEUE.idFromName("smtp-ring");
    let stub = env.TRANSPORT_QUEUE.get(id);
    const ring = () =>
      runInDurableObject(stub, (_i, state) =>
        state.storage.sql
          .exec<{ slots: number; top: number }>("SELECT count(*) AS slots, max(seq) AS top FROM journal_ring")
          .one(),
      );
    // More flushes than the ring has slots (1024; every 7th command is a checkpoint instead of a row
    // in tests): the journal wraps round and stays at 1024 rows.
    for (let i = 0; i < 1300; i++) await stub.admit({ id: `r${i}`, createTime: 1, rcpts: rcpts(1, ["p.example"]) });
    const grown = await ring();
    expect(grown.top).toBeGreaterThan(1024);
    expect(grown.slots).toBe(1024);
    // Each further flush writes exactly one row, whether its slot is new or reused.
    const written = await runInDurableObject(stub, (_i, state) => {
      const c = state.storage.sql.exec(
        "INSERT INTO journal_ring (slot, seq, cmd) VALUES (?1, ?2, ?3) ON CONFLICT (slot) DO UPDATE SET seq = ?2, cmd = ?3",
        0,
        -1,
        "[]",
      );
      return c.rowsWritten;
    });
    expect(written).toBe(1);
    const before = await snapshotOf(stub);
    await expect(runInDurableObject(stub, (_instance, state) => state.abort("evict for test"))).rejects.toThrow(
      "evict for test",
    );
    stub = env.TRANSPORT_QUEUE.get(id);
    expect(await snapshotOf(stub)).toBe(before);
  }, 60_000);

  it("snapshots a large core only once the journal since the last has half its size, not every 7 commands", async () => {
    const id = env.TRANSPORT_QUEUE.idFromName("smtp-large-core");
    let stub = env.TRANSPORT_QUEUE.get(id);
    const meta = () =>
      runInDurableObject(stub, (_i, state) =>
        state.storage.sql
          .exec<{ seq: number; size: number }>(
            "SELECT seq, (SELECT sum(length(data)) FROM snapshot_chunk) AS size FROM snapshot_meta WHERE id = 1",
          )
          .one(),
      );
    // About 800 messages of 10 recipients in one request: a snapshot above SMALL_SNAPSHOT_CHARS.
    await stub.admitMany(
      Array.from({ length: 800 }, (_, i) => ({
        id: `big${i}`,
        createTime: 1,
        rcpts: rcpts(10, ["p.example", "q.example"]),
      })),
    );
    await stub.admit({ id: "big-x", createTime: 1, rcpts: rcpts(1, ["p.example"]) }); // the checkpoint the 800 admits made due
    const first = await meta();
    expect(first.size).toBeGreaterThan(SMALL_SNAPSHOT_CHARS);
    // 40 more calls, each a few commands (7 per checkpoint for small snapshots): no new snapshot.
    for (let i = 0; i < 40; i++) await stub.admit({ id: `more${i}`, createTime: 1, rcpts: rcpts(1, ["p.example"]) });
    expect((await meta()).seq).toBe(first.seq);
    const before = await snapshotOf(stub);
    await expect(runInDurableObject(stub, (_instance, state) => state.abort("evict for test"))).rejects.toThrow(
      "evict for test",
    );
    stub = env.TRANSPORT_QUEUE.get(id);
    expect(await snapshotOf(stub)).toBe(before);
  }, 60_000);

  it("folds journal rows written with another ring size into a snapshot when it starts", async () => {
    const id = env.TRANSPORT_QUEUE.idFromName("smtp-ring-resize");
    let stub = env.TRANSPORT_QUEUE.get(id);
    for (let i = 0; i < 5; i++) await stub.admit({ id: `rs${i}`, createTime: 1, rcpts: rcpts(1, ["p.example"]) });
    const before = await snapshotOf(stub);
    // As if written with another ring size: live rows whose slot is not seq mod 1024.
    const after = "seq > COALESCE((SELECT seq FROM snapshot_meta WHERE id = 1), 0)";
    await runInDurableObject(stub, (_i, state) =>
      state.storage.sql.exec(`UPDATE journal_ring SET slot = slot + 500 WHERE ${after}`),
    );
    const live = () =>
      runInDurableObject(
        stub,
        (_i, state) =>
          state.storage.sql.exec<{ n: number }>(`SELECT count(*) AS n FROM journal_ring WHERE ${after}`).one().n,
      );
    expect(await live()).toBeGreaterThan(0);
    await expect(runInDurableObject(stub, (_instance, state) => state.abort("evict for test"))).rejects.toThrow(
      "evict for test",
    );
    stub = env.TRANSPORT_QUEUE.get(id);
    expect(await snapshotOf(stub)).toBe(before);
    expect(await live()).toBe(0);
  });

  it("upgrades a version-1 journal (rows by seq): replays it, folds it into a snapshot and drops the table", async () => {
    const id = env.TRANSPORT_QUEUE.idFromName("smtp-legacy-journal");
    let stub = env.TRANSPORT_QUEUE.get(id);
    await stub.admit({ id: "l0", createTime: 1, rcpts: rcpts(3, ["p.example"]) });
    const before = await snapshotOf(stub);
    // Move the ring's live rows into a version-1 table, as an older deploy would have left them.
    await runInDurableObject(stub, (_i, state) => {
      const sql = state.storage.sql;
      sql.exec("CREATE TABLE journal (seq INTEGER PRIMARY KEY, cmd TEXT NOT NULL)");
      sql.exec("INSERT INTO journal (seq, cmd) SELECT seq, cmd FROM journal_ring");
      sql.exec("DELETE FROM journal_ring");
    });
    await expect(runInDurableObject(stub, (_instance, state) => state.abort("evict for test"))).rejects.toThrow(
      "evict for test",
    );
    stub = env.TRANSPORT_QUEUE.get(id);
    expect(await snapshotOf(stub)).toBe(before);
    const tables = await runInDurableObject(stub, (_i, state) =>
      state.storage.sql
        .exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'journal'")
        .toArray(),
    );
    expect(tables).toEqual([]);
  });

  it("empties the ring when an idle transport forgets its done messages, so no command naming one outlives its records", async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("smtp-ring-idle");
    await stub.admit({ id: "i0", createTime: 1, rcpts: rcpts(1, ["p.example"]) });
    const { entries } = await stub.dispatch(10);
    for (const e of entries) await stub.report(e.entryId, { status: "ok" });
    expect(await count(stub, "journal_ring")).toBeGreaterThan(0);
    // A done attempt writes no `finished` row: it waits in memory for its grace.
    expect(await count(stub, "finished")).toBe(0);
    expect(await waitingDone(stub)).toEqual(["i0"]);
    // Falling idle alone forgets nothing (no snapshot, no delete, no alarm of its own per message).
    await runDurableObjectAlarm(stub);
    expect(await count(stub, "journal_ring")).toBeGreaterThan(0);
    expect(await count(stub, "admission")).toBe(1);
    // Within the grace a repeated admit() changes nothing.
    expect((await stub.admit({ id: "i0", createTime: 1, rcpts: rcpts(1, ["p.example"]) })).active).toBe(false);
    expect((await stub.dispatch(10)).entries).toEqual([]);
    // A minute later (its end moved back): its admission record goes, and the ring with it.
    await endedAgo(stub, 61);
    await stub.dispatch(1); // any call re-arms the alarm at the grace's end, now past (it may fire at once)
    await runDurableObjectAlarm(stub);
    const held = async () =>
      (await count(stub, "journal_ring")) + (await count(stub, "admission")) + (await count(stub, "finished"));
    await eventually(async () => ((await held()) === 0 ? true : undefined), 5000, "the records and the ring forgotten");
    expect(await waitingDone(stub)).toEqual([]);
  });

  it("finds the done attempts again after a restart (records of attempts that are nowhere else) and forgets them at the next alarm", async () => {
    let stub = env.TRANSPORT_QUEUE.getByName("smtp-done-restart");
    await stub.admit({ id: "r0", createTime: 1, rcpts: rcpts(60, ["q.example"]) }); // rcpt rows (over 50)
    await stub.admit({ id: "r1", createTime: 1, rcpts: rcpts(1, ["q.example"]) });
    const { entries } = await stub.dispatch(10);
    const r0 = entries.filter((e) => e.messageId === "r0");
    for (const e of r0) await stub.report(e.entryId, { status: "ok" });
    await written(stub); // r0's last report waited for the next row, r1 being in flight
    expect(await count(stub, "rcpt")).toBe(60);
    await expect(runInDurableObject(stub, (_i, state) => state.abort("evict for test"))).rejects.toThrow(
      "evict for test",
    );
    stub = env.TRANSPORT_QUEUE.getByName("smtp-done-restart");
    // r0 is done (replayed or in the snapshot), due at once: no admit() can be under way to a new
    // life (a grace from each start never ended for an object evicted more often). r1 is in
    // flight and keeps its record.
    expect(await waitingDone(stub)).toEqual(["r0"]);
    expect(await runInDurableObject(stub, (_i, state) => state.storage.getAlarm())).not.toBeNull();
    await runDurableObjectAlarm(stub);
    await eventually(
      async () => ((await count(stub, "rcpt")) === 0 ? true : undefined),
      5000,
      "r0's rows forgotten at the checkpoint",
    );
    const left = await runInDurableObject(stub, (_i, state) =>
      state.storage.sql.exec<{ core_id: string }>("SELECT core_id FROM admission").toArray(),
    );
    expect(left).toEqual([{ core_id: "r1" }]);
  });

  it("arms an alarm for the dead destination and revives it when the alarm runs", async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("smtp-dead");
    await stub.admit({ id: "d1", createTime: 1, rcpts: rcpts(10, ["dead.example"]) });
    const { entries } = await stub.dispatch(10);
    expect(entries).toHaveLength(1);
    const r = await stub.report(entries[0]!.entryId, {
      status: "defer",
      siteFailure: { dsnStatus: "4.4.1", reason: "connection timed out" },
    });
    // One site failure at window 5 with the defaults: 5 → 3, not dead yet.
    expect(r.effects.filter((e) => e.kind === "destination")).toEqual([]);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
  });
});

describe("DestinationQueue Durable Object", () => {
  it("runs Postfix feedback: three site failures from window 5 kill the destination, the alarm revives it", async () => {
    const stub = env.DESTINATION_QUEUE.getByName("smtp:dead-site.example");
    const fail = { dsnStatus: "4.4.1", reason: "connect timeout" };
    expect(await stub.report({ transport: "smtp", busy: 5, siteFailure: fail })).toMatchObject({ window: 3 });
    expect(await stub.report({ transport: "smtp", busy: 3, siteFailure: fail })).toMatchObject({ window: 2 });
    const dead = await stub.report({ transport: "smtp", busy: 2, siteFailure: fail });
    expect(dead.window).toBe(0);
    expect(dead.deadUntil).toBeGreaterThan(0);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect((await stub.get()).record).toMatchObject({ window: 5, deadUntil: 0, failCohorts: 0 });
  });

  const restartLeasesTitle =
    "after a restart, leases every entry in flight anew (its job may be in the queue): a " +
    "late report applies, an unreported entry is crashed when that lease runs out";
  it(restartLeasesTitle, async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("smtp-unsent");
    await stub.admit({ id: "m1", createTime: 1, rcpts: rcpts(2, ["a.example", "b.example"]) });
    const { entries } = await stub.dispatch(10);
    expect(entries).toHaveLength(2);
    const [reported, lost] = entries as [(typeof entries)[0], (typeof entries)[0]];
    await expect(runInDurableObject(stub, (_o, state) => state.abort("stopped"))).rejects.toThrow("stopped");
    const again = env.TRANSPORT_QUEUE.getByName("smtp-unsent");
    expect((await again.inspect()).inflight).toBe(2);
    expect(await again.leased([reported.entryId, lost.entryId])).toEqual([reported.entryId, lost.entryId]);
    const leases = await leasesIn(again);
    expect(leases.map((l) => l.core_id)).toEqual(["m1", "m1"]);
    expect(Math.min(...leases.map((l) => l.until))).toBeGreaterThan(Date.now() / 1000 + 60); // DELIVERY_LEASE_SECONDS from the start
    expect((await again.report(reported.entryId, { status: "ok" })).applied).toBe(true);
    await expireLeases(again);
    await runDurableObjectAlarm(again);
    expect((await again.inspect()).inflight).toBe(0);
    expect(await again.leased([lost.entryId])).toEqual([]);
    // No lease is a row any more: nothing but the journal is written per dispatch.
    expect(
      await runInDurableObject(
        again,
        (_o, state) => state.storage.sql.exec("SELECT 1 FROM sqlite_master WHERE name = 'lease'").toArray().length,
      ),
    ).toBe(0);
  });

  it("starting again and again does not extend a restored lease: an entry whose job was lost is crashed when the stored horizon passes", async () => {
    // The crash campaign's stall: an object evicted between its alarms leased its lost entries
    // anew at every start, so they never ran out and nothing was delivered again.
    const stub = env.TRANSPORT_QUEUE.getByName("smtp-restarts");
    await stub.admit({ id: "m1", createTime: 1, rcpts: rcpts(1, ["a.example"]) });
    const { entries } = await stub.dispatch(10);
    const entryId = entries[0]!.entryId;
    const fresh = () => env.TRANSPORT_QUEUE.getByName("smtp-restarts"); // a stub is broken by its object's abort
    const horizon = () =>
      runInDurableObject(
        fresh(),
        (_o, state) => state.storage.sql.exec<{ until: number }>("SELECT until FROM lease_horizon").one().until,
      );
    const [first] = await leasesIn(stub);
    expect(await horizon()).toBeGreaterThanOrEqual(first!.until); // no lease runs past it
    const restart = async () => {
      await expect(runInDurableObject(fresh(), (_o, state) => state.abort("evicted"))).rejects.toThrow("evicted");
      return (await leasesIn(fresh()))[0]!.until;
    };
    const h = await horizon();
    expect(await restart()).toBe(h);
    expect(await restart()).toBe(h);
    // Time passes beyond the horizon (moved back here), and the object starts once more.
    await runInDurableObject(fresh(), (_o, state) => {
      state.storage.sql.exec("UPDATE lease_horizon SET until = ?", Math.floor(Date.now() / 1000) - 1);
    });
    expect(await restart()).toBeLessThan(Date.now() / 1000);
    await runDurableObjectAlarm(fresh());
    // The alarm is past due, so it may also fire by itself meanwhile (alarms fire locally); then
    // runDurableObjectAlarm finds none to run, and the crash lands when that run ends.
    const again = fresh();
    await eventually(
      async () => ((await again.leased([entryId])).length === 0 ? true : undefined),
      5000,
      "the lost entry crashed",
    );
    expect((await again.inspect()).inflight).toBe(0);
  });

  const unreturnedHandOffTitle =
    "a hand-off it never saw return (stopped inside sendBatch) is on record as such: after " +
    "the start, with DELIVERY = queue, its entries are leased for AGENT_CHECK_SECONDS only, " +
    "until a consumer asks about them; one that returned keeps the full lease";
  it(unreturnedHandOffTitle, async () => {
    const fresh = () => env.TRANSPORT_QUEUE.getByName("smtp-cut-send");
    const sent: number[] = [];
    await runInDurableObject(fresh(), async (instance) => {
      const o = instance as unknown as { env: Env; journal: { checkpoint(q: unknown): void }; qmgr: unknown };
      // The first hand-off returns; the second never does.
      const sendBatch = async (jobs: { body: { entryId: number } }[]) => {
        if (sent.length > 0) return new Promise<never>(() => {});
        sent.push(...jobs.map((j) => j.body.entryId));
      };
      o.env = { ...o.env, DISPATCH: "auto", DELIVERY: "queue", DELIVER: { sendBatch } as unknown as Queue };
      await instance.admit({ id: "m1", createTime: 1, rcpts: rcpts(1, ["a.example"]) });
      void instance.admit({ id: "m2", createTime: 1, rcpts: rcpts(1, ["b.example"]) });
      await new Promise((r) => setTimeout(r, 50));
      // A checkpoint while the second is out keeps it with the snapshot (the rows it marked are dead then).
      o.journal.checkpoint(o.qmgr);
    });
    expect(sent).toHaveLength(1);
    const [returned] = sent as [number];
    const outstanding = await runInDurableObject(
      fresh(),
      (_o, state) =>
        state.storage.sql.exec<{ sending: string | null }>("SELECT sending FROM snapshot_meta").one().sending,
    );
    const [cut] = JSON.parse(outstanding!) as [number];
    expect(cut).not.toBe(returned);
    await expect(runInDurableObject(fresh(), (_o, state) => state.abort("stopped inside sendBatch"))).rejects.toThrow(
      "stopped inside sendBatch",
    );

    // This project runs DELIVERY = agents (the agents are asked instead); the leases as a queue-mode start restores them:
    const queueStart = (pick: number[]) =>
      runInDurableObject(fresh(), (instance, state) => {
        const o = instance as unknown as {
          journal: { unconfirmed: ReadonlySet<number> };
          qmgr: { busy: Parameters<typeof restoreLeases>[2] };
        };
        const leases = restoreLeases(
          state.storage.sql,
          { ...env, DELIVERY: "queue" },
          o.qmgr.busy,
          o.journal.unconfirmed,
        );
        const until = () => new Map(leases.list().map((l) => [l.entryId, l.until]));
        const before = until();
        leases.pickedUp(pick);
        return { unconfirmed: [...o.journal.unconfirmed], before, after: until() };
      });
    const restored = await queueStart([cut]); // a deliver consumer asked about it: the job did reach the queue
    const now = Date.now() / 1000;
    expect(restored.unconfirmed).toEqual([cut]);
    expect(restored.before.get(returned)).toBeGreaterThan(now + 600); // DELIVERY_LEASE_SECONDS: its job is in the queue
    expect(restored.before.get(cut)).toBeLessThanOrEqual(now + 61); // AGENT_CHECK_SECONDS (60 here): it may have no job anywhere
    expect(restored.after.get(cut)).toBe(restored.before.get(returned));
    // A start a second later (as an object evicted again and again starts) keeps that short lease's end.
    await new Promise((r) => setTimeout(r, 1_100));
    const again = (await queueStart([])).before;
    expect(again.get(cut)).toBe(restored.before.get(cut));

    // Kept through this life's checkpoints while in flight (a second stop finds it again); dropped once reported.
    const sendingAfterCheckpoint = () =>
      runInDurableObject(fresh(), (instance, state) => {
        const o = instance as unknown as { journal: { checkpoint(q: unknown): void }; qmgr: unknown };
        o.journal.checkpoint(o.qmgr);
        return state.storage.sql.exec<{ sending: string | null }>("SELECT sending FROM snapshot_meta").one().sending;
      });
    expect(await sendingAfterCheckpoint()).toBe(JSON.stringify([cut]));
    expect((await fresh().report(cut, { status: "ok" })).applied).toBe(true);
    expect(await sendingAfterCheckpoint()).toBeNull();
  });

  it("adds `sending`, `data` and `admissions` to a snapshot_meta written before hand-offs were recorded (its snapshot in a chunk row), keeping its snapshot", async () => {
    const fresh = () => env.TRANSPORT_QUEUE.getByName("smtp-meta-upgrade");
    await fresh().admit({ id: "m1", createTime: 1, rcpts: rcpts(1, ["a.example"]) });
    const before = await snapshotOf(fresh());
    await runInDurableObject(fresh(), (instance, state) => {
      const o = instance as unknown as { journal: { checkpoint(q: unknown): void }; qmgr: unknown };
      o.journal.checkpoint(o.qmgr);
      const sql = state.storage.sql;
      sql.exec(
        "CREATE TABLE old_meta (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL, parts INTEGER NOT NULL)",
      );
      // Before `data`, a snapshot was always in chunk rows.
      sql.exec("INSERT INTO snapshot_chunk (part, data) SELECT 0, data FROM snapshot_meta");
      sql.exec("INSERT INTO old_meta SELECT id, seq, 1 FROM snapshot_meta");
      sql.exec("DROP TABLE snapshot_meta");
      sql.exec("ALTER TABLE old_meta RENAME TO snapshot_meta");
    });
    await expect(runInDurableObject(fresh(), (_o, state) => state.abort("upgrade"))).rejects.toThrow("upgrade");
    expect(await snapshotOf(fresh())).toBe(before);
    const cols = await runInDurableObject(fresh(), (_o, state) =>
      state.storage.sql
        .exec<{ name: string }>("PRAGMA table_info(snapshot_meta)")
        .toArray()
        .map((c) => c.name),
    );
    expect(cols).toEqual(["id", "seq", "parts", "sending", "data", "admissions"]);
  });

  it("takes over the leases a version-1 object kept in its lease table, and drops the table", async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("smtp-legacy-lease");
    await stub.admit({ id: "m1", createTime: 1, rcpts: rcpts(1, ["a.example"]) });
    const { entries } = await stub.dispatch(10);
    const entryId = entries[0]!.entryId;
    await runInDurableObject(stub, (_o, state) => {
      state.storage.sql.exec(
        "CREATE TABLE lease (entry_id INTEGER PRIMARY KEY, core_id TEXT NOT NULL, until INTEGER NOT NULL, sent INTEGER NOT NULL DEFAULT 1)",
      );
      state.storage.sql.exec("INSERT INTO lease (entry_id, core_id, until) VALUES (?, 'm1', 12345)", entryId);
    });
    await expect(runInDurableObject(stub, (_o, state) => state.abort("upgrade"))).rejects.toThrow("upgrade");
    const again = env.TRANSPORT_QUEUE.getByName("smtp-legacy-lease");
    expect(await leasesIn(again)).toEqual([
      { entry_id: entryId, core_id: "m1", until: 12345, checked: expect.any(Number) },
    ]);
    expect(
      await runInDurableObject(
        again,
        (_o, state) => state.storage.sql.exec("SELECT 1 FROM sqlite_master WHERE name = 'lease'").toArray().length,
      ),
    ).toBe(0);
  });

  /**
   * Admits a two-recipient message with the object's env swapped for `over` (inside the object, so
   * a failed hand-off is caught here and the retry's alarm cannot run in between); answers the
   * error admit() threw, the leases held and the retries scheduled.
   */
  async function admitWith(stub: DurableObjectStub<TransportQueue>, over: Partial<Env>) {
    return runInDurableObject(stub, async (instance, state) => {
      const o = instance as unknown as { env: Env };
      const original = o.env;
      o.env = { ...original, DISPATCH: "auto", ...over };
      let error = "";
      try {
        await instance.admit({
          id: "m1",
          createTime: Math.floor(Date.now() / 1000),
          rcpts: rcpts(2, ["a.example", "b.example"]),
        });
      } catch (e) {
        error = e instanceof Error ? e.message : String(e);
      }
      o.env = original;
      await state.storage.deleteAlarm();
      const count = (table: string) =>
        state.storage.sql.exec<{ n: number }>(`SELECT count(*) AS n FROM ${table}`).one().n;
      return {
        error,
        leases: (instance as unknown as { leases: { list(): unknown[] } }).leases.list().length,
        retries: count("retry_due"),
      };
    });
  }

  it("crashes the entries at once when the deliver queue refuses their jobs, instead of leasing them for nothing", async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("smtp-queue-down");
    const out = await admitWith(stub, {
      DELIVERY: "queue",
      DELIVER: {
        sendBatch: async () => {
          throw new Error("queue down");
        },
      } as unknown as Queue,
    });
    expect(out).toEqual({ error: "queue down", leases: 0, retries: 1 });
    expect((await stub.inspect()).inflight).toBe(0);
  });

  it("crashes the entries at once when their delivery agent cannot be reached (DELIVERY = agents), without failing the admission", async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("smtp-agents-down");
    const down = {
      getByName: () => ({
        deliver: async () => {
          throw new Error("agent gone");
        },
      }),
    };
    const out = await admitWith(stub, { DELIVERY: "agents", DELIVERY_AGENT: down as unknown as Env["DELIVERY_AGENT"] });
    expect(out).toEqual({ error: "", leases: 0, retries: 1 });
    expect((await stub.inspect()).inflight).toBe(0);
  });
});
