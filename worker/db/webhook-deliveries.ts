/**
 * D1 side of webhook delivery (migrations/0003, 0004): endpoints as the consumer reads them,
 * endpoint health, dead letters.
 *
 * DESCRIPTION
 *   endpointsByIds(db, ids)          full endpoint rows (sealed secrets included), any tenant:
 *                                    the consumer checks each job's tenant against its row.
 *   disableEndpoint(db, id, reason, nowMs)  status "disabled" with a reason (410 Gone).
 *   readHealth(db, ids)              stored health states (JSON) by endpoint id.
 *   healthUpsertStatement(db, id, state, nowMs)  stores one endpoint's health.
 *   feedBodyOf(db, eventId)          a stored envelope's body, for jobs sent without one.
 *   insertDeadLetter(db, row)        dead-letters one delivery (again after a replay).
 *   listDeadLetters(db, endpointId, q)  a page, oldest first, cursor after (time, event id).
 *   markReplayed(db, endpointId, ids, nowMs)  sets replayed_at on those dead letters.
 */
import type { EndpointRow } from "./webhooks";

/** A dead-lettered delivery. */
export interface DeadLetterRow {
  endpoint_id: string;
  event_id: string;
  tenant_id: string;
  type: string;
  attempts: number;
  reason: string;
  created_at: number;
  replayed_at: number | null;
}

/** Endpoint rows by id. */
export async function endpointsByIds(db: D1Database, ids: readonly string[]): Promise<EndpointRow[]> {
  if (ids.length === 0) return [];
  const { results } = await db
    .prepare("SELECT * FROM webhook_endpoints WHERE id IN (SELECT value FROM json_each(?))")
    .bind(JSON.stringify(ids))
    .all<EndpointRow>();
  return results;
}

/** Disables an endpoint with a reason. */
export async function disableEndpoint(db: D1Database, id: string, reason: string, nowMs: number): Promise<void> {
  await db
    .prepare("UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = ?, updated_at = ? WHERE id = ?")
    .bind(reason, nowMs, id)
    .run();
}

/** Stored health states (parsed JSON) by endpoint id. */
export async function readHealth(db: D1Database, ids: readonly string[]): Promise<Map<string, unknown>> {
  if (ids.length === 0) return new Map();
  const { results } = await db
    .prepare(
      "SELECT endpoint_id, state FROM webhook_endpoint_health WHERE endpoint_id IN (SELECT value FROM json_each(?))",
    )
    .bind(JSON.stringify(ids))
    .all<{ endpoint_id: string; state: string }>();
  return new Map(results.map((r) => [r.endpoint_id, JSON.parse(r.state) as unknown]));
}

/** Stores one endpoint's health state. */
export function healthUpsertStatement(db: D1Database, id: string, state: object, nowMs: number): D1PreparedStatement {
  // An upsert, not INSERT OR REPLACE (a delete and an insert: two rows written).
  return db
    .prepare(
      `INSERT INTO webhook_endpoint_health (endpoint_id, state, updated_at) VALUES (?, ?, ?)
    ON CONFLICT (endpoint_id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at`,
    )
    .bind(id, JSON.stringify(state), nowMs);
}

export { feedBodyOf } from "./feed";

/**
 * Dead-letters one delivery. An entry not yet replayed keeps its first reason (a duplicate queue
 * message must not overwrite why it failed); a replayed one is replaced by the new failure.
 */
export async function insertDeadLetter(db: D1Database, row: Omit<DeadLetterRow, "replayed_at">): Promise<void> {
  await db
    .prepare(
      `INSERT INTO webhook_dead_letters (endpoint_id, event_id, tenant_id, type, attempts, reason, created_at, replayed_at) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)
     ON CONFLICT (endpoint_id, event_id) DO UPDATE SET attempts = excluded.attempts, reason = excluded.reason, ` +
        `created_at = excluded.created_at, replayed_at = NULL
       WHERE webhook_dead_letters.replayed_at IS NOT NULL`,
    )
    .bind(row.endpoint_id, row.event_id, row.tenant_id, row.type, row.attempts, row.reason, row.created_at)
    .run();
}

/** A page of an endpoint's dead letters, oldest first; `after` is an event id from a previous page. */
export async function listDeadLetters(
  db: D1Database,
  endpointId: string,
  q: { limit: number; after?: string },
): Promise<{ rows: DeadLetterRow[]; hasMore: boolean }> {
  const cursor = q.after
    ? await db
        .prepare("SELECT created_at, event_id FROM webhook_dead_letters WHERE endpoint_id = ? AND event_id = ?")
        .bind(endpointId, q.after)
        .first<{ created_at: number; event_id: string }>()
    : null;
  const where = cursor ? " AND (created_at > ?2 OR (created_at = ?2 AND event_id > ?3))" : "";
  const sql = `SELECT * FROM webhook_dead_letters WHERE endpoint_id = ?1${where} ORDER BY created_at, event_id LIMIT ?4`;
  const { results } = await db
    .prepare(sql)
    .bind(endpointId, cursor?.created_at ?? 0, cursor?.event_id ?? "", q.limit + 1)
    .all<DeadLetterRow>();
  return { rows: results.slice(0, q.limit), hasMore: results.length > q.limit };
}

/** Marks dead letters replayed. */
export async function markReplayed(
  db: D1Database,
  endpointId: string,
  eventIds: readonly string[],
  nowMs: number,
): Promise<void> {
  if (eventIds.length === 0) return;
  await db
    .prepare(
      "UPDATE webhook_dead_letters SET replayed_at = ? WHERE endpoint_id = ? AND event_id IN (SELECT value FROM json_each(?))",
    )
    .bind(nowMs, endpointId, JSON.stringify(eventIds))
    .run();
}
