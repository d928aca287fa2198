/**
 * Migration 0037: when a message's row and its first events are written in one batch (the
 * delivery stage's index write, the classify consumer's), the events go in first without an index
 * entry, and the messages row names their run (head_seq, head_run): since migration 0040 one row
 * of event_runs. Every event stays reachable
 * through event_of_email exactly once; later runs, and runs of an email whose row or indexed run
 * was there before, keep their entry in event_log_by_source.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { newMessageId } from "../../worker/model/ids";
import { logInsertStatements, REST_MAX, type LogRow } from "../../worker/db/events";
import { feedBodyOf } from "../../worker/db/feed";
import { indexStatements } from "../../worker/db/messages";
import { PURGE_SQL } from "../../worker/db/retention";
import { MESSAGE_EVENTS_SQL } from "../../worker/db/admin";
import { eventId } from "../../worker/webhooks/core/event-id";
import { deliveredRow } from "./log-rows";
import { view } from "./index-views";

const row = (email: string, sourceSeq: number): LogRow =>
  deliveredRow(
    sourceSeq,
    eventId({ emailId: email, recipient: "r@x.example", attempt: sourceSeq, type: "email.delivered" }),
    5_000,
  );

type Publication = { tenant: string; email: string; seqs: number[] }[];

/** One batch as publishEvents writes it: the log rows, then the messages' rows naming their first run. Rows written: the log's, then per statement of the index. */
async function publish(messages: Publication, index = true): Promise<number[]> {
  const logs = messages.map((m) => ({ tenant: m.tenant, emailId: m.email, rows: m.seqs.map((s) => row(m.email, s)) }));
  const ids = [...new Set(messages.map((m) => m.email))];
  const items = index
    ? ids.map((id) => ({
        view: view(id, messages.find((m) => m.email === id)!.tenant, 1, "delivered", 3_000),
        lastEvent: "delivered",
      }))
    : [];
  const inserts = logInsertStatements(env.DB, logs, 6_000, new Set(items.map((i) => i.view.id)));
  const rs = await env.DB.batch([
    ...inserts,
    ...indexStatements(
      env.DB,
      items,
      logs.reduce((n, l) => n + l.rows.length, 0),
    ),
  ]);
  const written = rs.map((r) => r.meta.rows_written);
  return [written.slice(0, inserts.length).reduce((n, w) => n + w, 0), ...written.slice(inserts.length)];
}

async function eventsOf(email: string): Promise<number[]> {
  const r = await env.DB.prepare("SELECT source_seq FROM event_of_email WHERE of_email = ? ORDER BY seq")
    .bind(email)
    .all<{ source_seq: number }>();
  return r.results.map((x) => x.source_seq);
}

const runsOf = async (email: string) =>
  (
    await env.DB.prepare("SELECT run FROM event_log WHERE email_id = ? ORDER BY seq").bind(email).all<{ run: number }>()
  ).results.map((r) => r.run);

const headOf = (email: string) =>
  env.DB.prepare("SELECT head_seq, head_run FROM messages WHERE id = ?")
    .bind(email)
    .first<{ head_seq: number | null; head_run: number | null }>();

describe("a message's first run named by its messages row (migration 0037)", () => {
  it("writes two events of a new message as 1 log row with no index entry, and its row names it", async () => {
    const email = newMessageId(0);
    // The log's row, then the message row and its entry in messages_by_tenant_time: 3, not 5.
    expect((await publish([{ tenant: "named-1", email, seqs: [1, 2] }])).slice(0, 2)).toEqual([1, 2]);
    expect(await runsOf(email)).toEqual([-1, -1]);
    const seqs = (
      await env.DB.prepare("SELECT seq FROM event_log WHERE email_id = ? ORDER BY seq")
        .bind(email)
        .all<{ seq: number }>()
    ).results.map((r) => r.seq);
    expect(seqs[1]).toBe(seqs[0]! + 1);
    expect(await headOf(email)).toEqual({ head_seq: seqs[0], head_run: 0 });
    expect(await eventsOf(email)).toEqual([1, 2]);
    expect(await feedBodyOf(env.DB, row(email, 2).event_id!)).toBe(JSON.stringify({ n: 2 }));
    const plan = (
      await env.DB.prepare("EXPLAIN QUERY PLAN SELECT seq FROM event_of_email WHERE of_email = ?")
        .bind(email)
        .all<{ detail: string }>()
    ).results
      .map((x) => x.detail)
      .join(" / ");
    expect(plan).toContain("SEARCH m USING PRIMARY KEY (id=?)");
    expect(plan).toContain("USING INDEX event_log_by_source");
    expect(plan.split(" / ").filter((d) => /SCAN/.test(d) && !/VIRTUAL TABLE|^SCAN event_of_email$/.test(d))).toEqual(
      [],
    );
  });

  it("stores nothing twice, and gives a later run an index entry of its own", async () => {
    const email = newMessageId(1);
    await publish([{ tenant: "named-2", email, seqs: [1, 2] }]);
    expect((await publish([{ tenant: "named-2", email, seqs: [1, 2] }]))[0]).toBe(0);
    expect((await publish([{ tenant: "named-2", email, seqs: [1, 2, 3, 4] }]))[0]).toBe(3);
    expect(await runsOf(email)).toEqual([-1, -1, 1, -1]);
    expect(await eventsOf(email)).toEqual([1, 2, 3, 4]);
  });

  it("names no run of an email whose row or indexed run was there before", async () => {
    const [a, b] = [newMessageId(2), newMessageId(3)];
    // a's row first (the classify consumer indexed it before it had events to write).
    await env.DB.batch(indexStatements(env.DB, [{ view: view(a, "named-3", 1, "ready", 2_000), lastEvent: "queued" }]));
    // b's events first, written by a publication without its row.
    await publish([{ tenant: "named-3", email: b, seqs: [1] }], false);
    await publish([
      { tenant: "named-3", email: a, seqs: [1, 2] },
      { tenant: "named-3", email: b, seqs: [2] },
    ]);
    expect([await runsOf(a), await runsOf(b)]).toEqual([
      [0, -1],
      [0, 0],
    ]);
    expect([await headOf(a), await headOf(b)]).toEqual([
      { head_seq: null, head_run: null },
      { head_seq: null, head_run: null },
    ]);
    expect([await eventsOf(a), await eventsOf(b)]).toEqual([
      [1, 2],
      [1, 2],
    ]);
  });

  it("keeps each message's run apart when several messages of two tenants share a batch", async () => {
    const ids = [newMessageId(4), newMessageId(5), newMessageId(6)];
    const [a, b, c] = ids as [string, string, string];
    const written = await publish([
      { tenant: "named-4", email: a, seqs: [1, 2] },
      { tenant: "named-5", email: b, seqs: [1] },
      { tenant: "named-4", email: c, seqs: [1, 2, 3] },
    ]);
    // Three log rows and three message rows with their time-index entries; no log index entry.
    expect(written.reduce((n, w) => n + w, 0)).toBe(3 + 6);
    expect([await runsOf(a), await runsOf(b), await runsOf(c)]).toEqual([[-1, -1], [-1], [-1, -1, -1]]);
    expect([await eventsOf(a), await eventsOf(b), await eventsOf(c)]).toEqual([[1, 2], [1], [1, 2, 3]]);
    expect((await headOf(b))!.head_run).toBe(0);
  });

  it("the admin timeline reads an email's events through its index entries and row, not the tenant's log", async () => {
    const plan = (
      await env.DB.prepare(`EXPLAIN QUERY PLAN ${MESSAGE_EVENTS_SQL}`).bind("e", "t", 10).all<{ detail: string }>()
    ).results.map((x) => x.detail);
    expect(plan.join(" / ")).toContain("SEARCH h USING INDEX event_log_by_source (email_id=?)");
    // With the tenant as an index term, SQLite took `SEARCH h USING PRIMARY KEY (tenant_id=?)`.
    expect(plan.filter((p) => /PRIMARY KEY \(tenant_id=\?\)$/.test(p))).toEqual([]);
  });

  it("retention removes a named run's rows one by one, leaving the rest reachable, and the row naming them last", async () => {
    const email = newMessageId(7);
    // More events than a row holds: two rows, the messages row naming both.
    const seqs = Array.from({ length: REST_MAX + 3 }, (_, i) => i + 1);
    await publish([{ tenant: "named-6", email, seqs }]);
    const ids = JSON.stringify([email]);
    const r = await env.DB.prepare(PURGE_SQL.children[0]).bind(ids, 1).run();
    expect(r.meta.changes).toBe(1);
    expect((await eventsOf(email)).length).toBeGreaterThan(0);
    await env.DB.prepare(PURGE_SQL.children[0]).bind(ids, 500).run();
    expect(await eventsOf(email)).toEqual([]);
    await env.DB.prepare(PURGE_SQL.messages).bind(ids).run();
    expect(await headOf(email)).toBeNull();
  });
});
