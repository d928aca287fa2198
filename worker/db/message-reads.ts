/**
 * The D1 message index's reads: GET /emails' pages and the look-up of an email by its
 * Message-ID header (messages.ts keeps the index in step with the Outbox).
 *
 * DESCRIPTION
 *   listMessages(db, tenant, query)        one page of the tenant's messages, newest first,
 *                                          with cursors `after` (older than) / `before` (newer than).
 *   emailsByHeader(db, messageId, tenant)  the emails whose Message-ID header it is, through
 *                                          messages_by_message_id (at most 2: more is ambiguous).
 *
 * ERRORS
 *   listMessages returns null when the cursor is not one of the tenant's email ids.
 */

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

const COLUMNS =
  "id, from_addr, to_json, cc_json, bcc_json, reply_to_json, subject, created_at, scheduled_at, last_event";

/** One page of a tenant's messages, newest first; null when the cursor is unknown. */
export async function listMessages(
  db: D1Database,
  tenant: string,
  q: ListQuery,
): Promise<{ data: IndexedMessage[]; hasMore: boolean } | null> {
  const cursorId = q.after ?? q.before;
  let cursor: { created_at: number; id: string } | null = null;
  if (cursorId !== undefined) {
    cursor = await db
      .prepare("SELECT created_at, id FROM messages WHERE id = ? AND tenant_id = ?")
      .bind(cursorId, tenant)
      .first();
    if (!cursor) return null;
  }
  let stmt: D1PreparedStatement;
  if (cursor && q.before !== undefined) {
    stmt = db
      .prepare(
        `SELECT ${COLUMNS} FROM messages WHERE tenant_id = ? AND (created_at, id) > (?, ?) ORDER BY created_at ASC, id ASC LIMIT ?`,
      )
      .bind(tenant, cursor.created_at, cursor.id, q.limit + 1);
  } else if (cursor) {
    stmt = db
      .prepare(
        `SELECT ${COLUMNS} FROM messages WHERE tenant_id = ? AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?`,
      )
      .bind(tenant, cursor.created_at, cursor.id, q.limit + 1);
  } else {
    stmt = db
      .prepare(`SELECT ${COLUMNS} FROM messages WHERE tenant_id = ? ORDER BY created_at DESC, id DESC LIMIT ?`)
      .bind(tenant, q.limit + 1);
  }
  const rows = (await stmt.all<IndexedMessage>()).results;
  const hasMore = rows.length > q.limit;
  const page = rows.slice(0, q.limit);
  return { data: q.before !== undefined ? page.reverse() : page, hasMore };
}

/** The email ids whose Message-ID header is `messageId` (the tenant's, unless null; at most 2: more is ambiguous). */
export async function emailsByHeader(db: D1Database, messageId: string, tenant: string | null): Promise<string[]> {
  const rows = (
    await db
      .prepare(`SELECT id FROM messages WHERE message_id = ?${tenant === null ? "" : " AND tenant_id = ?"} LIMIT 2`)
      .bind(...(tenant === null ? [messageId] : [messageId, tenant]))
      .all<{ id: string }>()
  ).results;
  return rows.map((r) => r.id);
}
