/**
 * A message's end in the Outbox's SQLite: marked done once every recipient is final, its body
 * going in the same write, and the operator's cancel.
 *
 * DESCRIPTION
 *   finishIfDone         marks a message done once every recipient is final.
 *   finishMessage        marks an open message done (outcomes.ts's applyOutcomes, with the
 *                        outcome of a message's own recipient in the same write).
 *   cancelWithEvents     the operator's cancel, with the events it owes.
 *
 * INVARIANTS
 *   A message is `done` exactly when all its recipients are final.
 */
import { cancelRecipients } from "./control";
import { recordEvent } from "./events";
import { FINAL_SQL } from "./store";
import { INLINE_SET, rcptBinds, type RcptWrite } from "./rcpt";

/**
 * Marks the message done when every recipient is final; true if it just finished. Its body is
 * then due for deletion (see outbox-sweep.ts deleteDoneBodies), so body_deleted is set in the
 * same write, and a body kept in the row goes in that write too, unless `keepBody` (a delivery
 * status notice may still quote its headers; deleteDoneBodies clears it then).
 */
export function finishIfDone(sql: SqlStorage, id: string, nowMs: number, keepBody = false): boolean {
  const open = sql
    .exec<{ n: number }>(`SELECT count(*) AS n FROM rcpt_all WHERE message_id = ? AND status NOT IN (${FINAL_SQL})`, id)
    .one().n;
  return open === 0 && finishMessage(sql, id, nowMs, keepBody);
}

const FINISH_SET =
  "state = 'done', done_at = ?, unclassified = 0, waiting = 0, body_deleted = 1, body = IIF(?, body, NULL)";

/**
 * Marks an open message done (every recipient final); its body goes unless `keepBody`. The
 * outcome of a message's own recipient (`inline`, rcpt.ts) goes in the same write, with its
 * email.queued when it was not marked ready (`queued`); so does a message's list of recipients
 * as its outcomes left it (`listed`, rcpt.ts).
 */
export function finishMessage(
  sql: SqlStorage,
  id: string,
  nowMs: number,
  keepBody: boolean,
  inline: RcptWrite | null = null,
  queued: string | null = null,
  listed: string | null = null,
): boolean {
  const set = [FINISH_SET];
  const binds: unknown[] = [nowMs, keepBody ? 1 : 0];
  if (inline !== null) {
    set.push(INLINE_SET, "queued_event = COALESCE(?, queued_event)");
    binds.push(...rcptBinds(inline, nowMs), queued);
  }
  if (listed !== null) {
    set.push("rcpts = ?");
    binds.push(listed);
  }
  const cursor = sql.exec(`UPDATE message SET ${set.join(", ")} WHERE id = ? AND state = 'open'`, ...binds, id);
  return cursor.rowsWritten > 0;
}

/** cancelRecipients with one email.canceled event each, finishing the message if none is left open; returns how many. */
export function cancelWithEvents(
  sql: SqlStorage,
  id: string,
  tenant: string,
  domain: string | null,
  nowMs: number,
): number {
  const addresses = cancelRecipients(sql, id, domain, nowMs);
  for (const a of addresses)
    recordEvent(sql, {
      message_id: id,
      tenant,
      type: "email.canceled",
      recipient: a,
      created_at: nowMs,
      data: { reason: "cancelled by an operator" },
    });
  finishIfDone(sql, id, nowMs);
  return addresses.length;
}
