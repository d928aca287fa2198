/**
 * D1 reads and writes of event publication (migrations/0004): delay-notice state, suppressions
 * added by hard bounces, and the enabled endpoints an event fans out to.
 *
 * DESCRIPTION
 *   readNotices(db, keys)              stored notice states of (email id, recipient) pairs.
 *   noticeUpsertStatement(db, notices) stores notice states; never moves one back (a stale
 *                                      concurrent publication loses on last_source_seq).
 *   suppressionUpsertStatement(db, rows)  adds bounce/complaint suppressions; an existing entry
 *                                      is only lengthened, never shortened, and one without
 *                                      expiry (manual or complaint) is left alone.
 *   enabledEndpointsStatement(db, tenants), toPublishEndpoint(row)  the tenants' enabled
 *                                      endpoints with their filters.
 */
import type { NoticeRecord } from "../webhooks/core/publication";

/** A suppression to add for a tenant. */
export interface SuppressionInsert {
  tenant_id: string;
  address: string;
  /** "", "bulk" or "bulk:<topic>" (webhooks/core/suppression-policy.ts). */
  scope: string;
  reason: string;
  created_at: number;
  expires_at: number | null;
}

/** An endpoint as publication needs it. */
export interface PublishEndpoint {
  id: string;
  tenant_id: string;
  events: string[] | null;
}

type NoticeDbRow = {
  email_id: string;
  recipient: string;
  deferrals: number;
  last_notice_ms: number | null;
  last_source_seq: number;
};

/** Stored notice states of the given (email id, recipient) pairs. */
export async function readNotices(
  db: D1Database,
  keys: readonly { emailId: string; recipient: string }[],
): Promise<NoticeRecord[]> {
  if (keys.length === 0) return [];
  const { results } = await db
    .prepare(
      `SELECT n.* FROM json_each(?1) AS j JOIN webhook_delay_notices AS n
       ON n.email_id = json_extract(j.value, '$.emailId') AND n.recipient = json_extract(j.value, '$.recipient')`,
    )
    .bind(JSON.stringify(keys))
    .all<NoticeDbRow>();
  return results.map((r) => ({
    emailId: r.email_id,
    recipient: r.recipient,
    lastSourceSeq: r.last_source_seq,
    state: { v: 1, deferrals: r.deferrals, lastNoticeMs: r.last_notice_ms },
  }));
}

/** Stores notice states (only forward in last_source_seq). */
export function noticeUpsertStatement(db: D1Database, notices: readonly NoticeRecord[]): D1PreparedStatement {
  const rows = notices.map((n) => ({
    e: n.emailId,
    r: n.recipient,
    d: n.state.deferrals,
    l: n.state.lastNoticeMs,
    s: n.lastSourceSeq,
  }));
  return db
    .prepare(
      `INSERT INTO webhook_delay_notices (email_id, recipient, deferrals, last_notice_ms, last_source_seq)
     SELECT json_extract(j.value, '$.e'), json_extract(j.value, '$.r'), json_extract(j.value, '$.d'), json_extract(j.value, '$.l'), json_extract(j.value, '$.s')
     FROM json_each(?1) AS j WHERE true
     ON CONFLICT (email_id, recipient) DO UPDATE SET deferrals = excluded.deferrals, last_notice_ms = excluded.last_notice_ms,
       last_source_seq = excluded.last_source_seq WHERE excluded.last_source_seq > webhook_delay_notices.last_source_seq`,
    )
    .bind(JSON.stringify(rows));
}

/** Adds suppressions; lengthens an existing expiring entry, never shortens or replaces a permanent one. */
export function suppressionUpsertStatement(db: D1Database, rows: readonly SuppressionInsert[]): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO suppressions (tenant_id, address, scope, reason, created_at, expires_at)
     SELECT json_extract(j.value, '$.tenant_id'), json_extract(j.value, '$.address'), json_extract(j.value, '$.scope'),
       json_extract(j.value, '$.reason'), json_extract(j.value, '$.created_at'), json_extract(j.value, '$.expires_at')
     FROM json_each(?1) AS j WHERE true
     ON CONFLICT (tenant_id, address, scope) DO UPDATE SET reason = excluded.reason, created_at = excluded.created_at, expires_at = excluded.expires_at
       WHERE suppressions.expires_at IS NOT NULL AND (excluded.expires_at IS NULL OR excluded.expires_at > suppressions.expires_at)`,
    )
    .bind(JSON.stringify(rows));
}

/** Reads the enabled endpoints of the given tenants (inside a batch); rows go through toPublishEndpoint. */
export function enabledEndpointsStatement(db: D1Database, tenants: readonly string[]): D1PreparedStatement {
  return db
    .prepare(
      "SELECT id, tenant_id, events FROM webhook_endpoints WHERE status = 'enabled' AND tenant_id IN (SELECT value FROM json_each(?))",
    )
    .bind(JSON.stringify(tenants));
}

/** An endpoint row of enabledEndpointsStatement, its filter parsed. */
export function toPublishEndpoint(r: { id: string; tenant_id: string; events: string | null }): PublishEndpoint {
  return { id: r.id, tenant_id: r.tenant_id, events: r.events === null ? null : (JSON.parse(r.events) as string[]) };
}
