/**
 * The Transport DO's bookkeeping of attempts around its core, in its SQLite: what an ended
 * attempt leaves behind, recipients final while an attempt goes on, and a deferred message's
 * next attempt.
 *
 * DESCRIPTION
 *   settleAttempts(sql, effects, now, done)  after a command: a done attempt's records go at a
 *                 checkpoint after its grace (done-records.ts), an expired one's after its day
 *                 (noteFinished), and the retry and final rows of either now; a deferred one's
 *                 retry is due its back-off after the attempt ended (in ms).
 *   noteFinalRecipients(sql, coreId, idxs, effects)   recipients final while their attempt goes
 *                 on (or is retried); an attempt that ended needs no record.
 *   retryAttempt(sql, coreId, admit, done)   admits `<id>#<attempt + 1>` with the recipients not
 *                 yet final (the replaced attempt goes as a done one, after its grace), or
 *                 forgets an attempt with none left (or whose message is gone).
 *
 * INVARIANTS
 *   An attempt's retry and final-recipient rows go when it leaves (finished, expired, or
 *   replaced by its next attempt); its backlog rows stay until the next checkpoint (noteFinished).
 */
import type { Effect, MessageFields, ResolvedRecipient } from "../core";
import { coreIdOf, parseCoreId } from "../../worker/model/delivery";
import { forgetAttempt, markFinal, nowSec, pendingRecipients } from "./delivery-state";
import { retryDueMs, scheduleRetry } from "./retries";
import { noteFinished, readMeta } from "./sqlite-source";
import type { DoneRecords } from "./done-records";

/** Admits an attempt of a message (TransportQueue's admitCore). */
type Admit = (
  id: string,
  createTime: number,
  tenant: string | null,
  priority: number,
  rcpts: ResolvedRecipient[],
  fields: MessageFields | null,
) => unknown;

/** After a command: an ended attempt's records are noted for a checkpoint, a deferred one's retry is scheduled. */
export function settleAttempts(sql: SqlStorage, effects: readonly Effect[], now: number, done: DoneRecords): void {
  for (const e of effects) {
    if (e.kind === "message-done" || e.kind === "message-expired") {
      if (e.kind === "message-done") done.note(e.messageId, now);
      else noteFinished(sql, e.messageId, now);
      forgetAttempt(sql, e.messageId);
    } else if (e.kind === "message-deferred") {
      scheduleRetry(sql, e.messageId, retryDueMs(e.nextAttemptAt, now, Date.now())); // kept with its record, or rows
    }
  }
}

/** Records recipients final while attempt `coreId` goes on (or is retried); an attempt that ended needs no record. */
export function noteFinalRecipients(
  sql: SqlStorage,
  coreId: string | null,
  finalIdx: number[],
  effects: readonly Effect[],
): void {
  const ended = effects.some(
    (x) => (x.kind === "message-done" || x.kind === "message-expired") && x.messageId === coreId,
  );
  if (coreId !== null && finalIdx.length > 0 && !ended) markFinal(sql, coreId, finalIdx);
}

/**
 * Admits a new attempt of a deferred message with its not-yet-final recipients. The attempt it
 * replaces goes as a done one does (done-records.ts), after the grace: only an admit() already
 * on its way could name it (its Outbox holds its recipients deferred, not incoming), and the new
 * attempt's record carries what later ones read (readMeta).
 */
export function retryAttempt(sql: SqlStorage, coreId: string, admit: Admit, done: DoneRecords): void {
  const { messageId, attempt } = parseCoreId(coreId);
  const meta = readMeta(sql, messageId);
  const rcpts = pendingRecipients(sql, coreId).map(({ idx: _idx, ...r }) => r);
  if (!meta || rcpts.length === 0) {
    forgetAttempt(sql, coreId);
    noteFinished(sql, coreId, nowSec());
    return;
  }
  admit(coreIdOf(messageId, attempt + 1), meta.createTime, meta.tenant, meta.priority, rcpts, meta.fields ?? null);
  forgetAttempt(sql, coreId);
  done.note(coreId, nowSec()); // its record and backlog rows go at a checkpoint after the grace
}
