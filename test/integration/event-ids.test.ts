/**
 * Migration 0010: event ids name their email, every look-up by event id goes through the index of
 * the email's events, and a new pushed event writes no index entry of its id; ids stored before
 * keep working through a partial index only they are in.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { newMessageId } from "../../worker/model/ids";
import { feedTakeoverStatement, logInsertStatements, releaseFeedClaims } from "../../worker/db/events";
import { feedBodyOf, feedSeqOf } from "../../worker/db/feed";
import { eventId } from "../../worker/webhooks/core/event-id";
import { deliveredRow } from "./log-rows";

const row = deliveredRow;

async function plan(sql: string, ...binds: unknown[]): Promise<string> {
  const r = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .bind(...binds)
    .all<{ detail: string }>();
  return r.results.map((x) => x.detail).join(" / ");
}

describe("event ids that name their email (migration 0010)", () => {
  it("a pushed event costs its row and its source entry, no entry of its id", async () => {
    const email = newMessageId(0);
    const id = eventId({ emailId: email, recipient: "r@x.example", attempt: 1, type: "email.delivered" });
    const [stmt] = logInsertStatements(env.DB, [{ tenant: "ids", emailId: email, rows: [row(1, id, 5000)] }], 6000);
    const res = await stmt!.run();
    expect(res.meta.rows_written).toBe(2);
    expect(await feedSeqOf(env.DB, "ids", id)).toBeGreaterThanOrEqual(5_000_000);
    expect(await feedBodyOf(env.DB, id)).toBe(JSON.stringify({ n: 1 }));
    expect(await feedSeqOf(env.DB, "other-tenant", id)).toBeNull();
    // The same webhook-id from another transition keeps its transition without an envelope.
    const again = await env.DB.batch<{ event_id: string | null }>(
      logInsertStatements(env.DB, [{ tenant: "ids", emailId: email, rows: [row(2, id, 5001)] }], 6001),
    );
    expect(again.flatMap((r) => r.results.map((x) => x.event_id))).toEqual([null]);
    const stored = await env.DB.prepare(
      "SELECT source_seq, event_id FROM event_log WHERE email_id = ? ORDER BY source_seq",
    )
      .bind(email)
      .all();
    expect(stored.results).toEqual([
      { source_seq: 1, event_id: id },
      { source_seq: 2, event_id: null },
    ]);
  });

  it("claims and releases through the email's events", async () => {
    const email = newMessageId(1);
    const id = eventId({ emailId: email, recipient: "r@x.example", attempt: 1, type: "email.delivered" });
    await logInsertStatements(env.DB, [{ tenant: "claims", emailId: email, rows: [row(1, id, 5000)] }], 1000)[0]!.run();
    // The insert holds the claim: a takeover within the lease takes nothing; after it, the event.
    expect((await feedTakeoverStatement(env.DB, [id], 2000, 10_000).all()).results).toEqual([]);
    expect(
      (await feedTakeoverStatement(env.DB, [id], 20_000, 10_000).all<{ event_id: string }>()).results.map(
        (r) => r.event_id,
      ),
    ).toEqual([id]);
    await releaseFeedClaims(env.DB, [id], 20_000);
    expect(
      (await env.DB.prepare("SELECT enqueued_at FROM event_log WHERE email_id = ?")
        .bind(email)
        .first<{ enqueued_at: number | null }>())!.enqueued_at,
    ).toBeNull();
  });

  it("finds an id of the earlier form through the partial index, and every look-up uses an index", async () => {
    const legacy = "evt_0123456789abcdef0123456789abcdef";
    await env.DB.prepare(
      "INSERT INTO event_runs (tenant_id, seq, email_id, source_seq, part, type, created_at, " +
        "event_id, event_type, body) VALUES ('old', 7000000, 'm-old', -1, 0, 'email.sent', 7000, " +
        "?, 'email.sent', '{}')",
    )
      .bind(legacy)
      .run();
    expect(await feedSeqOf(env.DB, "old", legacy)).toBe(7_000_000);
    expect(await feedBodyOf(env.DB, legacy)).toBe("{}");
    expect(
      await plan(
        "SELECT seq FROM event_runs WHERE event_id = ? AND instr(substr(event_id, 5), '_') = 0 AND +tenant_id = ?",
        legacy,
        "old",
      ),
    ).toContain("event_log_by_legacy_event_id");
    expect(
      await plan(
        "SELECT seq FROM event_of_email WHERE of_email = ? AND event_id = ? AND +tenant_id = ?",
        "e",
        "evt_e_0123456789abcdef",
        "t",
      ),
    ).toContain("event_log_by_source");
    const claim = await plan(
      "UPDATE event_runs SET enqueued_at = 1 WHERE (tenant_id, seq) IN (SELECT tenant_id, head_seq FROM event_of_email " +
        "WHERE of_email IN (SELECT value FROM json_each(?1)) AND event_id IN (SELECT value FROM json_each(?2)))",
      '["e"]',
      '["evt_e_0123456789abcdef"]',
    );
    expect(claim).toContain("event_log_by_source");
    expect(claim).not.toMatch(/SCAN event_runs(?! USING)/);
  });
});
