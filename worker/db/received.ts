/**
 * Received mail in D1 (migrations/0022): one row per received email, keyed (tenant, UUIDv7 id),
 * so a tenant's rows are in arrival order in the primary key.
 *
 * DESCRIPTION
 *   receivingDomainOf(db, name)    the verified domain with receiving enabled that takes mail
 *                                  for `name`, with its tenant's own daily quota (NULL: none set),
 *                                  in one read; null when none.
 *   countSince(db, tenant, fromId) the tenant's received emails with an id at or after `fromId`.
 *   insertReceivedStatement(db, r) the insert, for a batch.
 *   listReceived(db, tenant, q)    a page, newest first, after or before an id.
 *   getReceived(db, tenant, id)    one row, or null.
 *   purgeReceivedBefore(db, tenant, beforeId, limit)  deletes up to `limit` of the tenant's rows
 *                                  older than `beforeId` with their event_log rows; returns their
 *                                  R2 keys and how many rows went.
 *   nextReceivingTenant(db, after) the next tenant with received mail (a seek on the key).
 */

export interface ReceivedRow {
  tenant_id: string;
  id: string;
  created_at: number;
  domain_id: string;
  envelope_from: string;
  from_addr: string;
  to_json: string;
  cc_json: string | null;
  bcc_json: string | null;
  reply_to_json: string | null;
  received_for_json: string;
  subject: string;
  message_id: string | null;
  headers_json: string;
  attachments_json: string;
  raw_key: string;
  size: number;
}

export async function receivingDomainOf(
  db: D1Database,
  name: string,
): Promise<{ id: string; tenant_id: string; quota: number | null } | null> {
  return db
    .prepare(
      `SELECT d.id, d.tenant_id, (SELECT receiving_daily_quota FROM tenant_settings s WHERE s.tenant_id = d.tenant_id) AS quota
      FROM domains d WHERE d.name = ? AND d.status = 'verified' AND d.receiving = 1`,
    )
    .bind(name.toLowerCase())
    .first<{ id: string; tenant_id: string; quota: number | null }>();
}

export async function countSince(db: D1Database, tenant: string, fromId: string): Promise<number> {
  return (
    (await db
      .prepare("SELECT count(*) AS n FROM received_emails WHERE tenant_id = ? AND id >= ?")
      .bind(tenant, fromId)
      .first<number>("n")) ?? 0
  );
}

export function insertReceivedStatement(db: D1Database, r: ReceivedRow): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO received_emails (tenant_id, id, created_at, domain_id, envelope_from, from_addr, to_json, cc_json, bcc_json, reply_to_json,
      received_for_json, subject, message_id, headers_json, attachments_json, raw_key, size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    )
    .bind(
      r.tenant_id,
      r.id,
      r.created_at,
      r.domain_id,
      r.envelope_from,
      r.from_addr,
      r.to_json,
      r.cc_json,
      r.bcc_json,
      r.reply_to_json,
      r.received_for_json,
      r.subject,
      r.message_id,
      r.headers_json,
      r.attachments_json,
      r.raw_key,
      r.size,
    );
}

export async function listReceived(
  db: D1Database,
  tenant: string,
  q: { limit: number; after?: string; before?: string },
): Promise<{ rows: ReceivedRow[]; hasMore: boolean }> {
  const rows =
    q.before !== undefined
      ? (
          await db
            .prepare(
              "SELECT * FROM (SELECT * FROM received_emails WHERE tenant_id = ? AND id > ? ORDER BY id LIMIT ?) ORDER BY id DESC",
            )
            .bind(tenant, q.before, q.limit + 1)
            .all<ReceivedRow>()
        ).results
      : (
          await db
            .prepare(
              `SELECT * FROM received_emails WHERE tenant_id = ?${q.after !== undefined ? " AND id < ?" : ""} ORDER BY id DESC LIMIT ?`,
            )
            .bind(...(q.after !== undefined ? [tenant, q.after, q.limit + 1] : [tenant, q.limit + 1]))
            .all<ReceivedRow>()
        ).results;
  const hasMore = rows.length > q.limit;
  if (!hasMore) return { rows, hasMore };
  return { rows: q.before !== undefined ? rows.slice(1) : rows.slice(0, q.limit), hasMore };
}

export async function getReceived(db: D1Database, tenant: string, id: string): Promise<ReceivedRow | null> {
  return db
    .prepare("SELECT * FROM received_emails WHERE tenant_id = ? AND id = ?")
    .bind(tenant, id)
    .first<ReceivedRow>();
}

export async function nextReceivingTenant(db: D1Database, after: string): Promise<string | null> {
  const row = await db
    .prepare("SELECT (SELECT MIN(tenant_id) FROM received_emails WHERE tenant_id > ?) AS t")
    .bind(after)
    .first<{ t: string | null }>();
  return row?.t ?? null;
}

export async function purgeReceivedBefore(
  db: D1Database,
  tenant: string,
  beforeId: string,
  limit: number,
): Promise<{ keys: string[]; rows: number }> {
  const due = (
    await db
      .prepare("SELECT id, raw_key FROM received_emails WHERE tenant_id = ? AND id < ? ORDER BY id LIMIT ?")
      .bind(tenant, beforeId, limit)
      .all<{ id: string; raw_key: string }>()
  ).results;
  if (due.length === 0) return { keys: [], rows: 0 };
  const ids = JSON.stringify(due.map((d) => d.id));
  const rs = await db.batch([
    db
      .prepare(
        "DELETE FROM event_runs WHERE (tenant_id, seq) IN (SELECT tenant_id, seq FROM event_rows_of_email WHERE of_email IN (SELECT value FROM json_each(?)))",
      )
      .bind(ids),
    db
      .prepare("DELETE FROM received_emails WHERE tenant_id = ? AND id IN (SELECT value FROM json_each(?))")
      .bind(tenant, ids),
  ]);
  return { keys: due.map((d) => d.raw_key), rows: rs.reduce((n, r) => n + (r.meta.changes ?? 0), 0) };
}
