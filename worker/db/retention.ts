/**
 * D1 retention: a finished message's D1 rows go MESSAGE_RETENTION_DAYS after its last change,
 * and dead letters that long after they were dead-lettered. Called from the scheduled() cron.
 *
 * DESCRIPTION
 *   purgeExpired(db, nowMs, retentionDays, budget?)  deletes, in bounded statements (at most
 *       PURGE_ROWS rows each), every finished message (last_event final) created and last
 *       changed before the cutoff: its event_log rows, recipients, message_tags and
 *       webhook_delay_notices first, the message row last (so a run cut short finds the message
 *       again next time); then the dead letters older than the cutoff, the inbound counts of days
 *       before it, the Email Service message ids kept before it and the inbound reports received
 *       before it. Returns what it deleted and whether it stopped at its statement budget (the
 *       next run continues).
 *
 * INVARIANTS
 *   Every statement finds its rows through an index: messages through messages_by_tenant_time
 *   (the tenants enumerated by seeks on it, never a scan), a message's rows through their
 *   primary keys or event_log_by_source (event_of_email), dead letters through webhook_dead_letters_by_time per
 *   endpoint. A message that is not finished is never touched.
 */

/** last_event values of a message whose every recipient is final. */
export const FINISHED_EVENTS = ["delivered", "bounced", "failed", "canceled", "suppressed", "complained"] as const;

/** Rows one DELETE removes at most. */
export const PURGE_ROWS = 500;
/** Messages purged together. */
const MESSAGES_PER_ROUND = 100;
/** Statements one run may spend (D1 allows 1,000 queries per invocation). */
const DEFAULT_BUDGET = 400;

/** What a run deleted. */
export interface PurgeReport {
  messages: number;
  rows: number;
  deadLetters: number;
  /** The budget ran out: more may be due. */
  truncated: boolean;
}

const DAY_MS = 86_400_000;
const FINISHED_SQL = FINISHED_EVENTS.map((e) => `'${e}'`).join(", ");

/**
 * The children of a set of messages, each deleted PURGE_ROWS at a time through an index. The rows
 * of a run of events go before its head (migration 0036), so a delete cut short never leaves a
 * row that its email's look-up cannot reach.
 */
const CHILDREN = [
  "DELETE FROM event_runs WHERE (tenant_id, seq) IN (SELECT tenant_id, seq FROM event_rows_of_email WHERE of_email IN (SELECT value FROM json_each(?1)) ORDER BY run IS NOT -1 LIMIT ?2)",
  "DELETE FROM recipients WHERE (message_id, idx) IN (SELECT message_id, idx FROM recipients WHERE message_id IN (SELECT value FROM json_each(?1)) LIMIT ?2)",
  "DELETE FROM message_tags WHERE rowid IN (SELECT rowid FROM message_tags WHERE message_id IN (SELECT value FROM json_each(?1)) LIMIT ?2)",
  "DELETE FROM webhook_delay_notices WHERE rowid IN (SELECT rowid FROM webhook_delay_notices WHERE email_id IN (SELECT value FROM json_each(?1)) LIMIT ?2)",
] as const;

/** SQL of the purge, for tests that check the query plans. */
export const PURGE_SQL = {
  tenants: "SELECT (SELECT MIN(tenant_id) FROM messages WHERE tenant_id > ?1) AS t",
  due:
    `SELECT id FROM messages WHERE tenant_id = ?1 AND created_at < ?2 AND updated_at < ?2 ` +
    `AND last_event IN (${FINISHED_SQL}) ORDER BY created_at DESC, id DESC LIMIT ?3`,
  children: CHILDREN,
  messages: "DELETE FROM messages WHERE id IN (SELECT value FROM json_each(?1))",
  endpoints: "SELECT (SELECT MIN(endpoint_id) FROM webhook_dead_letters WHERE endpoint_id > ?1) AS e",
  deadLetters:
    "DELETE FROM webhook_dead_letters WHERE rowid IN (SELECT rowid FROM webhook_dead_letters WHERE endpoint_id = ?1 AND created_at < ?2 LIMIT ?3)",
  inboundCounts: "DELETE FROM inbound_counts WHERE day < ?1",
  cfEmailSends:
    "DELETE FROM cf_email_sends WHERE cf_message_id IN (SELECT cf_message_id FROM cf_email_sends WHERE created_at < ?1 LIMIT ?2)",
  inboundReports:
    "DELETE FROM inbound_reports WHERE rowid IN (SELECT rowid FROM inbound_reports WHERE received_at < ?1 LIMIT ?2)",
} as const;

/** Deletes expired rows (see the header). */
export async function purgeExpired(
  db: D1Database,
  nowMs: number,
  retentionDays: number,
  budget = DEFAULT_BUDGET,
): Promise<PurgeReport> {
  const report: PurgeReport = { messages: 0, rows: 0, deadLetters: 0, truncated: false };
  if (!(retentionDays > 0)) return report;
  const cutoff = nowMs - retentionDays * DAY_MS;
  let left = budget;
  const spend = (n: number) => {
    left -= n;
    if (left < 0) report.truncated = true;
    return left >= 0;
  };

  let tenant = "";
  tenants: for (;;) {
    if (!spend(1)) break;
    const t = (await db.prepare(PURGE_SQL.tenants).bind(tenant).first<{ t: string | null }>())?.t ?? null;
    if (t === null) break;
    tenant = t;
    for (;;) {
      if (!spend(1)) break tenants;
      const ids = (
        await db.prepare(PURGE_SQL.due).bind(tenant, cutoff, MESSAGES_PER_ROUND).all<{ id: string }>()
      ).results.map((r) => r.id);
      if (ids.length === 0) break;
      const list = JSON.stringify(ids);
      let pending: string[] = [...CHILDREN];
      while (pending.length > 0) {
        if (!spend(pending.length)) break tenants;
        const rs = await db.batch(pending.map((sql) => db.prepare(sql).bind(list, PURGE_ROWS)));
        report.rows += rs.reduce((n, r) => n + (r.meta.changes ?? 0), 0);
        pending = pending.filter((_, i) => (rs[i]?.meta.changes ?? 0) >= PURGE_ROWS);
      }
      if (!spend(1)) break tenants;
      const r = await db.prepare(PURGE_SQL.messages).bind(list).run();
      report.messages += r.meta.changes ?? 0;
      report.rows += r.meta.changes ?? 0;
      if (ids.length < MESSAGES_PER_ROUND) break;
    }
  }

  let endpoint = "";
  for (;;) {
    if (!spend(1)) break;
    const e = (await db.prepare(PURGE_SQL.endpoints).bind(endpoint).first<{ e: string | null }>())?.e ?? null;
    if (e === null) break;
    endpoint = e;
    for (;;) {
      if (!spend(1)) break;
      const n = (await db.prepare(PURGE_SQL.deadLetters).bind(endpoint, cutoff, PURGE_ROWS).run()).meta.changes ?? 0;
      report.deadLetters += n;
      report.rows += n;
      if (n < PURGE_ROWS) break;
    }
    if (report.truncated) break;
  }
  if (spend(1))
    report.rows +=
      (await db.prepare(PURGE_SQL.inboundCounts).bind(new Date(cutoff).toISOString().slice(0, 10)).run()).meta
        .changes ?? 0;
  // Email Service's message ids of the cf-email egress (its events come within days).
  if (spend(1))
    report.rows += (await db.prepare(PURGE_SQL.cfEmailSends).bind(cutoff, PURGE_ROWS).run()).meta.changes ?? 0;
  while (spend(1)) {
    const n = (await db.prepare(PURGE_SQL.inboundReports).bind(cutoff, PURGE_ROWS).run()).meta.changes ?? 0;
    report.rows += n;
    if (n < PURGE_ROWS) break;
  }
  return report;
}
