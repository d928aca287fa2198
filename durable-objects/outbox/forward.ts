/**
 * Forwarding the events that messages keep in rows they write anyway.
 *
 * DESCRIPTION
 *   Two events are kept in rows instead of event rows (an event row is an insert and, once
 *   forwarded to D1, a delete: two rows written):
 *   - email.queued, in the message row that markReady writes (`message.queued_event`); the
 *     message stays in the index of waiting messages until it is forwarded, so the sweeper finds
 *     it after INDEX_LAG_SECONDS (outbox-store.ts unindexed). An acknowledgement clears it, and
 *     the message leaves that index, with one write (events.ts deleteEvents);
 *   - the event of a delivery report that finishes its message, in the recipient row it writes
 *     (`rcpt.pending_event`, outbox-store.ts applyOutcomes).
 *   Once the message is finished, its kept events are never acknowledged (eventAcksOf: there is
 *   nothing to delete, so no request is made for it); they go with their rows at the retention
 *   purge. What says they reached D1 is D1 itself:
 *   startForwardCursor  the cursor's first value (at migration): messages finished before it
 *                       keep no event in their rows.
 *   finishedLagging     walks the index of finished messages (message_finished) from a cursor
 *                       (the one given, else the one kept in meta). Of those with kept events,
 *                       it asks D1 (one read per page) which are not in the event log: those
 *                       that finished INDEX_LAG_SECONDS ago or more are returned, for the
 *                       sweeper to hand to the classify queue (whose consumer writes them); the
 *                       walk stops at the first that finished more recently, and says when it
 *                       will have waited so long. The others are passed. Returns where it
 *                       stopped and how many it passed; it writes nothing.
 *   ForwardWalk         the cursor of this object's life, kept in meta only once CURSOR_SAVE_EVERY
 *                       messages were passed since it was last kept (a message finished alone
 *                       moved it, a row each time): after a restart the walk goes over at most
 *                       that many again, which changes nothing.
 *   forwardCursor       the cursor kept in meta: every message finished up to it has its kept
 *                       events in D1 or in the classify queue, so the retention purge may take
 *                       it (ForwardWalk.cursor is that for this life, and is never behind it).
 *
 * ERRORS
 *   finishedLagging throws when D1 cannot be read; the cursor is not moved, and the next alarm
 *   walks again.
 *
 * INVARIANTS
 *   No finished message is passed before D1 held its kept events or they were handed to the
 *   classify queue. The walk reads through an index from the cursor: its work follows the
 *   messages finished since the last walk, never the number the shard retains.
 */

import { getMeta, setMeta } from "./meta";

/** Where the walk of finished messages stands: the last message passed (finish time, id). */
export type ForwardCursor = { at: number; id: string };

const KEY = "forward_cursor";
/** Messages the walk passes before its cursor is kept in meta again (ForwardWalk). */
export const CURSOR_SAVE_EVERY = 64;
/** Finished messages read per page (one D1 read each), and per walk at most (the rest is walked one second later). */
const PAGE = 500;
const MAX_WALK = 20_000;

/** The walk's cursor (kept in meta). */
export function forwardCursor(sql: SqlStorage): ForwardCursor {
  const v = getMeta(sql, KEY);
  return v === null ? { at: 0, id: "" } : (JSON.parse(v) as ForwardCursor);
}

/** Sets the cursor at `nowMs` unless it is set (writes nothing then). */
export function startForwardCursor(sql: SqlStorage, nowMs: number): void {
  sql.exec(
    "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)",
    KEY,
    JSON.stringify({ at: nowMs, id: "" } satisfies ForwardCursor),
  );
}

type Finished = { id: string; done_at: number; kept: string | null };

/** The kept events' seqs of finished messages after `c`, in the order of the index. */
function page(sql: SqlStorage, c: ForwardCursor): Finished[] {
  return sql
    .exec<Finished>(
      `SELECT m.id, m.done_at, (SELECT json_group_array(s) FROM (
         SELECT json_extract(m.queued_event, '$.seq') AS s WHERE m.queued_event IS NOT NULL
         UNION ALL SELECT json_extract(r.pending_event, '$.seq') FROM rcpt r WHERE r.message_id = m.id AND r.pending_event IS NOT NULL
         UNION ALL SELECT json_extract(j.value ->> 9, '$.seq') FROM json_each(m.rcpts) j WHERE j.value ->> 9 IS NOT NULL
         UNION ALL SELECT json_extract(m.r_pending_event, '$.seq') WHERE m.r_pending_event IS NOT NULL)) AS kept
     FROM message m WHERE m.state = 'done' AND (m.done_at, m.id) > (?1, ?2) ORDER BY m.done_at, m.id LIMIT ?3`,
      c.at,
      c.id,
      PAGE,
    )
    .toArray();
}

/** Those of `kept` (message → seqs) with a seq D1's event log does not hold. */
async function missingInD1(db: D1Database, kept: Map<string, number[]>): Promise<string[]> {
  if (kept.size === 0) return [];
  const { results } = await db
    .prepare("SELECT email_id, source_seq FROM event_of_email WHERE of_email IN (SELECT value FROM json_each(?1))")
    .bind(JSON.stringify([...kept.keys()]))
    .all<{ email_id: string; source_seq: number }>();
  const logged = new Set(results.map((r) => `${r.email_id}:${r.source_seq}`));
  return [...kept].filter(([id, seqs]) => seqs.some((s) => !logged.has(`${id}:${s}`))).map(([id]) => id);
}

/**
 * One walk (see the header): the finished messages whose kept events D1 does not hold
 * `lagMs` after they finished, and when the walk must run again (null: nothing is waiting).
 * A message finished `retentionMs` ago or more is passed unasked: D1's purge may have taken its
 * events already (the cron purges D1 before it wakes the sweepers), and they are not wanted back.
 */
export async function finishedLagging(
  sql: SqlStorage,
  db: D1Database,
  nowMs: number,
  lagMs: number,
  from: ForwardCursor = forwardCursor(sql),
  retentionMs = Infinity,
): Promise<{ ids: string[]; next: number | null; cursor: ForwardCursor; passed: number }> {
  const start = from;
  let passed = 0;
  let cur = start;
  const ids: string[] = [];
  let next: number | null = null;
  for (let walked = 0; next === null;) {
    const rows = page(sql, cur);
    const kept = new Map<string, number[]>();
    for (const m of rows) {
      const seqs = JSON.parse(m.kept ?? "[]") as number[];
      if (seqs.length > 0 && m.done_at > nowMs - retentionMs) kept.set(m.id, seqs);
    }
    const missing = new Set(await missingInD1(db, kept));
    for (const m of rows) {
      if (missing.has(m.id)) {
        if (m.done_at > nowMs - lagMs) {
          next = m.done_at + lagMs;
          break;
        }
        ids.push(m.id);
      }
      cur = { at: m.done_at, id: m.id };
      passed += 1;
    }
    walked += rows.length;
    if (rows.length < PAGE) break;
    if (walked >= MAX_WALK && next === null) next = nowMs;
  }
  return { ids, next, cursor: cur, passed };
}

/** The walk's cursor for one life of the Outbox, kept in meta every CURSOR_SAVE_EVERY messages passed (see the header). */
export class ForwardWalk {
  private current: ForwardCursor | null = null;
  private unsaved = 0;

  constructor(private readonly sql: SqlStorage) {}

  /** Where the walk stands: every message finished up to it is passed. */
  get cursor(): ForwardCursor {
    return (this.current ??= forwardCursor(this.sql));
  }

  /** One walk from the cursor (finishedLagging); moves it, and keeps it in meta when due. */
  async walk(
    db: D1Database,
    nowMs: number,
    lagMs: number,
    retentionMs = Infinity,
  ): Promise<{ ids: string[]; next: number | null }> {
    const r = await finishedLagging(this.sql, db, nowMs, lagMs, this.cursor, retentionMs);
    this.current = r.cursor;
    this.unsaved += r.passed;
    if (this.unsaved >= CURSOR_SAVE_EVERY) {
      setMeta(this.sql, KEY, JSON.stringify(r.cursor));
      this.unsaved = 0;
    }
    return { ids: r.ids, next: r.next };
  }
}
