/**
 * Messages the accept stored out of the index of waiting messages and then did not admit.
 *
 * The accept stores a message it admits before it answers (Outbox.accept, store.ts `admitting`)
 * without an entry in `message_waiting`: the Transport DO holds the admission, and its outcome
 * marks the message. A failed admission puts the message in that index (keepWaiting). Only a stop
 * of the Outbox between the accept's write and the admission's end (the client got no answer)
 * leaves a message open, unclassified and in no index; this scan finds such messages and puts them
 * in the index, so the sweeper classifies them as it did every unclassified message before:
 * admission is idempotent, so one the Transport DO did take is not sent twice.
 *
 * A retry of such an accept under its Idempotency-Key is answered with the stored response, the
 * ids of those messages: before that answer, replayedUnadmitted names the ones still to admit, and
 * the Outbox admits them (the client is told they are accepted, so they must not wait for a scan).
 *
 * DESCRIPTION
 *   replayedUnadmitted(sql, body, skip)  the ids of a stored response's JSON (`{id}`, or `{data: [{id}]}`)
 *       that unadmittedAmong keeps.
 *   unadmittedAmong(sql, ids, skip)  those naming a message of this shard open, unclassified, not
 *       waiting and not scheduled, but for those `skip` holds (admitted and awaiting their
 *       outcome, or in an admission run).
 *   UnadmittedScan.sweep(sql, nowMs, ageMs)  reads the next PAGE message rows in key order (from a
 *       cursor kept in memory, wrapping at the end) and puts those older than `ageMs`, open,
 *       unclassified and not waiting in the index of waiting messages; returns their ids. The
 *       Outbox runs it at the cron's wake (every 10 minutes), with the listing of orphan bodies.
 *
 * INVARIANTS
 *   One sweep reads at most 2 × PAGE rows, through the primary key, whatever the shard holds; a
 *   shard of N messages is covered every N / PAGE wakes. A message admitted and still without an
 *   outcome after `ageMs` (a destination suspended for hours) is classified again: its admission
 *   finds it in the Transport DO and only marks it ready.
 */
import { keepWaiting } from "./classify-state";

/** Message rows one sweep reads (the range's bound, then the rows in it). */
export const PAGE = 1000;

/** How old an unadmitted message must be before a sweep takes it (an accept's admission takes milliseconds). */
export const UNADMITTED_AGE_MS = 3_600_000;

export class UnadmittedScan {
  private cursor = "";

  /** One page of the scan (see the header). */
  sweep(sql: SqlStorage, nowMs: number, ageMs = UNADMITTED_AGE_MS): string[] {
    const upper =
      sql
        .exec<{ id: string }>("SELECT id FROM message WHERE id > ? ORDER BY id LIMIT 1 OFFSET ?", this.cursor, PAGE - 1)
        .toArray()[0]?.id ?? null;
    // The bound as its own term (not `?2 IS NULL OR …`), so the read stops at it.
    const ids = sql
      .exec<{ id: string }>(
        `SELECT id FROM message WHERE id > ?1 ${upper === null ? "" : "AND id <= ?3"}
         AND unclassified = 1 AND waiting = 0 AND state = 'open' AND created_at < ?2`,
        this.cursor,
        nowMs - ageMs,
        ...(upper === null ? [] : [upper]),
      )
      .toArray()
      .map((r) => r.id);
    keepWaiting(sql, ids);
    this.cursor = upper ?? "";
    return ids;
  }
}

/** The messages of a replayed response still to admit (see the header). */
export function replayedUnadmitted(sql: SqlStorage, body: unknown, skip: (id: string) => boolean): string[] {
  type Answer = { id?: unknown; data?: { id?: unknown }[] } | null;
  let b: Answer;
  try {
    b = (typeof body === "string" ? JSON.parse(body) : body) as Answer; // the stored JSON text
  } catch {
    return [];
  }
  const ids = [b?.id, ...(Array.isArray(b?.data) ? b.data.map((d) => d?.id) : [])];
  return unadmittedAmong(
    sql,
    ids.filter((id): id is string => typeof id === "string"),
    skip,
  );
}

/** Those of `ids` (but for those `skip` holds) stored open, unclassified, not waiting and not scheduled. */
export function unadmittedAmong(sql: SqlStorage, ids: readonly string[], skip: (id: string) => boolean): string[] {
  return ids.filter(
    (id) =>
      !skip(id) &&
      sql
        .exec(
          "SELECT 1 FROM message WHERE id = ? AND unclassified = 1 AND waiting = 0 AND state = 'open' AND scheduled_at IS NULL",
          id,
        )
        .toArray().length > 0,
  );
}
