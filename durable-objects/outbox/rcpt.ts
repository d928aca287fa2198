/**
 * Where the Outbox keeps a message's recipients: a message of one recipient keeps it in its own
 * row, a message of more in `rcpt` rows.
 *
 * DESCRIPTION
 *   A message stored with one recipient holds it in the `message.r_*` columns (`r_status` not
 *   null says so; its idx is 0) and has no `rcpt` row. The recipient's insert, the update that
 *   finishes it and its delete at the purge are then parts of writes of the message row that
 *   happen anyway: 3 rows written fewer per message. A message of more recipients keeps one
 *   `rcpt` row each, as before; neither form ever turns into the other.
 *   INLINE_COLUMNS        the message table's columns for its one recipient (schema.ts).
 *   RCPT_VIEW             `rcpt_all`: every recipient in the form of an `rcpt` row, read with a
 *                         message id bound (SQLite pushes `message_id = ?` into both halves:
 *                         two primary-key look-ups). A correlated look-up is not pushed down
 *                         (it would scan): those name both homes themselves (forward.ts).
 *   execRcpt(sql, t, …)   runs a write of recipients on both homes, from one template: `{T}` the
 *                         table, `{id}` the message id column, `{idx}` the recipient index and
 *                         `{col}` any other column; the message's form adds `r_status IS NOT
 *                         NULL` to the template's WHERE clause (which it must end with). One of
 *                         the two matches nothing and writes nothing. Returns rows written.
 *   INLINE_SET, rcptBinds, writeInline   a delivery outcome of a message's own recipient: on
 *                         its own, or (INLINE_SET) in the write that finishes the message.
 *
 * INVARIANTS
 *   A message has an inline recipient or rcpt rows, never both: `r_status` is set only by the
 *   insert of a one-recipient message, and `rcpt` rows are inserted only for the others.
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
  `UNION ALL SELECT id, 0, ${FIELDS.map((f) => `r_${f}`).join(", ")} FROM message WHERE r_status IS NOT NULL`;

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
  return sql.exec(rows, ...binds).rowsWritten + sql.exec(inline, ...binds).rowsWritten;
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
