/**
 * Where the Outbox keeps recipients (durable-objects/outbox/rcpt.ts): a one-recipient message's
 * recipient in its own row, a message of more as a list in its row, one stored before or changed
 * by an operator in rcpt rows; all read and written alike.
 */
import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { applyOutcomes } from "../../durable-objects/outbox/outcomes";
import { cancelWithEvents } from "../../durable-objects/outbox/finish";
import { readmitMessage, recordLateBounce } from "../../durable-objects/outbox/control";
import { insertMessage, readView } from "../../durable-objects/outbox/store";
import { markReady } from "../../durable-objects/outbox/classify-state";
import { migrateOutbox } from "../../durable-objects/outbox/schema";

import { T0, inOutbox, message } from "./outbox-messages";

describe("the Outbox's recipients", () => {
  it("keeps a one-recipient message's recipient in its row, with no rcpt row, and shows both forms alike", async () => {
    const got = await inOutbox("rcpt-home-1", (sql) => {
      insertMessage(sql, "acme", message("m-one", ["x@example.com"]));
      insertMessage(sql, "acme", message("m-two", ["x@example.com", "y@example.com"]));
      const count = (id: string) =>
        sql.exec<{ n: number }>("SELECT count(*) AS n FROM rcpt WHERE message_id = ?", id).one().n;
      return {
        rows: [count("m-one"), count("m-two")],
        one: readView(sql, "m-one", T0)!.recipients,
        two: readView(sql, "m-two", T0)!.recipients,
      };
    });
    expect(got.rows).toEqual([0, 0]); // the other's two are a list in its row (schema 9)
    expect(got.one).toEqual([got.two[0]]);
    expect(got.one[0]).toMatchObject({ idx: 0, email: "x@example.com", status: "incoming", transport: "smtp" });
  });

  it("writes the one recipient's insert and its finishing outcome as parts of the message row's writes", async () => {
    const got = await inOutbox("rcpt-home-2", (sql, rows) => {
      const delivered = (idx: number) => ({ idx, status: "delivered" as const, attempt: 1, response: { code: 250 } });
      insertMessage(sql, "acme", message("m-one", ["x@example.com"]));
      const insertOne = rows();
      insertMessage(sql, "acme", message("m-two", ["x@example.com", "y@example.com"]));
      const insertTwo = rows();
      markReady(sql, "m-one", [0], T0);
      markReady(sql, "m-two", [0, 1], T0);
      const ready = rows();
      const one = applyOutcomes(sql, "m-one", [delivered(0)], T0 + 1);
      const finishOne = rows();
      const two = applyOutcomes(sql, "m-two", [delivered(0), delivered(1)], T0 + 1);
      const finishTwo = rows();
      const kept = sql
        .exec<{ status: string; attempts: number; e: string | null; r: string | null }>(
          "SELECT status, attempts, pending_event AS e, last_response AS r FROM rcpt_all WHERE message_id = 'm-one'",
        )
        .one();
      return { insertOne, insertTwo, ready, finishOne, finishTwo, done: [one.done, two.done], kept };
    });
    // A message row and its entry in the index of waiting messages; the other's recipients are in its row too.
    expect([got.insertOne, got.insertTwo]).toEqual([2, 2]);
    // Marking ready writes the message row (its email.queued) and no recipient.
    expect(got.ready).toBe(2);
    // The message row and its entry in the index of finished messages; the other's list rides in that write.
    expect([got.finishOne, got.finishTwo]).toEqual([2, 2]);
    expect(got.done).toEqual([true, true]);
    expect(got.kept).toMatchObject({ status: "delivered", attempts: 1, r: JSON.stringify({ code: 250 }) });
    expect(JSON.parse(got.kept.e!)).toMatchObject({ type: "email.delivered" });
  });

  it("marks a one-recipient message admitted without the mark ready in its outcome's one write, with email.queued first", async () => {
    const got = await inOutbox("rcpt-home-lazy", (sql, rows) => {
      const row = (id: string) =>
        sql
          .exec<{ unclassified: number; waiting: number; queued: string | null; pending: string | null }>(
            "SELECT unclassified, waiting, queued_event AS queued, r_pending_event AS pending FROM message WHERE id = ?",
            id,
          )
          .one();
      // As the accept stores a message it admits before it answers: out of the index of waiting messages.
      insertMessage(sql, "acme", message("m-done", ["x@example.com"]), T0, true);
      insertMessage(sql, "acme", message("m-later", ["y@example.com"]), T0, true);
      const inserted = rows();
      // Admitted (unmarked.ts): no markReady. The finishing outcome and a deferral.
      applyOutcomes(sql, "m-done", [{ idx: 0, status: "delivered", attempt: 1, response: { code: 250 } }], T0 + 1);
      const finish = rows();
      const deferral = { idx: 0, status: "deferred" as const, attempt: 1, nextAttemptAt: T0 + 5000 };
      applyOutcomes(sql, "m-later", [deferral], T0 + 2);
      const defer = rows();
      const events = sql.exec<{ n: number }>("SELECT count(*) AS n FROM event WHERE type = 'email.queued'").one().n;
      return { inserted, finish, defer, done: row("m-done"), later: row("m-later"), events };
    });
    expect(got.inserted).toBe(2); // a row each, no index entry
    // The finish writes the message row and its finished index entry, as after a mark; the deferral
    // the message row (its delay notice is an event row), and no email.queued row.
    expect(got.finish).toBe(2);
    expect(got.events).toBe(0);
    expect(got.done).toMatchObject({ unclassified: 0, waiting: 0 });
    const [queued, delivered] = [JSON.parse(got.done.queued!), JSON.parse(got.done.pending!)];
    expect(queued).toMatchObject({ type: "email.queued", data: { transport: "smtp", nexthop: "mx.example" } });
    expect(delivered).toMatchObject({ type: "email.delivered" });
    expect(queued.seq).toBeLessThan(delivered.seq);
    expect(got.later).toMatchObject({ unclassified: 0, waiting: 1 });
    expect(JSON.parse(got.later.queued!)).toMatchObject({ type: "email.queued" });
    // The message row, its entry in the index of waiting messages (its email.queued is to be
    // forwarded), and the email.delivery_delayed event row.
    expect(got.defer).toBe(3);
  });

  it("takes a deferral, a readmission, a late bounce and a cancel on a one-recipient message as on rcpt rows", async () => {
    const got = await inOutbox("rcpt-home-3", (sql) => {
      const view = () => readView(sql, "m-one", T0 + 10)!.recipients[0]!;
      insertMessage(sql, "acme", message("m-one", ["x@example.com"]));
      markReady(sql, "m-one", [0], T0);
      const deferral = {
        idx: 0,
        status: "deferred" as const,
        attempt: 1,
        nextAttemptAt: T0 + 5000,
        response: { code: 451 },
      };
      applyOutcomes(sql, "m-one", [deferral], T0 + 1);
      const deferred = view();
      const readmitted = readmitMessage(sql, "m-one", false, T0 + 2);
      const afterReadmit = view();
      markReady(sql, "m-one", [0], T0 + 2);
      applyOutcomes(sql, "m-one", [{ idx: 0, status: "delivered", attempt: 2 }], T0 + 3);
      const late = recordLateBounce(sql, "m-one", { address: "x@example.com" }, { code: 550 }, T0 + 4);
      const bounced = view();
      insertMessage(sql, "acme", message("m-cancel", ["z@example.com"], false));
      const cancelled = cancelWithEvents(sql, "m-cancel", "acme", null, T0 + 5);
      const state = sql.exec<{ state: string }>("SELECT state FROM message WHERE id = 'm-cancel'").one().state;
      return { deferred, readmitted, afterReadmit, late, bounced, cancelled, state };
    });
    expect(got.deferred).toMatchObject({
      status: "deferred",
      attempts: 1,
      next_attempt_at: T0 + 5000,
      last_response: JSON.stringify({ code: 451 }),
    });
    expect(got.readmitted).toBe(1);
    expect(got.afterReadmit).toMatchObject({ status: "incoming", transport: "smtp", next_attempt_at: null });
    expect(got.late).toEqual({ result: "ok", address: "x@example.com" });
    expect(got.bounced).toMatchObject({ status: "bounced", attempts: 2, last_response: JSON.stringify({ code: 550 }) });
    expect([got.cancelled, got.state]).toEqual([1, "done"]);
  });

  it("gives an Outbox of schema 6 the columns and the view, and keeps its rcpt rows working", async () => {
    const got = await runInDurableObject(env.OUTBOX.getByName("rcpt-home-old"), (_o, state) => {
      const sql = state.storage.sql;
      // The message table as schema 6 made it, holding a message whose recipient is an rcpt row.
      sql.exec("DROP VIEW rcpt_all");
      sql.exec("DROP TABLE message");
      sql.exec(`CREATE TABLE message (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, created_at INTEGER NOT NULL,
        scheduled_at INTEGER, state TEXT NOT NULL DEFAULT 'open', unclassified INTEGER NOT NULL DEFAULT 1,
        mail_from TEXT NOT NULL, size INTEGER NOT NULL, summary TEXT NOT NULL, classify_sent_at INTEGER,
        done_at INTEGER, body_deleted INTEGER NOT NULL DEFAULT 0, body, body_r2 INTEGER NOT NULL DEFAULT 1,
        waiting INTEGER NOT NULL DEFAULT 0, queued_event TEXT, return_path TEXT) WITHOUT ROWID`);
      const m = message("m-old", ["x@example.com"]);
      sql.exec(
        "INSERT INTO message (id, tenant, created_at, mail_from, size, summary, unclassified, waiting) VALUES (?, 'acme', ?, ?, 1, ?, 0, 0)",
        m.id,
        T0,
        m.mailFrom,
        JSON.stringify(m.summary),
      );
      sql.exec(
        "INSERT INTO rcpt (message_id, idx, address, status, transport, nexthop, updated_at) VALUES (?, 0, 'x@example.com', 'incoming', 'smtp', 'mx', ?)",
        m.id,
        T0,
      );
      migrateOutbox(sql);
      const done = applyOutcomes(sql, m.id, [{ idx: 0, status: "delivered", attempt: 1 }], T0 + 1).done;
      insertMessage(sql, "acme", message("m-new", ["y@example.com"]));
      return {
        done,
        old: readView(sql, m.id, T0)!.recipients.map((r) => r.status),
        rows: sql.exec<{ n: number }>("SELECT count(*) AS n FROM rcpt").one().n,
        fresh: readView(sql, "m-new", T0)!.recipients.map((r) => r.email),
      };
    });
    expect(got).toEqual({ done: true, old: ["delivered"], rows: 1, fresh: ["y@example.com"] });
  });
});
