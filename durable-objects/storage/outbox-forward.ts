/**
 * Forwarding the events that messages keep in rows they write anyway.
 *
 * DESCRIPTION
 *   Two events are kept in rows instead of event rows (an event row is an insert and, once
 *   forwarded to D1, a delete: two rows written):
 *   - email.queued, in the message row that markReady writes (`message.queued_event`); the
 *     message stays in the index of waiting messages until it is forwarded, so the sweeper finds
 *     it after INDEX_LAG_SECONDS (outbox-store.ts unindexed). An acknowledgement clears it, and
 *     the message leaves that index, with one write (clearForwardedQueued);
 *   - the event of a delivery report that finishes its message, in the recipient row it writes
 *     (`rcpt.pending_event`, outbox-store.ts applyOutcomes).
 *   Once the message is finished, neither is deleted by an acknowledgement; they go with their
 *   rows at the retention purge.
 *   ForwardMarks        what says a kept event reached D1: each message's acknowledged seq, in
 *                       memory (an acknowledgement writes nothing). Lost when the object stops,
 *                       after which those events are forwarded again; D1's writes are
 *                       idempotent (event_log_by_source; index upserts write only a change).
 *                       At most MAX_MARKS are held; dropping one only costs such a repeat.
 *   startForwardCursor  the cursor's first value (at migration): messages finished before it
 *                       keep no event in their rows.
 *   finishedLagging     walks the index of finished messages (message_finished) from the cursor
 *                       kept in meta. A message with no kept event, or whose kept events were
 *                       acknowledged, is passed. One whose kept events waited INDEX_LAG_SECONDS
 *                       is returned, for the sweeper to hand to the classify queue (whose
 *                       consumer writes them and acknowledges), and passed. The walk stops at
 *                       the first that has not waited so long, and says when it will have. The
 *                       cursor is written once per walk, only when it moved.
 *   forwardCursor       the cursor: every message finished up to it has its kept events in D1 or
 *                       in the classify queue, so the retention purge may take it.
 *
 * INVARIANTS
 *   No finished message is passed before its kept events were acknowledged or handed to the
 *   classify queue. The walk reads through an index from the cursor: its work follows the
 *   messages finished since the last walk, never the number the shard retains.
 */
import { clearForwardedQueued, deleteEvents } from "./outbox-store";
import type { EventAck } from "./outbox-types";

/** Where the walk of finished messages stands: the last message passed (finish time, id). */
export type ForwardCursor = { at: number; id: string };

const KEY = "forward_cursor";
/** Acknowledged seqs held in memory at most (the oldest are dropped). */
const MAX_MARKS = 50_000;
/** Finished messages read per page, and per walk at most (the rest is walked one second later). */
const PAGE = 1_000;
const MAX_WALK = 20_000;

/** Which kept events reached D1 (see the header). */
export class ForwardMarks {
  private readonly acked = new Map<string, number>();

  /** Events written to D1: event rows are deleted, kept events marked. */
  ack(sql: SqlStorage, acks: readonly EventAck[]): void {
    deleteEvents(sql, acks);
    clearForwardedQueued(sql, acks);
    for (const a of acks) {
      const seq = Math.max(this.acked.get(a.id) ?? 0, a.uptoSeq);
      this.acked.delete(a.id);
      this.acked.set(a.id, seq);
    }
    for (const id of this.acked.keys()) {
      if (this.acked.size <= MAX_MARKS) break;
      this.acked.delete(id);
    }
  }

  /** The message's largest acknowledged seq, or 0. */
  upto(id: string): number {
    return this.acked.get(id) ?? 0;
  }

  /** The walk passed the message: its mark is no longer needed. */
  forget(id: string): void {
    this.acked.delete(id);
  }
}

/** The walk's cursor (kept in meta). */
export function forwardCursor(sql: SqlStorage): ForwardCursor {
  const v = sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = ?", KEY).toArray()[0]?.value;
  return v === undefined ? { at: 0, id: "" } : (JSON.parse(v) as ForwardCursor);
}

function writeCursor(sql: SqlStorage, c: ForwardCursor): void {
  sql.exec("INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = ?2", KEY, JSON.stringify(c));
}

/** Sets the cursor at `nowMs` unless it is set (writes nothing then). */
export function startForwardCursor(sql: SqlStorage, nowMs: number): void {
  sql.exec("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", KEY, JSON.stringify({ at: nowMs, id: "" } satisfies ForwardCursor));
}

/**
 * One walk (see the header): the finished messages whose kept events waited `lagMs` without an
 * acknowledgement, and when the walk must run again (null: nothing is waiting).
 */
export function finishedLagging(sql: SqlStorage, marks: ForwardMarks, nowMs: number, lagMs: number): { ids: string[]; next: number | null } {
  const start = forwardCursor(sql);
  let cur = start;
  const ids: string[] = [];
  let next: number | null = null;
  let walked = 0;
  walk: while (walked < MAX_WALK) {
    const page = sql.exec<{ id: string; done_at: number; kept: number | null }>(
      `SELECT m.id, m.done_at, NULLIF(max(COALESCE(json_extract(m.queued_event, '$.seq'), 0),
         COALESCE((SELECT max(json_extract(r.pending_event, '$.seq')) FROM rcpt r WHERE r.message_id = m.id AND r.pending_event IS NOT NULL), 0)), 0) AS kept
       FROM message m WHERE m.state = 'done' AND (m.done_at, m.id) > (?1, ?2) ORDER BY m.done_at, m.id LIMIT ?3`,
      cur.at, cur.id, PAGE,
    ).toArray();
    for (const m of page) {
      if (m.kept !== null && marks.upto(m.id) < m.kept) {
        if (m.done_at > nowMs - lagMs) {
          next = m.done_at + lagMs;
          break walk;
        }
        ids.push(m.id);
      }
      marks.forget(m.id);
      cur = { at: m.done_at, id: m.id };
    }
    walked += page.length;
    if (page.length < PAGE) break;
  }
  if (next === null && walked >= MAX_WALK) next = nowMs;
  if (cur !== start) writeCursor(sql, cur);
  return { ids, next };
}
