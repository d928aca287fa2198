/**
 * Operators' hand on a message in the Outbox: hold and release (postsuper -h / -H), requeue
 * (postsuper -r: route again) and cancel (postsuper -d, with events), of a whole message or of
 * its recipients at one domain.
 *
 * DESCRIPTION
 *   migrateControl     `control` (message id → action hold, the last attempt number the
 *                      Transport DOs used) and `readmit` (message id → attempt number its next
 *                      admission uses, so a Transport DO never mistakes it for the old one).
 *   controlOf          the message's action, or null.
 *   openTransports     the transports of its recipients that are not final.
 *   beginControl       records a hold on an open message (false if not open or already held).
 *   noteAttempt        remembers the highest attempt a Transport DO reported at removal.
 *   cancelRecipients   every recipient that is not final (or only those at `domain`) ends
 *                      `cancelled`, with one email.canceled event each. Nothing is taken out of
 *                      the Transport DOs: entries of cancelled recipients drain there without a
 *                      send, because the delivery stage never sends to a recipient final in the
 *                      Outbox. A recipient whose SMTP transaction is already under way may still
 *                      be delivered; its record stays `cancelled`.
 *   complainedOf       whether any recipient of the message complained.
 *   recordComplaint    a feedback-loop complaint about a delivered recipient, once per
 *                      recipient: "ok" (the caller records the email.complained event),
 *                      "duplicate", "no_recipient" (not one of the message's), "not_delivered";
 *                      for a recipient found by index (a report to its VERP address) "mismatch"
 *                      when the addresses the report names are not the recipient's.
 *   recordLateBounce   an asynchronous report (a DSN that came back by mail after the 250) of a
 *                      delivered recipient, found by index or address. Found by index (a VERP
 *                      address), the addresses the DSN names must fit the recipient (`named`,
 *                      inbound/core/trust.ts tokenNames), else "mismatch" and nothing changes.
 *                      outcome "bounced" or "expired": the recipient becomes that, with the
 *                      report's reply as its last response ("ok": the caller records
 *                      email.bounced or email.failed); "duplicate" when it already ended so,
 *                      "not_delivered" when it is not delivered (a bounce for a recipient still
 *                      in the queue changes nothing: its own delivery decides), "no_recipient".
 *                      outcome "delayed": a delivered recipient keeps its state and takes the
 *                      notice's reply as its last response ("duplicate" when it is the same).
 *   recordUnsubscribe  a recipient's unsubscribe (one-click link or mailto), once per recipient
 *                      in table `unsubscribe`: "ok" (the caller records email.unsubscribed),
 *                      "duplicate", "no_recipient".
 *   readmitMessage     release / requeue: every recipient that is not final becomes `incoming`
 *                      again (requeue also forgets its transport and nexthop, so routing runs
 *                      again), the next admission uses attempt max+1, and the control row goes.
 *   The Outbox's operator calls themselves (holdIn, releaseIn, …) are in outbox-operator.ts.
 *
 * INVARIANTS
 *   A final recipient never changes, but for the one move a late bounce makes: delivered →
 *   bounced (the email.delivered event stays in the history; nothing is rewritten). While held, nothing of the message is admitted (see
 *   claimClassifyWork) and its waiting recipients show blocked_by "held".
 */
import { coreIdOf } from "../../worker/model/delivery";
import { FINAL_STATUSES } from "../../worker/model/message";
import { tokenNames } from "../../worker/inbound/core/trust";
import { execRcpt, writeLateReport } from "./rcpt";

const FINAL_SQL = FINAL_STATUSES.map((s) => `'${s}'`).join(", ");

/** What an operator did to a message that lasts. */
export type ControlAction = "hold";

/** Creates the control tables if missing. */
export function migrateControl(sql: SqlStorage): void {
  sql.exec(
    "CREATE TABLE IF NOT EXISTS control (message_id TEXT PRIMARY KEY, action TEXT NOT NULL, " +
      "attempt INTEGER NOT NULL DEFAULT 0, at INTEGER NOT NULL) WITHOUT ROWID",
  );
  sql.exec("CREATE TABLE IF NOT EXISTS readmit (message_id TEXT PRIMARY KEY, attempt INTEGER NOT NULL) WITHOUT ROWID");
  sql.exec(
    "CREATE TABLE IF NOT EXISTS complaint (message_id TEXT NOT NULL, idx INTEGER NOT NULL, feedback_type TEXT NOT NULL, at INTEGER NOT NULL, " +
      "PRIMARY KEY (message_id, idx)) WITHOUT ROWID",
  );
  sql.exec(
    "CREATE TABLE IF NOT EXISTS unsubscribe (message_id TEXT NOT NULL, idx INTEGER NOT NULL, method TEXT NOT NULL, at INTEGER NOT NULL, " +
      "PRIMARY KEY (message_id, idx)) WITHOUT ROWID",
  );
}

/** Records that recipient `idx` of message `id` unsubscribed (see the header). */
export function recordUnsubscribe(
  sql: SqlStorage,
  id: string,
  idx: number,
  method: string,
  nowMs: number,
): ComplaintResult {
  const r = sql
    .exec<{ address: string }>("SELECT address FROM rcpt_all WHERE message_id = ? AND idx = ?", id, idx)
    .toArray()[0];
  if (!r) return { result: "no_recipient" };
  const added = sql.exec(
    "INSERT OR IGNORE INTO unsubscribe (message_id, idx, method, at) VALUES (?, ?, ?, ?)",
    id,
    idx,
    method,
    nowMs,
  ).rowsWritten;
  return added > 0 ? { result: "ok", address: r.address } : { result: "duplicate" };
}

/** What recordComplaint (or recordLateBounce) found. */
export type ComplaintResult =
  { result: "ok" | "mismatch"; address: string } | { result: "duplicate" | "no_recipient" | "not_delivered" };

/** Whether a complaint was recorded about any recipient of the message. */
export function complainedOf(sql: SqlStorage, id: string): boolean {
  return sql.exec("SELECT 1 FROM complaint WHERE message_id = ? LIMIT 1", id).toArray().length > 0;
}

/** Who a complaint is about: an address, or a recipient index with the addresses the report names. */
export type ComplaintTarget = string | { idx: number; named: readonly string[] };

/** Records a complaint about the recipient `who` of message `id` (see the header). */
export function recordComplaint(
  sql: SqlStorage,
  id: string,
  who: ComplaintTarget,
  feedbackType: string,
  nowMs: number,
): ComplaintResult {
  const rows = sql
    .exec<{ idx: number; address: string; status: string }>(
      "SELECT idx, address, status FROM rcpt_all WHERE message_id = ?",
      id,
    )
    .toArray();
  const r =
    typeof who === "string"
      ? rows.find((x) => x.address.toLowerCase() === who.trim().toLowerCase())
      : rows.find((x) => x.idx === who.idx);
  if (!r) return { result: "no_recipient" };
  if (typeof who !== "string" && !tokenNames(r.address, who.named).act)
    return { result: "mismatch", address: r.address };
  if (r.status !== "delivered") return { result: "not_delivered" };
  const added = sql.exec(
    "INSERT OR IGNORE INTO complaint (message_id, idx, feedback_type, at) VALUES (?, ?, ?, ?)",
    id,
    r.idx,
    feedbackType,
    nowMs,
  ).rowsWritten;
  return added > 0 ? { result: "ok", address: r.address } : { result: "duplicate" };
}

/** Where a late bounce points: a recipient index (from a VERP address) or an address (from the DSN). */
export type LateBounceTarget = { idx: number } | { address: string };

/** What a late report does to a delivered recipient. */
export type LateOutcome = "bounced" | "expired" | "delayed";

/** Records a late report about the recipient `target` of message `id` (see the header). */
export function recordLateBounce(
  sql: SqlStorage,
  id: string,
  target: LateBounceTarget,
  response: object,
  nowMs: number,
  named: readonly (string | null)[] = [],
  outcome: LateOutcome = "bounced",
): ComplaintResult {
  const rows = sql
    .exec<{ idx: number; address: string; status: string; last_response: string | null }>(
      "SELECT idx, address, status, last_response FROM rcpt_all WHERE message_id = ?",
      id,
    )
    .toArray();
  const r =
    "idx" in target
      ? rows.find((x) => x.idx === target.idx)
      : rows.find((x) => x.address.toLowerCase() === target.address.trim().toLowerCase());
  if (!r) return { result: "no_recipient" };
  if ("idx" in target && !tokenNames(r.address, named).act) return { result: "mismatch", address: r.address };
  const json = JSON.stringify(response);
  if (outcome === "delayed") {
    if (r.status !== "delivered") return { result: "not_delivered" };
    if (r.last_response === json) return { result: "duplicate" };
    writeLateReport(sql, id, r.idx, { last_response: json, updated_at: nowMs });
    return { result: "ok", address: r.address };
  }
  if (r.status === "bounced" || r.status === "expired") return { result: "duplicate" };
  if (r.status !== "delivered") return { result: "not_delivered" };
  writeLateReport(sql, id, r.idx, { status: outcome, last_response: json, updated_at: nowMs });
  return { result: "ok", address: r.address };
}

/** The message's control row, or null. */
export function controlOf(sql: SqlStorage, id: string): { action: ControlAction; attempt: number } | null {
  return (
    sql
      .exec<{ action: ControlAction; attempt: number }>("SELECT action, attempt FROM control WHERE message_id = ?", id)
      .toArray()[0] ?? null
  );
}

/** The core message id the message's next admission uses. */
export function admissionId(sql: SqlStorage, id: string): string {
  const r = sql.exec<{ attempt: number }>("SELECT attempt FROM readmit WHERE message_id = ?", id).toArray()[0];
  return r ? coreIdOf(id, r.attempt) : id;
}

/** Whether the message was admitted before (a release or requeue): no second email.queued then. */
export function isReadmission(sql: SqlStorage, id: string): boolean {
  return sql.exec("SELECT 1 FROM readmit WHERE message_id = ?", id).toArray().length > 0;
}

/** Transports of the message's recipients that are not final. */
export function openTransports(sql: SqlStorage, id: string): string[] {
  return sql
    .exec<{ transport: string }>(
      `SELECT DISTINCT transport FROM rcpt_all WHERE message_id = ? AND transport IS NOT NULL AND status NOT IN (${FINAL_SQL})`,
      id,
    )
    .toArray()
    .map((r) => r.transport);
}

/** Records a hold on an open message; false if it is not open or already held. */
export function beginControl(sql: SqlStorage, id: string, action: ControlAction, nowMs: number): boolean {
  const m = sql.exec<{ state: string }>("SELECT state FROM message WHERE id = ?", id).toArray()[0];
  if (!m || m.state !== "open" || controlOf(sql, id)) return false;
  sql.exec("INSERT INTO control (message_id, action, attempt, at) VALUES (?, ?, 0, ?)", id, action, nowMs);
  return true;
}

/** Remembers the highest attempt number a Transport DO had used. */
export function noteAttempt(sql: SqlStorage, id: string, attempt: number): void {
  sql.exec("UPDATE control SET attempt = max(attempt, ?) WHERE message_id = ?", attempt, id);
}

/** Cancels the recipients that are not final (only those at `domain` when given); returns their addresses. */
export function cancelRecipients(sql: SqlStorage, id: string, domain: string | null, nowMs: number): string[] {
  const at = domain === null ? null : `@${domain.toLowerCase()}`;
  const rows = sql
    .exec<{ idx: number; address: string }>(
      `SELECT idx, address FROM rcpt_all WHERE message_id = ? AND status NOT IN (${FINAL_SQL})`,
      id,
    )
    .toArray()
    .filter((r) => at === null || r.address.toLowerCase().endsWith(at));
  for (const r of rows) {
    execRcpt(
      sql,
      "UPDATE {T} SET {status} = 'cancelled', {blocked_by} = NULL, {next_attempt_at} = NULL, {updated_at} = ? WHERE {id} = ? AND {idx} = ?",
      nowMs,
      id,
      r.idx,
    );
  }
  return rows.map((r) => r.address);
}

/** Release or requeue: open recipients become `incoming` for a new admission. Returns how many. */
export function readmitMessage(sql: SqlStorage, id: string, reroute: boolean, nowMs: number, usedAttempt = 0): number {
  const ctl = controlOf(sql, id);
  const maxAttempts =
    sql.exec<{ n: number | null }>("SELECT max(attempts) AS n FROM rcpt_all WHERE message_id = ?", id).one().n ?? 0;
  const prev =
    sql.exec<{ attempt: number }>("SELECT attempt FROM readmit WHERE message_id = ?", id).toArray()[0]?.attempt ?? 1;
  const attempt = Math.max(ctl?.attempt ?? 0, usedAttempt, maxAttempts, prev) + 1;
  const set = reroute ? "{status} = 'incoming', {transport} = NULL, {nexthop} = NULL" : "{status} = 'incoming'";
  const n = execRcpt(
    sql,
    `UPDATE {T} SET ${set}, {blocked_by} = NULL, {next_attempt_at} = NULL, {updated_at} = ? WHERE {id} = ? AND {status} NOT IN (${FINAL_SQL})`,
    nowMs,
    id,
  );
  sql.exec("DELETE FROM control WHERE message_id = ?", id);
  sql.exec("INSERT OR REPLACE INTO readmit (message_id, attempt) VALUES (?, ?)", id, attempt);
  sql.exec("UPDATE message SET unclassified = 1, waiting = 1, classify_sent_at = NULL WHERE id = ? AND ? > 0", id, n);
  return n;
}
