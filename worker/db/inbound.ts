/**
 * Mail that came back, in D1: the counts by day and kind (migrations/0011) and the reports with
 * their verdicts (migrations/0017).
 *
 * DESCRIPTION
 *   countInbound(db, kind, nowMs)     adds one to the UTC day's count of `kind`.
 *   reportSeen(db, messageId, to)     whether a report with this Message-ID already came to this
 *                                     address (the same report again is a duplicate).
 *   saveReport(db, row)               stores a report once per (Message-ID, address).
 *   listReports(db, q)                the reports received since q.fromMs, newest first, at most
 *                                     q.limit, optionally of one verdict and before q.beforeMs.
 *
 * INVARIANTS
 *   Each statement finds its rows through an index: the day-kind key, inbound_reports_once,
 *   inbound_reports_by_time.
 */

/** A stored report (see migrations/0017_inbound_reports.sql). */
export interface InboundReportRow {
  id: string;
  received_at: number;
  kind: "dsn" | "arf";
  verdict: string;
  email_id: string | null;
  tenant_id: string | null;
  envelope_from: string;
  envelope_to: string;
  message_id: string | null;
  detail: string;
  raw: string;
  raw_size: number;
}

/** See the header. */
export async function countInbound(db: D1Database, kind: string, nowMs: number): Promise<void> {
  await db
    .prepare(
      "INSERT INTO inbound_counts (day, kind, n) VALUES (?, ?, 1) ON CONFLICT (day, kind) DO UPDATE SET n = n + 1",
    )
    .bind(new Date(nowMs).toISOString().slice(0, 10), kind)
    .run();
}

/** See the header. */
export async function reportSeen(db: D1Database, messageId: string | null, to: string): Promise<boolean> {
  if (messageId === null) return false;
  return (
    (await db
      .prepare("SELECT 1 AS x FROM inbound_reports WHERE message_id = ? AND envelope_to = ?")
      .bind(messageId, to)
      .first<{ x: number }>()) !== null
  );
}

/** See the header. */
export async function saveReport(db: D1Database, r: InboundReportRow): Promise<void> {
  await db
    .prepare(
      `INSERT OR IGNORE INTO inbound_reports
      (id, received_at, kind, verdict, email_id, tenant_id, envelope_from, envelope_to, message_id, detail, raw, raw_size)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    )
    .bind(
      r.id,
      r.received_at,
      r.kind,
      r.verdict,
      r.email_id,
      r.tenant_id,
      r.envelope_from,
      r.envelope_to,
      r.message_id,
      r.detail,
      r.raw,
      r.raw_size,
    )
    .run();
}

/** See the header. */
export async function listReports(
  db: D1Database,
  q: { fromMs: number; beforeMs: number; limit: number; verdict: string | null },
): Promise<InboundReportRow[]> {
  return (
    await db
      .prepare(
        `SELECT * FROM inbound_reports WHERE received_at >= ?1 AND received_at < ?2 AND (?3 IS NULL OR verdict = ?3)
      ORDER BY received_at DESC, id DESC LIMIT ?4`,
      )
      .bind(q.fromMs, q.beforeMs, q.verdict, q.limit)
      .all<InboundReportRow>()
  ).results;
}
