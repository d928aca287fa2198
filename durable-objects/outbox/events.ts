/**
 * The Outbox's event rows in its SQLite: the transitions each message owes the D1 index, until
 * they are forwarded.
 *
 * DESCRIPTION
 *   recordEvent / insertEvent   append a transition (insertEvent when the caller knows the
 *                               message's last seq, as readHead gives it).
 *   LAST_SEQ                    the SQL expression for a message's largest event seq.
 *   readEvents                  the events not yet forwarded: event rows and the events kept in
 *                               rows written anyway (KeptEvent), oldest first.
 *   deleteEvents                forgets forwarded events, and clears a kept email.queued.
 *
 * INVARIANTS
 *   A message's event seq never repeats, also after forwarded events were deleted: the event
 *   time in µs, or one more than the message's last, whichever is larger.
 */
import { type EventAck, type OutboxEvent } from "../../worker/model/message";

/**
 * Appends a transition to the event table. Its `seq` orders the message's events and names
 * each in D1 (`<id>:<seq>`), so it never repeats for a message, also after forwarded events were
 * deleted: the event time in µs, or one more than the message's last, whichever is larger.
 */
export function recordEvent(sql: SqlStorage, e: Omit<OutboxEvent, "seq" | "data"> & { data: object }): void {
  insertEvent(sql, e, lastSeq(sql, e.message_id));
}

/** The largest event seq of message ?1 (event rows and those kept in its rows), or 0: an SQL expression. */
export const LAST_SEQ = `max(COALESCE((SELECT max(seq) FROM event WHERE message_id = ?1), 0),
    COALESCE((SELECT max(json_extract(pending_event, '$.seq')) FROM rcpt_all WHERE message_id = ?1 AND pending_event IS NOT NULL), 0),
    COALESCE((SELECT json_extract(queued_event, '$.seq') FROM message WHERE id = ?1), 0))`;

/** The message's largest event seq (event rows and those kept in recipient rows), or 0. */
function lastSeq(sql: SqlStorage, id: string): number {
  return sql.exec<{ seq: number }>(`SELECT ${LAST_SEQ} AS seq`, id).one().seq;
}

/** recordEvent after `last` (the message's largest seq so far, known to the caller); returns the seq used. */
export function insertEvent(
  sql: SqlStorage,
  e: Omit<OutboxEvent, "seq" | "data"> & { data: object },
  last: number,
): number {
  const seq = Math.max(last + 1, e.created_at * 1000);
  sql.exec(
    "INSERT INTO event (message_id, seq, tenant, type, recipient, created_at, data) VALUES (?, ?, ?, ?, ?, ?, ?)",
    e.message_id,
    seq,
    e.tenant,
    e.type,
    e.recipient,
    e.created_at,
    JSON.stringify(e.data),
  );
  return seq;
}

/**
 * The message's events not yet forwarded to D1, oldest first: its event rows, and the events
 * kept in its rows (`kept`: email.queued in the message row, a finishing outcome's in its
 * recipient row; outbox-forward.ts). A finished message's kept events are always among them.
 */
export function readEvents(sql: SqlStorage, id: string): OutboxEvent[] {
  // One statement: event rows (kept = 0), then the events kept in rows (kept = 1, `data` the KeptEvent).
  const rows = sql
    .exec<{
      kept: number;
      seq: number | null;
      tenant: string;
      type: string | null;
      recipient: string | null;
      created_at: number | null;
      data: string;
    }>(
      `SELECT 0 AS kept, seq, tenant, type, recipient, created_at, data FROM event WHERE message_id = ?1
     UNION ALL SELECT 1, NULL, m.tenant, NULL, r.address, NULL, r.pending_event FROM rcpt_all r JOIN message m ON m.id = r.message_id ` +
        `WHERE r.message_id = ?1 AND r.pending_event IS NOT NULL
     UNION ALL SELECT 1, NULL, tenant, NULL, NULL, NULL, queued_event FROM message WHERE id = ?1 AND queued_event IS NOT NULL`,
      id,
    )
    .toArray();
  return rows
    .map((r): OutboxEvent => {
      if (r.kept === 0)
        return {
          seq: r.seq!,
          message_id: id,
          tenant: r.tenant,
          type: r.type!,
          recipient: r.recipient,
          created_at: r.created_at!,
          data: r.data,
        };
      const e = JSON.parse(r.data) as KeptEvent;
      return {
        seq: e.seq,
        message_id: id,
        tenant: r.tenant,
        type: e.type,
        recipient: r.recipient ?? e.recipient ?? null,
        created_at: e.created_at,
        data: JSON.stringify(e.data),
        kept: true,
      };
    })
    .sort((a, b) => a.seq - b.seq);
}

/** An event kept in a row written anyway: a finishing outcome's in its rcpt row, email.queued in its message row. */
export type KeptEvent = { seq: number; type: string; created_at: number; data: object; recipient?: string | null };

/**
 * Forwarded events: an open message's email.queued kept in its row is cleared, and the message
 * leaves the index of waiting messages (one row). A finished message's kept events stay.
 */
function clearForwardedQueued(sql: SqlStorage, acks: readonly EventAck[]): void {
  for (const a of acks) {
    sql.exec(
      `UPDATE message SET queued_event = NULL, waiting = unclassified WHERE id = ? AND state = 'open' AND queued_event IS NOT NULL
         AND json_extract(queued_event, '$.seq') <= ?`,
      a.id,
      a.uptoSeq,
    );
  }
}

/** Forgets forwarded events, each message's up to and including its `uptoSeq` (see clearForwardedQueued). */
export function deleteEvents(sql: SqlStorage, acks: readonly EventAck[]): void {
  for (const a of acks) sql.exec("DELETE FROM event WHERE message_id = ? AND seq <= ?", a.id, a.uptoSeq);
  clearForwardedQueued(sql, acks);
}
