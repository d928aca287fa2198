/**
 * Where the Outbox keeps a message's recipients: in its own row, a message of one recipient in
 * columns of its own, a message of more in a JSON list; `rcpt` rows for a message stored before,
 * or after an operator's or the classify stage's change.
 *
 * DESCRIPTION
 *   A message stored with one recipient holds it in the `message.r_*` columns (`r_status` not
 *   null says so; its idx is 0) and has no `rcpt` row. The recipient's insert, the update that
 *   finishes it and its delete at the purge are then parts of writes of the message row that
 *   happen anyway: 3 rows written fewer per message. A message stored with more holds them in
 *   `message.rcpts` (schema 9): a JSON array, one element per recipient by idx, each an array of
 *   FIELDS' values. Its insert and its purge are the message row's, and every delivery outcome
 *   of one report is one write of the row (outcomes.ts), which the finishing one shares with
 *   the finish: a ten-recipient email delivered at once wrote 30 `rcpt` rows, now none.
 *   INLINE_COLUMNS        the message table's columns for its one recipient (schema.ts).
 *   RCPT_VIEW             `rcpt_all`: every recipient in the form of an `rcpt` row, read with a
 *                         message id bound (SQLite pushes `message_id = ?` into its three parts:
 *                         primary-key look-ups). A correlated look-up is not pushed down (it
 *                         would scan): those name the homes themselves (forward.ts).
 *   packRcpts, RcptList   the JSON list of a new message's recipients; a list read, changed by
 *                         outcomes (apply) and written back whole (text).
 *   writeLateReport       a late report's write to one recipient, in any home (a list: one row write).
 *   execRcpt(sql, t, …)   runs a write of recipients on both homes, from one template: `{T}` the
 *                         table, `{id}` the message id column, `{idx}` the recipient index and
 *                         `{col}` any other column; the message's form adds `r_status IS NOT
 *                         NULL` to the template's WHERE clause (which it must end with). One of
 *                         the two matches nothing and writes nothing. A message whose recipients
 *                         are a JSON list has them moved to `rcpt` rows first (explodeRcpts):
 *                         these writes (an operator's cancel, hold, requeue or late bounce, a
 *                         decision of the classify stage, a delayed notice) are rare, and a
 *                         template stays one SQL statement. Returns rows written.
 *   INLINE_SET, rcptBinds, writeInline   a delivery outcome of a message's own recipient: on
 *                         its own, or (INLINE_SET) in the write that finishes the message.
 *
 * INVARIANTS
 *   A message's recipients are in exactly one home: `r_status` is set only by the insert of a
 *   one-recipient message, `rcpts` only by the insert of a message of more (and emptied when
 *   they move to rows), and `rcpt` rows are inserted only for a message of more, when `rcpts` is
 *   NULL or in the same write that empties it.
 */

import type { RcptStatus } from "../../worker/model/message";

/** The message row's columns for its single recipient (same meanings as rcpt's, r_ prefixed). */
export const INLINE_COLUMNS = `r_address TEXT, r_status TEXT, r_transport TEXT, r_nexthop TEXT,
    r_attempts INTEGER NOT NULL DEFAULT 0, r_next_attempt_at INTEGER, r_last_response TEXT, r_blocked_by TEXT,
    r_updated_at INTEGER, r_pending_event TEXT`;

const FIELDS = [
  "address",
  "status",
  "transport",
  "nexthop",
  "attempts",
  "next_attempt_at",
  "last_response",
  "blocked_by",
  "updated_at",
  "pending_event",
] as const;

/** Every recipient, each as an rcpt row (see the header). */
export const RCPT_VIEW =
  `CREATE VIEW IF NOT EXISTS rcpt_all AS SELECT message_id, idx, ${FIELDS.join(", ")} FROM rcpt ` +
  `UNION ALL SELECT id, 0, ${FIELDS.map((f) => `r_${f}`).join(", ")} FROM message WHERE r_status IS NOT NULL ` +
  `UNION ALL SELECT m.id, CAST(j.key AS INTEGER), ${FIELDS.map((f, i) => `j.value ->> ${i} AS ${f}`).join(", ")} ` +
  `FROM message m, json_each(m.rcpts) j WHERE m.rcpts IS NOT NULL`;

/** One recipient in a message's JSON list: FIELDS' values in order. */
type ListedRcpt = [
  address: string,
  status: RcptStatus,
  transport: string | null,
  nexthop: string | null,
  attempts: number,
  next_attempt_at: number | null,
  last_response: string | null,
  blocked_by: string | null,
  updated_at: number,
  pending_event: string | null,
];

/** The JSON list of a new message's recipients (see the header). */
export function packRcpts(rcpts: readonly StoredRcpt[], nowMs: number): string {
  return JSON.stringify(
    rcpts.map((r): ListedRcpt => [
      r.address,
      r.status,
      r.transport,
      r.nexthop,
      0,
      null,
      null,
      r.blocked_by,
      nowMs,
      null,
    ]),
  );
}

/** A message's JSON list of recipients, changed in memory and written back whole. */
export class RcptList {
  private readonly list: ListedRcpt[];
  constructor(text: string) {
    this.list = JSON.parse(text) as ListedRcpt[];
  }
  /** A delivery outcome's write to recipient `idx`, as the rcpt row's UPDATE in outcomes.ts does it. */
  apply(idx: number, w: RcptWrite, nowMs: number): void {
    const r = this.list[idx];
    if (r === undefined) return;
    r[1] = w.status;
    r[4] = w.attempts;
    r[5] = w.next;
    r[6] = w.response ?? r[6];
    r[7] = w.blockedBy;
    r[8] = nowMs;
    r[9] = w.pending ?? r[9];
  }
  /** Sets recipient `idx`'s status (when given), last response and change time. */
  set(idx: number, f: { status?: RcptStatus; last_response: string; updated_at: number }): void {
    const r = this.list[idx];
    if (r === undefined) return;
    if (f.status !== undefined) r[1] = f.status;
    r[6] = f.last_response;
    r[8] = f.updated_at;
  }
  get text(): string {
    return JSON.stringify(this.list);
  }
}

/**
 * A late report on one recipient (a bounce or delay notice after delivery: control.ts,
 * after-delivery.ts): its status (when given), last response and change time. A message's list of
 * recipients takes it in one write of its row, where execRcpt would move the list to rows first;
 * rows and a message's own recipient take it through execRcpt.
 */
export function writeLateReport(
  sql: SqlStorage,
  id: string,
  idx: number,
  f: { status?: RcptStatus; last_response: string; updated_at: number },
): void {
  const text = sql.exec<{ rcpts: string | null }>("SELECT rcpts FROM message WHERE id = ?", id).toArray()[0]?.rcpts;
  if (text !== undefined && text !== null) {
    const list = new RcptList(text);
    list.set(idx, f);
    sql.exec("UPDATE message SET rcpts = ? WHERE id = ?", list.text, id);
    return;
  }
  const status = f.status === undefined ? [] : [f.status];
  execRcpt(
    sql,
    `UPDATE {T} SET ${f.status === undefined ? "" : "{status} = ?, "}{last_response} = ?, {updated_at} = ? WHERE {id} = ? AND {idx} = ?`,
    ...status,
    f.last_response,
    f.updated_at,
    id,
    idx,
  );
}

/**
 * Moves a message's JSON list of recipients to rcpt rows (see the header); nothing for a message
 * without one. Returns the rows written.
 */
export function explodeRcpts(sql: SqlStorage, id: string): number {
  const moved = sql.exec(
    `INSERT INTO rcpt (message_id, idx, ${FIELDS.join(", ")}) ` +
      `SELECT m.id, CAST(j.key AS INTEGER), ${FIELDS.map((_, i) => `j.value ->> ${i}`).join(", ")} ` +
      "FROM message m, json_each(m.rcpts) j WHERE m.id = ? AND m.rcpts IS NOT NULL",
    id,
  ).rowsWritten;
  return moved === 0 ? 0 : moved + sql.exec("UPDATE message SET rcpts = NULL WHERE id = ?", id).rowsWritten;
}

const forms = new Map<string, readonly [string, string]>();

/** The template's two statements: on rcpt rows, and on a message's own recipient. */
function formsOf(t: string): readonly [string, string] {
  let f = forms.get(t);
  if (f === undefined) {
    const rows = t
      .replace(/\{T\}/g, "rcpt")
      .replace(/\{id\}/g, "message_id")
      .replace(/\{(\w+)\}/g, "$1");
    const inline =
      t
        .replace(/\{T\}/g, "message")
        .replace(/\{id\}/g, "id")
        .replace(/\{idx\}/g, "0")
        .replace(/\{(\w+)\}/g, "r_$1") + " AND r_status IS NOT NULL";
    f = [rows, inline];
    forms.set(t, f);
  }
  return f;
}

/** Runs a write of recipients on both homes (see the header); returns the rows written. */
export function execRcpt(sql: SqlStorage, template: string, ...binds: unknown[]): number {
  const [rows, inline] = formsOf(template);
  explodeRcpts(sql, binds[idBind(template)] as string);
  return sql.exec(rows, ...binds).rowsWritten + sql.exec(inline, ...binds).rowsWritten;
}

const idBinds = new Map<string, number>();

/** Which of a template's binds is its message id: the `?` of its `{id} = ?`. */
function idBind(t: string): number {
  let at = idBinds.get(t);
  if (at === undefined) {
    const i = t.indexOf("{id} = ?");
    if (i < 0) throw new Error(`a recipients template names its message by {id} = ?: ${t}`);
    at = (t.slice(0, i).match(/\?/g) ?? []).length;
    idBinds.set(t, at);
  }
  return at;
}

/** A recipient as stored at accept. */
export interface StoredRcpt {
  address: string;
  status: "incoming" | "suppressed";
  transport: string | null;
  nexthop: string | null;
  blocked_by: string | null;
}

/** What a delivery outcome writes to its recipient (outcomes.ts). */
export type RcptWrite = {
  status: RcptStatus;
  attempts: number;
  next: number | null;
  response: string | null;
  blockedBy: string | null;
  pending: string | null;
};

/** The SET list of a message's own recipient's outcome (bound by rcptBinds). */
export const INLINE_SET = `r_status = ?, r_attempts = ?, r_next_attempt_at = ?, r_last_response = COALESCE(?, r_last_response),
  r_blocked_by = ?, r_pending_event = COALESCE(?, r_pending_event), r_updated_at = ?`;

/** The values INLINE_SET binds, in order. */
export function rcptBinds(w: RcptWrite, nowMs: number): unknown[] {
  return [w.status, w.attempts, w.next, w.response, w.blockedBy, w.pending, nowMs];
}

/**
 * An outcome of a message's own recipient that does not finish it: the message row, once. With
 * `queued` (the message was not marked ready: its email.queued), the same write marks it ready
 * and keeps the event, and puts the message in the index of waiting messages until the event is
 * forwarded (a message left unmarked was admitted by its accept, which kept it out of that index).
 */
export function writeInline(
  sql: SqlStorage,
  id: string,
  w: RcptWrite,
  nowMs: number,
  queued: string | null = null,
): void {
  const mark = queued === null ? "" : ", unclassified = 0, queued_event = ?, waiting = 1";
  sql.exec(
    `UPDATE message SET ${INLINE_SET}${mark} WHERE id = ?`,
    ...rcptBinds(w, nowMs),
    ...(queued === null ? [] : [queued]),
    id,
  );
}
