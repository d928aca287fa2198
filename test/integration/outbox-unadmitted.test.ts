/**
 * A message the accept admits before it answers is stored out of the index of waiting messages
 * (store.ts `admitting`); a failed admission puts it there (keepWaiting), and the cron's scan
 * (unadmitted.ts) finds one an accept stored and never admitted (the Outbox stopped in between),
 * a page of rows at a time, so the sweeper classifies it as before.
 */
import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { insertMessage } from "../../durable-objects/outbox/store";
import { completeIdempotency } from "../../durable-objects/outbox/schema";
import { newMessageId, outboxName } from "../../worker/model/ids";
import { dueForClassify, keepWaiting, markReady } from "../../durable-objects/outbox/classify-state";
import { PAGE, UNADMITTED_AGE_MS, UnadmittedScan } from "../../durable-objects/outbox/unadmitted";
import { migrateOutbox } from "../../durable-objects/outbox/schema";
import { T0, message } from "./outbox-messages";

/** A one-recipient message decided at accept. */
const one = (id: string, createdAt = T0) => message(id, [`${id}@example.com`], true, createdAt);

const waitingOf = (sql: SqlStorage, id: string) =>
  sql.exec<{ waiting: number }>("SELECT waiting FROM message WHERE id = ?", id).one().waiting;

describe("messages the accept admits: out of the index of waiting messages", () => {
  it("stores them out of the index, and puts one whose admission failed into it", async () => {
    await runInDurableObject(env.OUTBOX.getByName("unadmitted-1"), (_o, state) => {
      const sql = state.storage.sql;
      migrateOutbox(sql);
      insertMessage(sql, "acme", one("m-admitting"), T0, true);
      insertMessage(sql, "acme", one("m-classified-later"), T0);
      expect([waitingOf(sql, "m-admitting"), waitingOf(sql, "m-classified-later")]).toEqual([0, 1]);
      expect(dueForClassify(sql, T0 + 60_000, 30_000, 10)).toEqual(["m-classified-later"]);
      keepWaiting(sql, ["m-admitting"]);
      expect(waitingOf(sql, "m-admitting")).toBe(1);
      expect(dueForClassify(sql, T0 + 60_000, 30_000, 10).sort()).toEqual(["m-admitting", "m-classified-later"]);
    });
  });

  it("the scan finds those an accept stored and never admitted, a page of rows at a time, and only those", async () => {
    await runInDurableObject(env.OUTBOX.getByName("unadmitted-2"), (_o, state) => {
      const sql = state.storage.sql;
      migrateOutbox(sql);
      const now = T0 + 2 * UNADMITTED_AGE_MS;
      const old = Array.from({ length: 2 * PAGE + 500 }, (_, i) => `m-${String(i).padStart(5, "0")}`);
      for (const id of old) insertMessage(sql, "acme", one(id), T0, true);
      // Admitted and marked by its outcome's write; and one stored a minute ago (its accept may still run).
      markReady(sql, old[7]!, [0], T0 + 10);
      insertMessage(sql, "acme", one("m-young", now - 60_000), now - 60_000, true);
      const scan = new UnadmittedScan();
      const found: string[][] = [];
      const reads: number[] = [];
      const counting = new Proxy(sql, {
        get: (t, k) =>
          k === "exec"
            ? (q: string, ...b: unknown[]) => {
                const c = t.exec(q, ...b);
                if (/^SELECT/.test(q)) {
                  const rows = c.toArray();
                  reads.push(c.rowsRead);
                  return { toArray: () => rows, one: () => rows[0] };
                }
                return c;
              }
            : Reflect.get(t, k),
      });
      for (let i = 0; i < 4; i++) {
        reads.length = 0;
        found.push(scan.sweep(counting, now));
        expect(reads.reduce((n, r) => n + r, 0)).toBeLessThanOrEqual(2 * PAGE + 2);
      }
      expect(found.map((f) => f.length)).toEqual([PAGE - 1, PAGE, 500, 0]);
      const taken = new Set(found.flat());
      expect(taken.has(old[7]!) || taken.has("m-young")).toBe(false);
      expect(taken.size).toBe(old.length - 1);
      expect(waitingOf(sql, old[0]!)).toBe(1);
      expect(waitingOf(sql, "m-young")).toBe(0);
    });
  });

  it("a retry under the Idempotency-Key of an accept that stored its message and stopped before admitting it admits it before the answer", async () => {
    const stub = env.OUTBOX.getByName(outboxName(3));
    const id = newMessageId(3);
    const claim = { key: "retry-after-stop", hash: "h" };
    // What the first try wrote before the Outbox stopped: the message out of the index, the key's answer.
    await runInDurableObject(stub, (_o, state) => {
      const sql = state.storage.sql;
      migrateOutbox(sql);
      insertMessage(sql, "acme", one(id, Date.now()), Date.now(), true);
      completeIdempotency(sql, "acme", claim, { status: 200, body: JSON.stringify({ id }) }, Date.now());
    });
    const answer = await stub.reserve("acme", claim, "second-try");
    expect(answer.kind).toBe("replay");
    // Admitted before the answer: held until its outcome (unmarked.ts), or marked ready.
    const admitted = await runInDurableObject(stub, (o, state) => {
      const row = state.storage.sql
        .exec<{ unclassified: number }>("SELECT unclassified FROM message WHERE id = ?", id)
        .one();
      return (
        row.unclassified === 0 ||
        (o as unknown as { intake: { unmarked: { has(id: string): boolean } } }).intake.unmarked.has(id)
      );
    });
    expect(admitted).toBe(true);
  });

  it("admitted(), which the accept's answer waits for, admits what an Outbox restart since the accept left unadmitted", async () => {
    const stub = env.OUTBOX.getByName(outboxName(4));
    const id = newMessageId(4);
    await runInDurableObject(stub, (_o, state) => {
      migrateOutbox(state.storage.sql);
      insertMessage(state.storage.sql, "acme", one(id, Date.now()), Date.now(), true);
    });
    await stub.admitted([id]);
    const admitted = await runInDurableObject(
      stub,
      (o, state) =>
        state.storage.sql.exec<{ u: number }>("SELECT unclassified AS u FROM message WHERE id = ?", id).one().u === 0 ||
        (o as unknown as { intake: { unmarked: { has(id: string): boolean } } }).intake.unmarked.has(id),
    );
    expect(admitted).toBe(true);
    await stub.admitted([id]); // again: nothing left to admit, answered at once
  });
});
