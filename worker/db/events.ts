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
 *   listEvents(db, tenant, afterSeq, limit)  the tenant's internal events in order (tests).
 *
 *   The pushed envelopes (migrations/0004 `event_feed`, the pull feed):
 *   feedInsertStatements(db, events)  idempotent inserts (by event id = webhook-id) of planned
 *                                envelopes, `seq` continuing each tenant's maximum as above.
 *   feedClaimStatement(db, ids, nowMs, leaseMs)  claims those events for the queue and returns
 *                                the stored rows claimed (what is pushed); releaseFeedClaims
 *                                gives the claims up when the enqueue failed.
 *   feedSeqOf(db, tenant, id)    the tenant's seq of an event id, or null.
 *   listFeed(db, tenant, q)      a page after a seq, oldest first, optionally of some types.
 *   feedRange(db, tenant, q)     rows in a seq or time range, for replay.
 */
import type { OutboxEvent } from "../../durable-objects/storage/outbox-types";
import type { PlannedEvent } from "../webhooks/core/publication";

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

/** A stored pushed envelope. */
export interface FeedRow {
  tenant_id: string;
  seq: number;
  event_id: string;
  type: string;
  email_id: string;
  recipient: string | null;
  created_at: number;
  body: string;
  enqueued_at: number | null;
}

/** Idempotent inserts of planned envelopes, one statement per tenant. */
export function feedInsertStatements(db: D1Database, events: readonly PlannedEvent[]): D1PreparedStatement[] {
  const byTenant = new Map<string, PlannedEvent[]>();
  for (const e of events) byTenant.set(e.tenant, [...(byTenant.get(e.tenant) ?? []), e]);
  return [...byTenant].map(([tenant, list]) => db.prepare(
    `INSERT OR IGNORE INTO event_feed (tenant_id, seq, event_id, type, email_id, recipient, created_at, body)
     SELECT ?1, (SELECT COALESCE(MAX(seq), 0) FROM event_feed WHERE tenant_id = ?1) + j.key + 1,
       json_extract(j.value, '$.id'), json_extract(j.value, '$.type'), json_extract(j.value, '$.emailId'),
       json_extract(j.value, '$.recipient'), json_extract(j.value, '$.createdAtMs'), json_extract(j.value, '$.body')
     FROM json_each(?2) AS j`,
  ).bind(tenant, JSON.stringify(list)));
}

/**
 * Claims the given events for the webhooks queue and returns the claimed rows: those never
 * claimed, or claimed more than `leaseMs` ago (a publication that died before its Outbox ack,
 * now repeated). Two concurrent publications of the same events thus enqueue them once.
 */
export function feedClaimStatement(db: D1Database, ids: readonly string[], nowMs: number, leaseMs: number): D1PreparedStatement {
  return db.prepare("UPDATE event_feed SET enqueued_at = ?2 WHERE event_id IN (SELECT value FROM json_each(?1)) AND (enqueued_at IS NULL OR enqueued_at < ?3) RETURNING *")
    .bind(JSON.stringify(ids), nowMs, nowMs - leaseMs);
}

/** Gives up claims (the enqueue failed), so a repeated publication enqueues them. */
export async function releaseFeedClaims(db: D1Database, ids: readonly string[], claimedAtMs: number): Promise<void> {
  await db.prepare("UPDATE event_feed SET enqueued_at = NULL WHERE event_id IN (SELECT value FROM json_each(?1)) AND enqueued_at = ?2").bind(JSON.stringify(ids), claimedAtMs).run();
}

/** The tenant's seq of an event id, or null when the tenant has no such event. */
export async function feedSeqOf(db: D1Database, tenant: string, eventId: string): Promise<number | null> {
  const r = await db.prepare("SELECT seq FROM event_feed WHERE tenant_id = ? AND event_id = ?").bind(tenant, eventId).first<{ seq: number }>();
  return r?.seq ?? null;
}

/** A page of the tenant's envelopes with seq > afterSeq, oldest first. */
export async function listFeed(db: D1Database, tenant: string, q: { afterSeq: number; limit: number; types?: readonly string[] }): Promise<{ rows: FeedRow[]; hasMore: boolean }> {
  const typed = q.types !== undefined && q.types.length > 0;
  const sql = `SELECT * FROM event_feed WHERE tenant_id = ?1 AND seq > ?2${typed ? " AND type IN (SELECT value FROM json_each(?4))" : ""} ORDER BY seq LIMIT ?3`;
  const stmt = typed ? db.prepare(sql).bind(tenant, q.afterSeq, q.limit + 1, JSON.stringify(q.types)) : db.prepare(sql).bind(tenant, q.afterSeq, q.limit + 1);
  const { results } = await stmt.all<FeedRow>();
  return { rows: results.slice(0, q.limit), hasMore: results.length > q.limit };
}

/** The tenant's envelopes in a seq range (exclusive after, inclusive until) and time range, oldest first. */
export async function feedRange(db: D1Database, tenant: string, q: { afterSeq: number; untilSeq: number; fromMs: number; toMs: number; limit: number }): Promise<FeedRow[]> {
  const { results } = await db.prepare(
    "SELECT * FROM event_feed WHERE tenant_id = ? AND seq > ? AND seq <= ? AND created_at >= ? AND created_at <= ? ORDER BY seq LIMIT ?",
  ).bind(tenant, q.afterSeq, q.untilSeq, q.fromMs, q.toMs, q.limit).all<FeedRow>();
  return results;
}
