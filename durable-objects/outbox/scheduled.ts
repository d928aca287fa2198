/**
 * A scheduled message not yet due, in the Outbox: cancelled or moved by the API, and when the
 * next one falls due (the alarm wakes then to classify it).
 *
 * DESCRIPTION
 *   cancelMessage(sql, id, nowMs)            every incoming recipient ends `cancelled`, with email.canceled.
 *   rescheduleMessage(sql, id, atMs, nowMs)  moves it to `atMs`, with email.scheduled.
 *   nextScheduledAt(sql, nowMs)              the earliest future scheduled time among unclassified messages, or null.
 */
import { finishIfDone } from "./finish";
import { recordEvent } from "./events";
import { execRcpt } from "./rcpt";
import { readMessage, updateUnclassified } from "./store";

/** Cancels a scheduled message that is not yet due: every incoming recipient ends `cancelled`. */
export function cancelMessage(sql: SqlStorage, id: string, nowMs: number): boolean {
  const m = readMessage(sql, id);
  if (!m || m.state !== "open" || m.scheduled_at === null || m.scheduled_at <= nowMs) return false;
  execRcpt(
    sql,
    "UPDATE {T} SET {status} = 'cancelled', {blocked_by} = NULL, {updated_at} = ? WHERE {id} = ? AND {status} = 'incoming'",
    nowMs,
    id,
  );
  recordEvent(sql, {
    message_id: id,
    tenant: m.tenant,
    type: "email.canceled",
    recipient: null,
    created_at: nowMs,
    data: {},
  });
  updateUnclassified(sql, id);
  finishIfDone(sql, id, nowMs);
  return true;
}

/** Moves a scheduled message that is not yet due to `atMs`. */
export function rescheduleMessage(sql: SqlStorage, id: string, atMs: number, nowMs: number): boolean {
  const m = readMessage(sql, id);
  if (!m || m.state !== "open" || m.scheduled_at === null || m.scheduled_at <= nowMs) return false;
  sql.exec("UPDATE message SET scheduled_at = ?, classify_sent_at = NULL WHERE id = ?", atMs, id);
  recordEvent(sql, {
    message_id: id,
    tenant: m.tenant,
    type: "email.scheduled",
    recipient: null,
    created_at: nowMs,
    data: { scheduled_at: new Date(atMs).toISOString() },
  });
  return true;
}

/** The earliest future scheduled time among unclassified messages, or null. */
export function nextScheduledAt(sql: SqlStorage, nowMs: number): number | null {
  return sql
    .exec<{ at: number | null }>(
      "SELECT min(scheduled_at) AS at FROM message WHERE waiting = 1 AND unclassified = 1 AND state = 'open' AND scheduled_at > ?",
      nowMs,
    )
    .one().at;
}
