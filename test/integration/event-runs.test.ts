/**
 * Migration 0036: an email's events written by one statement are one run of seqs, of which only
 * the first row (the head) has an entry in event_log_by_source. Every event stays reachable
 * through event_of_email exactly once, a repeated or extended publication stores nothing twice,
 * and retention deletes a run's rows before its head.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { newMessageId } from "../../worker/model/ids";
import { logInsertStatements, type LogRow } from "../../worker/db/events";
import { feedBodyOf } from "../../worker/db/feed";
import { eventId } from "../../worker/webhooks/core/event-id";
import { PURGE_SQL } from "../../worker/db/retention";
import { deliveredRow } from "./log-rows";

const row = (email: string, sourceSeq: number, at: number): LogRow =>
  deliveredRow(
    sourceSeq,
    eventId({ emailId: email, recipient: "r@x.example", attempt: sourceSeq, type: "email.delivered" }),
    at,
  );

async function log(tenant: string, messages: { email: string; seqs: number[] }[]): Promise<number> {
  const rs = await env.DB.batch(
    logInsertStatements(
      env.DB,
      messages.map((m) => ({ tenant, emailId: m.email, rows: m.seqs.map((s) => row(m.email, s, 5_000)) })),
      6_000,
    ),
  );
  return rs.reduce((n, r) => n + r.meta.rows_written, 0);
}

async function eventsOf(email: string): Promise<number[]> {
  const r = await env.DB.prepare("SELECT source_seq FROM event_of_email WHERE of_email = ? ORDER BY seq")
    .bind(email)
    .all<{ source_seq: number }>();
  return r.results.map((x) => x.source_seq);
}

describe("runs of an email's events (migration 0036)", () => {
  it("writes one index entry per run: two events of one email cost 3 rows, not 4", async () => {
    const email = newMessageId(0);
    expect(await log("runs-1", [{ email, seqs: [1, 2] }])).toBe(3);
    const stored = await env.DB.prepare("SELECT source_seq, run FROM event_log WHERE email_id = ? ORDER BY seq")
      .bind(email)
      .all<{ source_seq: number; run: number }>();
    expect(stored.results).toEqual([
      { source_seq: 1, run: 1 },
      { source_seq: 2, run: -1 },
    ]);
    expect(await eventsOf(email)).toEqual([1, 2]);
    // The second event is found by its id through its run.
    expect(await feedBodyOf(env.DB, row(email, 2, 0).event_id!)).toBe(JSON.stringify({ n: 2 }));
    const plan = (
      await env.DB.prepare("EXPLAIN QUERY PLAN SELECT seq FROM event_of_email WHERE of_email = ?")
        .bind(email)
        .all<{ detail: string }>()
    ).results.map((x) => x.detail);
    expect(plan.join(" / ")).toContain("USING INDEX event_log_by_source");
    expect(plan.join(" / ")).toContain("USING PRIMARY KEY");
    expect(plan.join(" / ")).not.toMatch(/SCAN/);
  });

  it("stores nothing twice: a repeat writes nothing, a longer publication only what is new, as a run of its own", async () => {
    const email = newMessageId(1);
    expect(await log("runs-2", [{ email, seqs: [1, 2] }])).toBe(3);
    expect(await log("runs-2", [{ email, seqs: [1, 2] }])).toBe(0);
    expect(await log("runs-2", [{ email, seqs: [1, 2, 3, 4] }])).toBe(3);
    expect(await eventsOf(email)).toEqual([1, 2, 3, 4]);
  });

  it("stores a row given twice in one statement once (a message twice in a batch)", async () => {
    const email = newMessageId(8);
    expect(
      await log("runs-6", [
        { email, seqs: [1, 2] },
        { email, seqs: [2, 3] },
      ]),
    ).toBe(4);
    expect(await eventsOf(email)).toEqual([1, 2, 3]);
  });

  it("keeps each email's events apart when runs of several emails interleave in one statement", async () => {
    const [a, b, c] = [newMessageId(2), newMessageId(3), newMessageId(4)];
    // a's rows come on both sides of b's: a's run spans b's seqs, which stay b's.
    expect(
      await log("runs-3", [
        { email: a, seqs: [1] },
        { email: b, seqs: [1, 2] },
        { email: a, seqs: [2] },
        { email: c, seqs: [1] },
      ]),
    ).toBe(5 + 3);
    expect(await eventsOf(a)).toEqual([1, 2]);
    expect(await eventsOf(b)).toEqual([1, 2]);
    expect(await eventsOf(c)).toEqual([1]);
  });

  it("finds rows written before the migration (run NULL) as heads of their own", async () => {
    const email = newMessageId(5);
    await env.DB.prepare(
      "INSERT INTO event_log (tenant_id, seq, email_id, source_seq, part, type, created_at) VALUES " +
        "('runs-4', 7000000, ?1, 1, 0, 'email.sent', 7000), ('runs-4', 7000001, ?1, 2, 0, 'email.delivered', 7000)",
    )
      .bind(email)
      .run();
    expect(await eventsOf(email)).toEqual([1, 2]);
    expect(await log("runs-4", [{ email, seqs: [2, 3] }])).toBe(2);
    expect(await eventsOf(email)).toEqual([1, 2, 3]);
  });

  it("retention deletes a run's rows before its head, so a delete cut short leaves every row reachable", async () => {
    const [a, b] = [newMessageId(6), newMessageId(7)];
    await log("runs-5", [
      { email: a, seqs: [1, 2, 3] },
      { email: b, seqs: [1, 2] },
    ]);
    const ids = JSON.stringify([a, b]);
    const left = async () =>
      (await env.DB.prepare("SELECT count(*) AS n FROM event_log WHERE email_id IN (SELECT value FROM json_each(?))")
        .bind(ids)
        .first<{ n: number }>())!.n;
    // Three deletes of one row each: the three rows that are not heads.
    for (let i = 0; i < 3; i++) await env.DB.prepare(PURGE_SQL.children[0]).bind(ids, 1).run();
    expect(await left()).toBe(2);
    expect(await eventsOf(a)).toEqual([1]);
    expect(await eventsOf(b)).toEqual([1]);
    await env.DB.prepare(PURGE_SQL.children[0]).bind(ids, 500).run();
    expect(await left()).toBe(0);
  });
});
