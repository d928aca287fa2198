/**
 * The records of attempts that ended `message-done`, kept until the first checkpoint a grace
 * period after they ended, with no row of their own.
 *
 * An attempt ends done once every recipient has a final outcome (or an operator took it out).
 * A final outcome reaches the message's Outbox before its report reaches this object
 * (worker/delivery/finish.ts), and an Outbox admits only recipients it still holds as
 * `incoming` (outbox/classify-state.ts claimClassifyWork); an operator's readmission uses a new
 * attempt id. So once an attempt is done, only an admit() already on its way can name it again,
 * and the admission record, which makes such an admit() change nothing, need not outlive the
 * grace. Attempts that end otherwise (expired: its Outbox hears of it later; replaced by a
 * retry; dropped while waiting) keep the `finished` row and its day (sqlite-source.ts).
 *
 * The records (the admission row or the record kept with the snapshot, admissions.ts, and rcpt
 * rows past INLINE_RCPTS) go at a checkpoint, whose
 * snapshot no longer holds the attempt, so a replay never reads them. Which attempts wait is
 * kept in memory: after a restart, load() finds them again as the admission records of attempts
 * that are nowhere else (recover), each due at once. No admit() can be under way to the new life:
 * an object is evicted only when no request is in it, and requests in a life that crashed failed
 * (their Outbox decides again, and admits no recipient that is final). A full grace from each
 * start was a grace that never ended for an object evicted more often than the grace lasts.
 *
 * DESCRIPTION
 *   note(coreId, now)          an attempt ended done at `now` (unix s).
 *   recover(sql, live, now)    at a start: admission records of attempts not in the core
 *                              (`live`), the incoming queue, a retry or the finished records;
 *                              due at once (see above).
 *   nextAt                     when the oldest one's grace is over (unix s), or null.
 *   forget(sql, now)           at a checkpoint: drops the records whose grace is over.
 */

import { admissionsOf } from "./admissions";

/** The grace of a done attempt's records, seconds (shorter when the retention is: sqlite-source.ts admissionTtlSec). */
export const DONE_GRACE_SEC = 60;

/** Attempts that ended done, waiting for their grace to pass. */
export class DoneRecords {
  /** Core message id → the time (unix s) it ended, in the order they ended. */
  private readonly waiting = new Map<string, number>();

  constructor(private readonly graceSec: number) {}

  /** An attempt ended done at `now`. */
  note(coreId: string, now: number): void {
    if (!this.waiting.has(coreId)) this.waiting.set(coreId, now);
  }

  /** At a start, after the journal's replay: records of attempts that are nowhere else ended done before it, due at once. */
  recover(sql: SqlStorage, live: (coreId: string) => boolean, now: number): void {
    const ended = now - this.graceSec;
    const rows = sql
      .exec<{ core_id: string }>(
        `SELECT core_id FROM admission WHERE core_id NOT IN (SELECT core_id FROM finished)
           AND core_id NOT IN (SELECT core_id FROM retry_due) AND core_id NOT IN (SELECT core_id FROM incoming)`,
      )
      .toArray();
    for (const r of rows) if (!live(r.core_id)) this.note(r.core_id, ended);
    const kept = admissionsOf(sql);
    for (const id of kept.ids()) if (!live(id) && kept.get(id)?.due === undefined) this.note(id, ended); // kept with the snapshot, no retry
  }

  /** When the oldest waiting record's grace is over (unix s), or null when none waits. */
  get nextAt(): number | null {
    for (const at of this.waiting.values()) return at + this.graceSec;
    return null;
  }

  /** How many records wait. */
  get size(): number {
    return this.waiting.size;
  }

  /** At a checkpoint: drops the admission and rcpt rows of the attempts whose grace is over; returns how many. */
  forget(sql: SqlStorage, now: number): number {
    const due: string[] = [];
    for (const [id, at] of this.waiting) {
      if (at + this.graceSec > now) break;
      due.push(id);
    }
    if (due.length === 0) return 0;
    for (let i = 0; i < due.length; i += 500) {
      const ids = JSON.stringify(due.slice(i, i + 500));
      sql.exec("DELETE FROM rcpt WHERE message_id IN (SELECT value FROM json_each(?))", ids);
      sql.exec("DELETE FROM admission WHERE core_id IN (SELECT value FROM json_each(?))", ids);
    }
    for (const id of due) {
      this.waiting.delete(id);
      admissionsOf(sql).forget(id);
    }
    return due.length;
  }
}
