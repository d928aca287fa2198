/**
 * The D1 message and recipient index: kept in step with the Outbox, read for GET /emails.
 *
 * DESCRIPTION
 *   indexStatements(db, view, lastEvent)   upserts of the message row and its recipient rows (in
 *                                          chunks); a row only moves forward (an older snapshot
 *                                          applied late never overwrites a newer one) and is only
 *                                          rewritten when a value changed; plus the message's tags
 *                                          (message_tags, for the admin search) when it has any.
 *   listMessages(db, tenant, query)        one page of the tenant's messages, newest first,
 *                                          with cursors `after` (older than) / `before` (newer than).
 *   emailsByHeader(db, messageId, tenant)  the emails whose Message-ID header it is, through
 *                                          messages_by_message_id (at most 2: more is ambiguous).
 *
 * ERRORS
 *   listMessages returns null when the cursor is not one of the tenant's email ids.
 */
import { isMessageId } from "../../durable-objects/storage/outbox-ids";
import type { MessageView } from "../../durable-objects/storage/outbox-types";
import { emailIdOf } from "../mail/arf";
import { chunkByJson } from "./events";

/** A row of the message index as GET /emails lists it. */
export interface IndexedMessage {
  id: string;
  from_addr: string;
  to_json: string;
  cc_json: string | null;
  bcc_json: string | null;
  reply_to_json: string | null;
  subject: string | null;
  created_at: number;
  scheduled_at: number | null;
  last_event: string;
}

/** A page request. */
export interface ListQuery {
  limit: number;
  after?: string | undefined;
  before?: string | undefined;
}

const json = (v: unknown) => (v === null ? null : JSON.stringify(v));

/** The version of a view: its latest change, so index writes only move forward. */
export function versionOf(v: MessageView): number {
  return Math.max(v.created_at, ...v.recipients.map((r) => r.updated_at));
}

/** UTF-8 bytes of recipient JSON per upsert statement (D1 refuses a string above 2,000,000 bytes). */
const RCPT_CHUNK_BYTES = 1_000_000;

/** The Message-ID to index: only one the sender set (the relay's own names the email already). */
function headerToIndex(v: MessageView): string | null {
  const mid = v.summary.message_id ?? null;
  return mid === null || emailIdOf(mid, isMessageId) === v.id ? null : mid;
}

/**
 * Upserts for one message and its recipients. An update writes only when something changed and
 * never touches the indexed identity columns (tenant, address, Message-ID, created_at), so it
 * rewrites no index entry but recipients_open (migration 0009) while the recipient is open.
 */
export function indexStatements(db: D1Database, v: MessageView, lastEvent: string): D1PreparedStatement[] {
  const version = versionOf(v);
  const s = v.summary;
  const message = db.prepare(
    `INSERT INTO messages (id, tenant_id, created_at, scheduled_at, from_addr, to_json, cc_json, bcc_json, reply_to_json, subject, last_event, updated_at, message_id)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (id) DO UPDATE SET scheduled_at = excluded.scheduled_at, last_event = excluded.last_event, updated_at = excluded.updated_at
     WHERE excluded.updated_at >= messages.updated_at
       AND (excluded.updated_at <> messages.updated_at OR excluded.last_event IS NOT messages.last_event OR excluded.scheduled_at IS NOT messages.scheduled_at)`,
  ).bind(v.id, v.tenant, v.created_at, v.scheduled_at, s.from, JSON.stringify(s.to), json(s.cc), json(s.bcc), json(s.reply_to), s.subject, lastEvent, version, headerToIndex(v));
  // One statement per chunk of recipients (json_each), so a classify batch stays within D1's
  // per-invocation query limit and a large message within its statement limits.
  const rows = v.recipients.map(({ idx, email, status, transport, nexthop, attempts, next_attempt_at, updated_at }) =>
    ({ idx, email, status, transport, nexthop, attempts, next_attempt_at, updated_at }));
  const rcpts = chunkByJson(rows, RCPT_CHUNK_BYTES).map((chunk) => db.prepare(
    `INSERT INTO recipients (message_id, idx, tenant_id, address, status, transport, nexthop, attempts, next_attempt_at, updated_at)
     SELECT ?1, json_extract(j.value, '$.idx'), ?2, json_extract(j.value, '$.email'), json_extract(j.value, '$.status'),
       json_extract(j.value, '$.transport'), json_extract(j.value, '$.nexthop'), json_extract(j.value, '$.attempts'),
       json_extract(j.value, '$.next_attempt_at'), json_extract(j.value, '$.updated_at')
     FROM json_each(?3) AS j WHERE true
     ON CONFLICT (message_id, idx) DO UPDATE SET status = excluded.status, transport = excluded.transport,
       nexthop = excluded.nexthop, attempts = excluded.attempts, next_attempt_at = excluded.next_attempt_at, updated_at = excluded.updated_at
     WHERE excluded.updated_at >= recipients.updated_at
       AND (excluded.status IS NOT recipients.status OR excluded.transport IS NOT recipients.transport OR excluded.nexthop IS NOT recipients.nexthop
         OR excluded.attempts IS NOT recipients.attempts OR excluded.next_attempt_at IS NOT recipients.next_attempt_at OR excluded.updated_at IS NOT recipients.updated_at)`,
  ).bind(v.id, v.tenant, JSON.stringify(chunk)));
  return [message, ...rcpts, ...tagStatements(db, v)];
}

/** The message's tags for search (migration 0005); none when it has no tags. */
function tagStatements(db: D1Database, v: MessageView): D1PreparedStatement[] {
  const tags = v.summary.tags ?? [];
  if (tags.length === 0) return [];
  return [db.prepare(
    `INSERT OR IGNORE INTO message_tags (message_id, tenant_id, name, value)
     SELECT ?1, ?2, json_extract(j.value, '$.name'), json_extract(j.value, '$.value') FROM json_each(?3) AS j`,
  ).bind(v.id, v.tenant, JSON.stringify(tags.map(({ name, value }) => ({ name, value }))))];
}

const COLUMNS = "id, from_addr, to_json, cc_json, bcc_json, reply_to_json, subject, created_at, scheduled_at, last_event";

/** One page of a tenant's messages, newest first; null when the cursor is unknown. */
export async function listMessages(db: D1Database, tenant: string, q: ListQuery): Promise<{ data: IndexedMessage[]; hasMore: boolean } | null> {
  const cursorId = q.after ?? q.before;
  let cursor: { created_at: number; id: string } | null = null;
  if (cursorId !== undefined) {
    cursor = await db.prepare("SELECT created_at, id FROM messages WHERE id = ? AND tenant_id = ?").bind(cursorId, tenant).first();
    if (!cursor) return null;
  }
  let stmt: D1PreparedStatement;
  if (cursor && q.before !== undefined) {
    stmt = db.prepare(`SELECT ${COLUMNS} FROM messages WHERE tenant_id = ? AND (created_at, id) > (?, ?) ORDER BY created_at ASC, id ASC LIMIT ?`)
      .bind(tenant, cursor.created_at, cursor.id, q.limit + 1);
  } else if (cursor) {
    stmt = db.prepare(`SELECT ${COLUMNS} FROM messages WHERE tenant_id = ? AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?`)
      .bind(tenant, cursor.created_at, cursor.id, q.limit + 1);
  } else {
    stmt = db.prepare(`SELECT ${COLUMNS} FROM messages WHERE tenant_id = ? ORDER BY created_at DESC, id DESC LIMIT ?`).bind(tenant, q.limit + 1);
  }
  const rows = (await stmt.all<IndexedMessage>()).results;
  const hasMore = rows.length > q.limit;
  const page = rows.slice(0, q.limit);
  return { data: q.before !== undefined ? page.reverse() : page, hasMore };
}

/** The email ids whose Message-ID header is `messageId` (the tenant's, unless null; at most 2: more is ambiguous). */
export async function emailsByHeader(db: D1Database, messageId: string, tenant: string | null): Promise<string[]> {
  const rows = (await db.prepare(`SELECT id FROM messages WHERE message_id = ?${tenant === null ? "" : " AND tenant_id = ?"} LIMIT 2`)
    .bind(...(tenant === null ? [messageId] : [messageId, tenant])).all<{ id: string }>()).results;
  return rows.map((r) => r.id);
}
