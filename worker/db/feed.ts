/**
 * The pull feed and the stored envelopes of the D1 event log (db/events.ts writes them): read
 * whole, a compact body given back the fields its messages row holds (core/stored-body.ts).
 *
 * DESCRIPTION
 *   feedSeqOf(db, tenant, id)    the tenant's seq of an event id, or null.
 *   feedBodyOf(db, id)           a stored envelope's body, whole, or null.
 *   Event ids are found through the index of their email's events (event_of_email).
 *   listFeed(db, tenant, q)      a page of envelopes after a seq, oldest first, optionally of some types.
 *   feedRange(db, tenant, q)     envelopes in a seq and time range, for replay.
 *
 * INVARIANTS
 *   A compact body finds its messages row: it is written only in the batch that writes the row,
 *   and retention deletes an email's events before its row (db/retention.ts).
 */
import { emailOfEventId } from "../webhooks/core/event-id";
import { COMPACT_MARK, expandBody, type MessageFields } from "../webhooks/core/stored-body";
import { seqFloor, type FeedRow } from "./events";

/**
 * RETURNED of event_log `e` with the columns of its messages row `m` that a compact body leaves
 * out (core/stored-body.ts), joined only for such a body (a look-up by primary key).
 */
const FEED_COLUMNS =
  "e.tenant_id, e.seq, e.email_id, e.event_id, e.event_type AS type, e.body, m.id AS m_id, m.created_at AS m_created_at, " +
  "m.from_addr AS m_from_addr, m.to_json AS m_to_json, m.subject AS m_subject";
const WITH_MESSAGE = `LEFT JOIN messages m ON substr(e.body, 1, 1) = '${COMPACT_MARK}' AND m.id = e.email_id`;

type JoinedRow = FeedRow & { [K in keyof MessageFields as `m_${K}`]: MessageFields[K] | null };

/** A row of FEED_COLUMNS with its envelope whole; throws when a compact body lost its messages row (a bug). */
function whole(r: JoinedRow): FeedRow {
  const m =
    r.m_id === null
      ? null
      : {
          id: r.m_id,
          created_at: r.m_created_at!,
          from_addr: r.m_from_addr!,
          to_json: r.m_to_json!,
          subject: r.m_subject,
        };
  const body = expandBody(r.body, m);
  if (body === null)
    throw new Error(`event ${r.event_id}: its envelope is stored compact, and its messages row is gone`);
  return { tenant_id: r.tenant_id, seq: r.seq, email_id: r.email_id, event_id: r.event_id, type: r.type, body };
}

/** The rows (FROM and WHERE, with their parameters) that find an event id: by its email's events, or for an id of the earlier form by the partial index that keeps those. */
function whereEventId(id: string): { from: string; where: string; binds: string[] } {
  const email = emailOfEventId(id);
  return email !== null
    ? { from: "event_of_email", where: "of_email = ? AND event_id = ?", binds: [email, id] }
    : { from: "event_log", where: "event_id = ? AND instr(substr(event_id, 5), '_') = 0", binds: [id] };
}

/** A stored envelope's body, whole, or null. */
export async function feedBodyOf(db: D1Database, eventId: string): Promise<string | null> {
  const { from, where, binds } = whereEventId(eventId);
  const r = await db
    .prepare(`SELECT ${FEED_COLUMNS} FROM ${from} e ${WITH_MESSAGE} WHERE ${where} AND e.body IS NOT NULL`)
    .bind(...binds)
    .first<JoinedRow>();
  return r ? whole(r).body : null;
}

/** The tenant's seq of an event id, or null when the tenant has no such event. */
export async function feedSeqOf(db: D1Database, tenant: string, eventId: string): Promise<number | null> {
  const { from, where, binds } = whereEventId(eventId);
  // `+tenant_id`: not the primary key's tenant prefix (every row of the tenant), the id's index.
  const r = await db
    .prepare(`SELECT seq FROM ${from} WHERE ${where} AND +tenant_id = ?`)
    .bind(...binds, tenant)
    .first<{ seq: number }>();
  return r?.seq ?? null;
}

/**
 * A page of the tenant's envelopes with seq > afterSeq, oldest first. A type filter walks the
 * tenant's log in order and skips other types (no per-type index is written).
 */
export async function listFeed(
  db: D1Database,
  tenant: string,
  q: { afterSeq: number; limit: number; types?: readonly string[] },
): Promise<{ rows: FeedRow[]; hasMore: boolean }> {
  const typed = q.types !== undefined && q.types.length > 0;
  const sql =
    `SELECT ${FEED_COLUMNS} FROM event_log e ${WITH_MESSAGE} ` +
    `WHERE e.tenant_id = ?1 AND e.seq > ?2 AND e.event_id IS NOT NULL${typed ? " AND e.event_type IN (SELECT value FROM json_each(?4))" : ""}` +
    ` ORDER BY e.seq LIMIT ?3`;
  const stmt = typed
    ? db.prepare(sql).bind(tenant, q.afterSeq, q.limit + 1, JSON.stringify(q.types))
    : db.prepare(sql).bind(tenant, q.afterSeq, q.limit + 1);
  const { results } = await stmt.all<JoinedRow>();
  return { rows: results.slice(0, q.limit).map(whole), hasMore: results.length > q.limit };
}

/**
 * The tenant's envelopes in a seq range (exclusive after, inclusive until) and time range,
 * oldest first. The scan starts at the time range's seq floor.
 */
export async function feedRange(
  db: D1Database,
  tenant: string,
  q: { afterSeq: number; untilSeq: number; fromMs: number; toMs: number; limit: number },
): Promise<FeedRow[]> {
  const after = Math.max(q.afterSeq, seqFloor(q.fromMs) - 1);
  const { results } = await db
    .prepare(
      `SELECT ${FEED_COLUMNS} FROM event_log e ${WITH_MESSAGE} ` +
        `WHERE e.tenant_id = ? AND e.seq > ? AND e.seq <= ? AND e.event_id IS NOT NULL AND e.created_at >= ? AND e.created_at <= ? ORDER BY e.seq LIMIT ?`,
    )
    .bind(tenant, after, q.untilSeq, q.fromMs, q.toMs, q.limit)
    .all<JoinedRow>();
  return results.map(whole);
}
