/**
 * The D1 event log: append-only, ids (`seq`) monotonic per tenant.
 *
 * DESCRIPTION
 *   eventStatements(db, events)  one insert for a message's Outbox events. Their `seq` continues
 *                                from the tenant's maximum, read inside the statement (D1 runs
 *                                one statement at a time), so ids are monotonic per tenant; an
 *                                event already forwarded is ignored by its `source_key`
 *                                (`<email id>:<outbox seq>`), which can leave a gap, never a
 *                                repeat, however often the queue delivers it.
 *   listEvents(db, tenant, afterSeq, limit)  the tenant's events in order (tests and the future
 *                                feed).
 */
import type { OutboxEvent } from "../../durable-objects/storage/outbox-types";

/** A stored event. */
export interface EventRow {
  tenant_id: string;
  seq: number;
  type: string;
  email_id: string;
  recipient: string | null;
  created_at: number;
  data: string;
}

/** One idempotent insert for a message's Outbox events (all of one tenant). */
export function eventStatements(db: D1Database, events: OutboxEvent[]): D1PreparedStatement[] {
  const first = events[0];
  if (!first) return [];
  const rows = events.map((e) => ({ key: `${e.message_id}:${e.seq}`, type: e.type, email_id: e.message_id, recipient: e.recipient, created_at: e.created_at, data: e.data }));
  return [db.prepare(
    `INSERT OR IGNORE INTO events (tenant_id, seq, source_key, type, email_id, recipient, created_at, data)
     SELECT ?1, (SELECT COALESCE(MAX(seq), 0) FROM events WHERE tenant_id = ?1) + j.key + 1,
       json_extract(j.value, '$.key'), json_extract(j.value, '$.type'), json_extract(j.value, '$.email_id'),
       json_extract(j.value, '$.recipient'), json_extract(j.value, '$.created_at'), json_extract(j.value, '$.data')
     FROM json_each(?2) AS j`,
  ).bind(first.tenant, JSON.stringify(rows))];
}

/** The tenant's events with seq > afterSeq, oldest first. */
export async function listEvents(db: D1Database, tenant: string, afterSeq = 0, limit = 100): Promise<EventRow[]> {
  const r = await db.prepare("SELECT tenant_id, seq, type, email_id, recipient, created_at, data FROM events WHERE tenant_id = ? AND seq > ? ORDER BY seq LIMIT ?")
    .bind(tenant, afterSeq, limit).all<EventRow>();
  return r.results;
}
