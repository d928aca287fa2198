/**
 * The Outbox's queue directory in its SQLite: messages, recipients and their transitions.
 *
 * DESCRIPTION
 *   insertMessage        stores one accepted envelope with its recipients `incoming`, decided
 *                        when the accepting worker classified it (and email.scheduled when it
 *                        waits). Callers run it inside transactionSync with the idempotency
 *                        record, so accept is all or nothing.
 *   readView / readEvents / deleteEvents   what the status API and the index sync read.
 *   claimClassifyWork    a due, open message's still-`incoming` recipients and their decisions.
 *   recordDecisions      the classify stage's resolution, stored before admission; suppressed
 *                        recipients end `suppressed`.
 *   markReady            incoming → ready once admitted (the message's `unclassified` cleared,
 *                        email.queued kept in the same write, outbox-forward.ts;
 *                        its decided recipients read as ready). Both only ever move `incoming`
 *                        recipients, so a repeated classification changes nothing.
 *   cancelMessage / rescheduleMessage   for scheduled messages not yet due.
 *   readMessage          the message's own row (state, tenant, summary), without recipients.
 *   readEnvelope         what the delivery stage sends (sender, size, recipients).
 *   applyOutcome         the delivery stage's report for one recipient. The reports that finish
 *                        their message keep their events in the recipient rows they write
 *                        (`rcpt.pending_event`) instead of event rows: an event row is an insert
 *                        and, once forwarded, a delete; a finished message is found through the
 *                        index of finished messages instead (outbox-forward.ts).
 *   finishIfDone         marks a message done once every recipient is final.
 *   dueAmong           which of some messages are due for classification now (after a change).
 *   dueForClassify / unindexed / markClassifySent   the sweeper's re-trigger lists: messages
 *                        never classified, and messages whose events never reached D1.
 *
 * INVARIANTS
 *   A final recipient never changes again. Every status change writes its event in the same
 *   transaction: an event row, or (a report that finishes the message) its recipient row. A
 *   message is `done` exactly when all its recipients are final.
 */
import { admissionId, cancelRecipients, controlOf, recordComplaint, recordLateBounce, recordUnsubscribe, type ComplaintResult, type LateBounceTarget } from "./control";
import { FINAL_STATUSES, type ClassifyResult, type EventAck, type ClassifyWork, type DeliveryEnvelope, type MessageSummary, type MessageView, type NewMessage, type OutboxEvent, type OutcomeReport, type RcptStatus, type RcptView } from "../../worker/model/message";

type MessageRow = { id: string; tenant: string; created_at: number; scheduled_at: number | null; state: "open" | "done"; mail_from: string; unclassified: number };
/** The row with its summary (which may hold the text and HTML, up to 256 KiB: read only where needed). */
type MessageWithSummary = MessageRow & { summary: string };
type RcptRow = { idx: number; address: string; status: RcptStatus; transport: string | null; nexthop: string | null; attempts: number; next_attempt_at: number | null; last_response: string | null; blocked_by: string | null; updated_at: number };

const FINAL_SQL = FINAL_STATUSES.map((s) => `'${s}'`).join(", ");

/**
 * Appends a transition to the event table. Its `seq` orders the message's events and names
 * each in D1 (`<id>:<seq>`), so it never repeats for a message, also after forwarded events were
 * deleted: the event time in µs, or one more than the message's last, whichever is larger.
 */
export function recordEvent(sql: SqlStorage, e: Omit<OutboxEvent, "seq" | "data"> & { data: object }): void {
  insertEvent(sql, e, lastSeq(sql, e.message_id));
}

/** The largest event seq of message ?1 (event rows and those kept in its rows), or 0: an SQL expression. */
const LAST_SEQ = `max(COALESCE((SELECT max(seq) FROM event WHERE message_id = ?1), 0),
    COALESCE((SELECT max(json_extract(pending_event, '$.seq')) FROM rcpt WHERE message_id = ?1 AND pending_event IS NOT NULL), 0),
    COALESCE((SELECT json_extract(queued_event, '$.seq') FROM message WHERE id = ?1), 0))`;

/** The message's largest event seq (event rows and those kept in recipient rows), or 0. */
function lastSeq(sql: SqlStorage, id: string): number {
  return sql.exec<{ seq: number }>(`SELECT ${LAST_SEQ} AS seq`, id).one().seq;
}

/**
 * The message row with what a change to it needs, in one statement instead of three: whether it
 * was readmitted (isReadmission), its largest event seq (lastSeq), and where its body is.
 */
function readHead(sql: SqlStorage, id: string): (MessageRow & { again: number; last_seq: number; body_r2: number }) | undefined {
  return sql.exec<MessageRow & { again: number; last_seq: number; body_r2: number }>(
    `SELECT id, tenant, created_at, scheduled_at, state, mail_from, unclassified, body_r2,
       EXISTS (SELECT 1 FROM readmit WHERE message_id = ?1) AS again, ${LAST_SEQ} AS last_seq FROM message WHERE id = ?1`, id,
  ).toArray()[0];
}

/** recordEvent after `last` (the message's largest seq so far, known to the caller); returns the seq used. */
function insertEvent(sql: SqlStorage, e: Omit<OutboxEvent, "seq" | "data"> & { data: object }, last: number): number {
  const seq = Math.max(last + 1, e.created_at * 1000);
  sql.exec(
    "INSERT INTO event (message_id, seq, tenant, type, recipient, created_at, data) VALUES (?, ?, ?, ?, ?, ?, ?)",
    e.message_id, seq, e.tenant, e.type, e.recipient, e.created_at, JSON.stringify(e.data),
  );
  return seq;
}

/** A body as SQLite stores it: text as TEXT, bytes as a BLOB (an ArrayBuffer); none as NULL. */
function inlineBody(b: string | Uint8Array | undefined): string | ArrayBuffer | null {
  if (b === undefined) return null;
  if (typeof b === "string") return b;
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
}

/**
 * Stores an accepted message and its recipients: `incoming`, with the classify stage's decision
 * when the accepting worker made it (`m.decisions`; a scheduled message is decided when due).
 * A recipient decided `suppressed` ends so at once, with its event; a message with no open
 * recipient left is not counted unclassified (no index entry) and finishes in this write.
 */
export function insertMessage(sql: SqlStorage, tenant: string, m: NewMessage, nowMs = m.createdAt): void {
  const decided = new Map(m.scheduledAt === null ? (m.decisions ?? []).map((d) => [d.idx, d]) : []);
  const open = m.rcptTo.some((_, idx) => decided.get(idx)?.status !== "suppressed");
  sql.exec(
    "INSERT INTO message (id, tenant, created_at, scheduled_at, mail_from, size, summary, body, body_r2, unclassified, waiting, return_path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?10, ?10, ?11)",
    m.id, tenant, m.createdAt, m.scheduledAt, m.mailFrom, m.size, JSON.stringify(m.summary), inlineBody(m.body), m.body === undefined ? 1 : 0, open ? 1 : 0,
    m.returnPath ?? null,
  );
  m.rcptTo.forEach((address, idx) => {
    const d = decided.get(idx);
    if (d === undefined) {
      sql.exec("INSERT INTO rcpt (message_id, idx, address, status, updated_at) VALUES (?, ?, ?, 'incoming', ?)", m.id, idx, address, m.createdAt);
    } else if (d.status === "ready") {
      sql.exec("INSERT INTO rcpt (message_id, idx, address, status, transport, nexthop, updated_at) VALUES (?, ?, ?, 'incoming', ?, ?, ?)", m.id, idx, d.address, d.transport, d.nexthop, m.createdAt);
    } else {
      sql.exec("INSERT INTO rcpt (message_id, idx, address, status, blocked_by, updated_at) VALUES (?, ?, ?, 'suppressed', 'suppressed', ?)", m.id, idx, d.address, m.createdAt);
      recordEvent(sql, { message_id: m.id, tenant, type: "email.suppressed", recipient: d.address, created_at: m.createdAt, data: { reason: d.reason } });
    }
  });
  // No email.accepted row: the message row says when it was accepted (the D1 timeline shows it
  // from there), and an event row would cost an insert and a delete here and two rows in D1.
  if (m.scheduledAt !== null) recordEvent(sql, { message_id: m.id, tenant, recipient: null, created_at: m.createdAt, type: "email.scheduled", data: { scheduled_at: new Date(m.scheduledAt).toISOString() } });
  if (!open) finishIfDone(sql, m.id, nowMs);
}

/** The message's own row without its summary (no recipients), or undefined. */
export function readMessage(sql: SqlStorage, id: string): MessageRow | undefined {
  return sql.exec<MessageRow>("SELECT id, tenant, created_at, scheduled_at, state, mail_from, unclassified FROM message WHERE id = ?", id).toArray()[0];
}

/** readMessage with the summary. */
function readWithSummary(sql: SqlStorage, id: string): MessageWithSummary | undefined {
  return sql.exec<MessageWithSummary>("SELECT id, tenant, created_at, scheduled_at, state, summary, mail_from, unclassified FROM message WHERE id = ?", id).toArray()[0];
}

/** The message as the status API shows it, or null. */
export function readView(sql: SqlStorage, id: string, nowMs: number): MessageView | null {
  // One statement for the row, its control action (controlOf) and whether it drew a complaint (complainedOf).
  const m = sql.exec<MessageWithSummary & { action: string | null; complained: number }>(
    `SELECT id, tenant, created_at, scheduled_at, state, summary, mail_from, unclassified,
       (SELECT action FROM control WHERE message_id = ?1) AS action, EXISTS (SELECT 1 FROM complaint WHERE message_id = ?1) AS complained
     FROM message WHERE id = ?1`, id,
  ).toArray()[0];
  if (!m) return null;
  const waiting = m.scheduled_at !== null && m.scheduled_at > nowMs;
  const held = m.action === "hold";
  const rows = sql.exec<RcptRow>(
    "SELECT idx, address, status, transport, nexthop, attempts, next_attempt_at, last_response, blocked_by, updated_at FROM rcpt WHERE message_id = ? ORDER BY idx", id,
  ).toArray();
  const recipients: RcptView[] = rows.map((r) => ({
    idx: r.idx, email: r.address, status: isAdmitted(m, r) ? "ready" : r.status, transport: r.transport, nexthop: r.nexthop, attempts: r.attempts,
    next_attempt_at: r.next_attempt_at, last_response: r.last_response,
    blocked_by: held && !FINAL_STATUSES.includes(r.status) ? "held" : r.status === "incoming" && waiting ? "scheduled" : r.blocked_by, updated_at: r.updated_at,
  }));
  return { id: m.id, tenant: m.tenant, created_at: m.created_at, scheduled_at: m.scheduled_at, state: m.state, summary: JSON.parse(m.summary) as MessageSummary, recipients, complained: m.complained === 1 };
}

/**
 * Whether a recipient stored `incoming` is in fact `ready`: decided, and its message admitted
 * (markReady cleared `unclassified` instead of rewriting every recipient row).
 */
function isAdmitted(m: Pick<MessageRow, "unclassified">, r: { status: RcptStatus; transport: string | null }): boolean {
  return r.status === "incoming" && r.transport !== null && m.unclassified === 0;
}

/**
 * The message's events not yet forwarded to D1, oldest first: its event rows, and the events
 * kept in its rows (`kept`: email.queued in the message row, a finishing outcome's in its
 * recipient row; outbox-forward.ts). A finished message's kept events are always among them.
 */
export function readEvents(sql: SqlStorage, id: string): OutboxEvent[] {
  // One statement: event rows (kept = 0), then the events kept in rows (kept = 1, `data` the KeptEvent).
  const rows = sql.exec<{ kept: number; seq: number | null; tenant: string; type: string | null; recipient: string | null; created_at: number | null; data: string }>(
    `SELECT 0 AS kept, seq, tenant, type, recipient, created_at, data FROM event WHERE message_id = ?1
     UNION ALL SELECT 1, NULL, m.tenant, NULL, r.address, NULL, r.pending_event FROM rcpt r JOIN message m ON m.id = r.message_id WHERE r.message_id = ?1 AND r.pending_event IS NOT NULL
     UNION ALL SELECT 1, NULL, tenant, NULL, NULL, NULL, queued_event FROM message WHERE id = ?1 AND queued_event IS NOT NULL`, id,
  ).toArray();
  return rows.map((r): OutboxEvent => {
    if (r.kept === 0) return { seq: r.seq!, message_id: id, tenant: r.tenant, type: r.type!, recipient: r.recipient, created_at: r.created_at!, data: r.data };
    const e = JSON.parse(r.data) as KeptEvent;
    return { seq: e.seq, message_id: id, tenant: r.tenant, type: e.type, recipient: r.recipient ?? e.recipient ?? null, created_at: e.created_at, data: JSON.stringify(e.data), kept: true };
  }).sort((a, b) => a.seq - b.seq);
}

/** An event kept in a row written anyway: a finishing outcome's in its rcpt row, email.queued in its message row. */
type KeptEvent = { seq: number; type: string; created_at: number; data: object; recipient?: string | null };

/**
 * Forwarded events: an open message's email.queued kept in its row is cleared, and the message
 * leaves the index of waiting messages (one row). A finished message's kept events stay.
 */
function clearForwardedQueued(sql: SqlStorage, acks: readonly EventAck[]): void {
  for (const a of acks) {
    sql.exec(
      `UPDATE message SET queued_event = NULL, waiting = unclassified WHERE id = ? AND state = 'open' AND queued_event IS NOT NULL
         AND json_extract(queued_event, '$.seq') <= ?`, a.id, a.uptoSeq,
    );
  }
}

/** Forgets forwarded events, each message's up to and including its `uptoSeq` (see clearForwardedQueued). */
export function deleteEvents(sql: SqlStorage, acks: readonly EventAck[]): void {
  for (const a of acks) sql.exec("DELETE FROM event WHERE message_id = ? AND seq <= ?", a.id, a.uptoSeq);
  clearForwardedQueued(sql, acks);
}

/**
 * What classification and the Transport DO's pickup policies need of a message's summary: bulk
 * mail and its topic, the campaign tag, the tags. The summary may hold its text and HTML (up to
 * 256 KiB), so it is not parsed for a message that has neither unsubscribe nor tags (JSON.stringify
 * writes `"bulk":true` and `"tags":null` exactly so; inside a string value a quote is escaped);
 * otherwise SQLite reads the two fields.
 */
function policyFieldsOf(sql: SqlStorage, id: string, summary: string): Pick<ClassifyWork, "bulk" | "campaign" | "tags"> {
  const bulk = summary.includes('"bulk":true');
  if (!bulk && summary.includes('"tags":null')) return {};
  const row = sql.exec<{ topic: string | null; tags: string | null }>("SELECT json_extract(summary, '$.unsubscribe_topic') AS topic, json_extract(summary, '$.tags') AS tags FROM message WHERE id = ?", id).one();
  const tags = row.tags === null ? [] : (JSON.parse(row.tags) as { name: string; value: string }[]);
  const campaign = tags.find((t) => t.name === "campaign")?.value;
  return { ...(bulk ? { bulk: { topic: row.topic } } : {}), ...(campaign !== undefined ? { campaign } : {}), ...(tags.length > 0 ? { tags } : {}) };
}

/** A due, open message's still-incoming recipients with any recorded decision, or null. */
export function claimClassifyWork(sql: SqlStorage, id: string, nowMs: number): ClassifyWork | null {
  const m = readWithSummary(sql, id);
  if (!m || m.state !== "open" || m.unclassified === 0 || (m.scheduled_at !== null && m.scheduled_at > nowMs)) return null;
  if (controlOf(sql, id)?.action === "hold") return null; // held: nothing is admitted until released
  const rcpts = sql.exec<{ idx: number; address: string; transport: string | null; nexthop: string | null }>(
    "SELECT idx, address, transport, nexthop FROM rcpt WHERE message_id = ? AND status = 'incoming' ORDER BY idx", id,
  ).toArray();
  if (rcpts.length === 0) return null;
  const admitId = admissionId(sql, id);
  return { id, tenant: m.tenant, createdAt: m.created_at, mailFrom: m.mail_from, rcpts, ...(admitId !== id ? { admitId } : {}), ...policyFieldsOf(sql, id, m.summary) };
}

/**
 * Records the classify stage's decisions for undecided incoming recipients: suppressed ones end
 * `suppressed`; the rest keep `incoming` with their rewritten address, transport and nexthop, so
 * a retry admits exactly the same recipients to the same transports (qmail writes info/ and
 * remote/ before it deletes todo/). Returns whether the message finished (every recipient suppressed).
 */
export function recordDecisions(sql: SqlStorage, id: string, results: ClassifyResult[], nowMs: number): boolean {
  let tenant: string | null = null; // read only for a suppression's event
  let open = false; // a recipient decided `ready` here stays open: the message cannot finish
  for (const r of results) {
    if (r.status === "ready") {
      open = sql.exec(
        "UPDATE rcpt SET address = ?, transport = ?, nexthop = ?, updated_at = ? WHERE message_id = ? AND idx = ? AND status = 'incoming' AND transport IS NULL",
        r.address, r.transport, r.nexthop, nowMs, id, r.idx,
      ).rowsWritten > 0 || open;
      continue;
    }
    const cur = sql.exec(
      "UPDATE rcpt SET status = 'suppressed', address = ?, blocked_by = 'suppressed', updated_at = ? WHERE message_id = ? AND idx = ? AND status = 'incoming' AND transport IS NULL",
      r.address, nowMs, id, r.idx,
    );
    if (cur.rowsWritten > 0) recordEvent(sql, { message_id: id, tenant: (tenant ??= readMessage(sql, id)!.tenant), type: "email.suppressed", recipient: r.address, created_at: nowMs, data: { reason: r.reason } });
  }
  updateUnclassified(sql, id);
  return !open && finishIfDone(sql, id, nowMs);
}

/**
 * incoming → ready for decided recipients admitted to their Transport DO; returns how many moved.
 * No recipient row is rewritten: the message's `unclassified` goes to 0 (one row, which the
 * index of unclassified messages needed anyway), and a decided `incoming` recipient of an
 * admitted message reads as `ready` (readView). `idxs` is the whole plan of claimClassifyWork,
 * so every decided recipient was admitted; an undecided one keeps the message unclassified.
 */
export function markReady(sql: SqlStorage, id: string, idxs: number[], nowMs: number): number {
  const m = readHead(sql, id);
  if (!m || m.unclassified === 0) return 0;
  const wanted = new Set(idxs);
  const again = m.again === 1; // released or requeued: email.queued was said already
  const moved = sql.exec<{ idx: number; address: string; transport: string; nexthop: string }>(
    "SELECT idx, address, transport, nexthop FROM rcpt WHERE message_id = ? AND status = 'incoming' AND transport IS NOT NULL ORDER BY idx", id,
  ).toArray().filter((r) => wanted.has(r.idx));
  // One email.queued row for all of them; for more than one it names no recipient and lists them
  // (publication expands it to one email.sent each): a row per recipient was written and deleted again.
  // The message leaving `unclassified` keeps email.queued in that write (its row stays in the
  // index of waiting messages until the event is forwarded); else it is an event row.
  const [one] = moved;
  const e = !again && one ? {
    message_id: id, tenant: m.tenant, type: "email.queued", recipient: moved.length === 1 ? one.address : null, created_at: nowMs,
    data: moved.length === 1 ? { transport: one.transport, nexthop: one.nexthop } : { recipients: moved.map((r) => r.address) },
  } : null;
  const last = m.last_seq;
  const kept = e ? JSON.stringify({ seq: Math.max(last + 1, nowMs * 1000), type: e.type, created_at: nowMs, data: e.data, recipient: e.recipient } satisfies KeptEvent) : null;
  // An unclassified message is waiting (its index entry): keeping email.queued, it stays so, and
  // `waiting` is not assigned (assigning it, even unchanged, would rewrite the index entry).
  const set = kept !== null ? "queued_event = ?2" : "waiting = (queued_event IS NOT NULL)";
  const ready = sql.exec(
    `UPDATE message SET unclassified = 0, ${set}
       WHERE id = ?1 AND unclassified = 1 AND NOT EXISTS (SELECT 1 FROM rcpt WHERE message_id = ?1 AND status = 'incoming' AND transport IS NULL)`,
    ...(kept !== null ? [id, kept] : [id]),
  ).rowsWritten > 0;
  if (e && !ready) insertEvent(sql, e, last);
  return moved.length;
}

/**
 * Clears message.unclassified once no recipient is left `incoming` (suppressed, cancelled or
 * reported before markReady); writes (and moves the index) only on a change. It never sets it:
 * a recipient becomes `incoming` again only by readmitMessage, which does, and a decided
 * `incoming` recipient of an admitted message is `ready` (see isAdmitted).
 */
function updateUnclassified(sql: SqlStorage, id: string): void {
  sql.exec("UPDATE message SET unclassified = 0, waiting = (queued_event IS NOT NULL) WHERE id = ?1 AND unclassified = 1 AND NOT EXISTS (SELECT 1 FROM rcpt WHERE message_id = ?1 AND status = 'incoming')", id);
}

/** Cancels a scheduled message that is not yet due: every incoming recipient ends `cancelled`. */
export function cancelMessage(sql: SqlStorage, id: string, nowMs: number): boolean {
  const m = readMessage(sql, id);
  if (!m || m.state !== "open" || m.scheduled_at === null || m.scheduled_at <= nowMs) return false;
  sql.exec("UPDATE rcpt SET status = 'cancelled', blocked_by = NULL, updated_at = ? WHERE message_id = ? AND status = 'incoming'", nowMs, id);
  recordEvent(sql, { message_id: id, tenant: m.tenant, type: "email.canceled", recipient: null, created_at: nowMs, data: {} });
  updateUnclassified(sql, id);
  finishIfDone(sql, id, nowMs);
  return true;
}

/** Moves a scheduled message that is not yet due to `atMs`. */
export function rescheduleMessage(sql: SqlStorage, id: string, atMs: number, nowMs: number): boolean {
  const m = readMessage(sql, id);
  if (!m || m.state !== "open" || m.scheduled_at === null || m.scheduled_at <= nowMs) return false;
  sql.exec("UPDATE message SET scheduled_at = ?, classify_sent_at = NULL WHERE id = ?", atMs, id);
  recordEvent(sql, { message_id: id, tenant: m.tenant, type: "email.scheduled", recipient: null, created_at: nowMs, data: { scheduled_at: new Date(atMs).toISOString() } });
  return true;
}

const OUTCOME_EVENT: Record<OutcomeReport["status"], string | null> = {
  active: null, deferred: "email.delivery_delayed", delivered: "email.delivered", bounced: "email.bounced", expired: "email.failed",
};

/** The message's envelope for delivery, or null when unknown. */
export function readEnvelope(sql: SqlStorage, id: string): DeliveryEnvelope | null {
  // One statement: the recipients come as a JSON array of [idx, address, status, attempts].
  const m = sql.exec<{ mail_from: string; size: number; body: string | ArrayBuffer | null; body_r2: number; return_path: string | null; rcpts: string }>(
    `SELECT mail_from, size, body, body_r2, return_path, (SELECT json_group_array(json_array(idx, address, status, attempts))
       FROM (SELECT idx, address, status, attempts FROM rcpt WHERE message_id = ?1 ORDER BY idx)) AS rcpts FROM message WHERE id = ?1`, id,
  ).toArray()[0];
  if (!m) return null;
  const rcpts = (JSON.parse(m.rcpts) as [number, string, RcptStatus, number][]).map(([idx, address, status, attempts]) => ({ idx, address, status, attempts }));
  return {
    id, mailFrom: m.mail_from, size: m.size, rcpts, ...(m.body_r2 === 0 && m.body !== null ? { body: m.body } : {}),
    ...(m.return_path ? { returnPath: m.return_path } : {}),
  };
}

/**
 * Applies a delivery outcome; stale (older attempt) or post-final reports change nothing. An
 * `incoming` recipient whose decision is recorded may already be admitted, dispatched and
 * delivered while the classify stage's markReady is still on its way: its outcome counts (with
 * the email.queued markReady would have recorded first), and markReady then finds nothing to move.
 * An undecided `incoming` recipient cannot have been admitted: its report is refused.
 */
export function applyOutcome(sql: SqlStorage, id: string, r: OutcomeReport, nowMs: number, keepBody = false): boolean {
  return applyOutcomes(sql, id, [r], nowMs, keepBody).applied.length > 0;
}

/** Whether an outcome is one a `failed` notice reports (a bounce or an expiry). */
export function failsForDsn(r: { status: RcptStatus }): boolean {
  return r.status === "bounced" || r.status === "expired";
}

type OutcomeRcpt = { idx: number; status: RcptStatus; attempts: number; address: string; transport: string | null; nexthop: string | null };

/**
 * applyOutcome for several reports on one message, in order; returns those that applied, and
 * whether the message is done (now or before). The message, its recipients and its last event seq
 * are read once, and whether it finished is decided once at the end from the recipients in hand,
 * instead of for every report (a 50-recipient session's reports).
 */
export function applyOutcomes(sql: SqlStorage, id: string, reports: readonly OutcomeReport[], nowMs: number, keepBody = false): { applied: OutcomeReport[]; done: boolean; bodyLeft: boolean } {
  const m = readHead(sql, id);
  if (!m || reports.length === 0) return { applied: [], done: m?.state === "done", bodyLeft: false };
  const rcpts = new Map(sql.exec<OutcomeRcpt>("SELECT idx, status, attempts, address, transport, nexthop FROM rcpt WHERE message_id = ?", id).toArray().map((r) => [r.idx, r]));
  const again = m.again === 1;
  let last = m.last_seq;
  let wasIncoming = false;
  const applied: OutcomeReport[] = [];
  const finishing = finishes(m, rcpts, reports);
  for (const r of reports) {
    const cur = rcpts.get(r.idx);
    if (!applies(m, cur, r)) continue;
    if (cur.status === "incoming" && m.unclassified === 1) { // not yet marked ready (see below)
      wasIncoming = true;
      if (!again) last = insertEvent(sql, { message_id: id, tenant: m.tenant, type: "email.queued", recipient: cur.address, created_at: nowMs, data: { transport: cur.transport, nexthop: cur.nexthop } }, last);
    }
    const attempts = Math.max(cur.attempts, r.attempt);
    const type = OUTCOME_EVENT[r.status];
    const data = { attempt: r.attempt, response: r.response ?? null, ...(r.status === "expired" ? { reason: "expired" } : {}) };
    // The report that finishes its message keeps its event in the recipient row it writes anyway.
    let pending: string | null = null;
    if (type !== null && finishing && FINAL_STATUSES.includes(r.status)) {
      last = Math.max(last + 1, nowMs * 1000);
      pending = JSON.stringify({ seq: last, type, created_at: nowMs, data } satisfies KeptEvent);
    } else if (type !== null) {
      last = insertEvent(sql, { message_id: id, tenant: m.tenant, type, recipient: cur.address, created_at: nowMs, data }, last);
    }
    sql.exec(
      `UPDATE rcpt SET status = ?, attempts = ?, next_attempt_at = ?, last_response = COALESCE(?, last_response), blocked_by = ?, updated_at = ?,
         pending_event = COALESCE(?, pending_event) WHERE message_id = ? AND idx = ?`,
      r.status, attempts, r.status === "deferred" ? r.nextAttemptAt ?? null : null,
      r.response ? JSON.stringify(r.response) : null, r.blockedBy ?? null, nowMs, pending, id, r.idx,
    );
    rcpts.set(r.idx, { ...cur, status: r.status, attempts });
    if (r.throttled) {
      const t = r.throttled;
      last = insertEvent(sql, { message_id: id, tenant: m.tenant, type: "relay.destination.throttled", recipient: cur.address, created_at: nowMs, data: { attempt: r.attempt, rule: t.rule, action: t.action ?? "suspend", ...(t.rate ? { rate: t.rate } : {}), policy_key: t.key, suspended_until: t.until, response: r.response ?? null } }, last);
    }
    applied.push(r);
  }
  if (wasIncoming) updateUnclassified(sql, id);
  // Every recipient is in `rcpts`, with what was applied: whether it finished needs no count.
  const finished = applied.length > 0 && [...rcpts.values()].every((r) => FINAL_STATUSES.includes(r.status));
  // With notices on, the body stays only for a message with a recipient a notice may report.
  const kept = finished && keepBody && [...rcpts.values()].some(failsForDsn);
  if (finished) finishMessage(sql, id, nowMs, kept);
  return { applied, done: m.state === "done" || finished, bodyLeft: finished && (kept || m.body_r2 === 1) };
}

/**
 * Whether report `r` applies to recipient `cur`: not final, not an older attempt's, and not an
 * undecided `incoming` recipient (which cannot have been admitted).
 */
function applies(m: MessageRow, cur: OutcomeRcpt | undefined, r: OutcomeReport): cur is OutcomeRcpt {
  if (!cur || FINAL_STATUSES.includes(cur.status) || r.attempt < cur.attempts) return false;
  return !(cur.status === "incoming" && m.unclassified === 1 && cur.transport === null);
}

/** Whether applying `reports` in order leaves every recipient of the message final (it finishes). */
function finishes(m: MessageRow, rcpts: ReadonlyMap<number, OutcomeRcpt>, reports: readonly OutcomeReport[]): boolean {
  const after = new Map(rcpts);
  for (const r of reports) {
    const cur = after.get(r.idx);
    if (applies(m, cur, r)) after.set(r.idx, { ...cur, status: r.status, attempts: Math.max(cur.attempts, r.attempt) });
  }
  return m.state === "open" && [...after.values()].every((x) => FINAL_STATUSES.includes(x.status));
}

/**
 * Marks the message done when every recipient is final; true if it just finished. Its body is
 * then due for deletion (see outbox-sweep.ts deleteDoneBodies), so body_deleted is set in the
 * same write, and a body kept in the row goes in that write too, unless `keepBody` (a delivery
 * status notice may still quote its headers; deleteDoneBodies clears it then).
 */
export function finishIfDone(sql: SqlStorage, id: string, nowMs: number, keepBody = false): boolean {
  const open = sql.exec<{ n: number }>(`SELECT count(*) AS n FROM rcpt WHERE message_id = ? AND status NOT IN (${FINAL_SQL})`, id).one().n;
  return open === 0 && finishMessage(sql, id, nowMs, keepBody);
}

/** Marks an open message done (every recipient final); its body goes unless `keepBody`. */
function finishMessage(sql: SqlStorage, id: string, nowMs: number, keepBody: boolean): boolean {
  return sql.exec("UPDATE message SET state = 'done', done_at = ?, unclassified = 0, waiting = 0, body_deleted = 1, body = IIF(?, body, NULL) WHERE id = ? AND state = 'open'",
    nowMs, keepBody ? 1 : 0, id).rowsWritten > 0;
}

/** The condition "classification is due and was not triggered since ?1", for the two queries below. */
const DUE_FOR_CLASSIFY = `waiting = 1 AND unclassified = 1 AND state = 'open' AND (
       (scheduled_at IS NULL AND COALESCE(classify_sent_at, created_at) <= ?1)
       OR (scheduled_at IS NOT NULL AND scheduled_at <= ?2
           AND (classify_sent_at IS NULL OR classify_sent_at < scheduled_at OR classify_sent_at <= ?1)))`;

/** Open messages whose classification is due and was not triggered within `graceMs`. */
export function dueForClassify(sql: SqlStorage, nowMs: number, graceMs: number, limit: number): string[] {
  return sql.exec<{ id: string }>(`SELECT id FROM message WHERE ${DUE_FOR_CLASSIFY} ORDER BY created_at LIMIT ?3`, nowMs - graceMs, nowMs, limit)
    .toArray().map((r) => r.id);
}

/** Those of `ids` whose classification is due now (each looked up by its key, never a scan). */
export function dueAmong(sql: SqlStorage, ids: readonly string[], nowMs: number): string[] {
  return ids.filter((id) => sql.exec(`SELECT 1 FROM message WHERE id = ?3 AND ${DUE_FOR_CLASSIFY}`, nowMs, nowMs, id).toArray().length > 0);
}

/**
 * Messages with events older than `graceMs` still not forwarded to D1 (their index is behind):
 * in event rows, or an open message's email.queued kept in its row (through the index of waiting
 * messages).
 */
export function unindexed(sql: SqlStorage, nowMs: number, graceMs: number, limit: number): string[] {
  const rows = sql.exec<{ message_id: string }>("SELECT DISTINCT message_id FROM event WHERE created_at <= ? LIMIT ?", nowMs - graceMs, limit).toArray();
  const queued = sql.exec<{ message_id: string }>(
    "SELECT id AS message_id FROM message WHERE waiting = 1 AND queued_event IS NOT NULL AND json_extract(queued_event, '$.created_at') <= ? LIMIT ?", nowMs - graceMs, limit,
  ).toArray();
  return [...new Set([...rows, ...queued].map((r) => r.message_id))].slice(0, limit);
}

/** Records that classification of `ids` was triggered at `nowMs`. */
export function markClassifySent(sql: SqlStorage, ids: string[], nowMs: number): void {
  for (const id of ids) sql.exec("UPDATE message SET classify_sent_at = ? WHERE id = ?", nowMs, id);
}

/** The earliest future scheduled time among unclassified messages, or null. */
export function nextScheduledAt(sql: SqlStorage, nowMs: number): number | null {
  return sql.exec<{ at: number | null }>("SELECT min(scheduled_at) AS at FROM message WHERE waiting = 1 AND unclassified = 1 AND state = 'open' AND scheduled_at > ?", nowMs).one().at;
}

/** What came back about a delivered recipient: a feedback-loop complaint, a late bounce, or an unsubscribe. */
export type AfterDelivery =
  | { kind: "complaint"; address: string; feedbackType: string }
  | { kind: "unsubscribe"; idx: number; method: "one-click" | "mailto" }
  /** The complaint-rate brake a complaint about `address` set off (api/complaint-brake.ts): its event only. */
  | { kind: "brake"; address: string; data: { rate: number; threshold: number; delivered: number; complained: number; paused_until: number } }
  | { kind: "bounce"; target: LateBounceTarget; response: { code: number | null; enhanced?: string; text: string; mx?: string } };

/** recordComplaint, recordLateBounce or recordUnsubscribe, with its email.complained, email.bounced or email.unsubscribed event when recorded. */
export function recordAfterDelivery(sql: SqlStorage, id: string, tenant: string, report: AfterDelivery, nowMs: number): ComplaintResult {
  if (report.kind === "brake") {
    recordEvent(sql, { message_id: id, tenant, type: "relay.complaint_rate.exceeded", recipient: report.address, created_at: nowMs, data: report.data });
    return { result: "ok", address: report.address };
  }
  if (report.kind === "unsubscribe") {
    const r = recordUnsubscribe(sql, id, report.idx, report.method, nowMs);
    const topic = (JSON.parse(readWithSummary(sql, id)?.summary ?? "{}") as MessageSummary).unsubscribe_topic ?? null;
    if (r.result === "ok") recordEvent(sql, { message_id: id, tenant, type: "email.unsubscribed", recipient: r.address, created_at: nowMs, data: { reason: topic, method: report.method } });
    return r;
  }
  if (report.kind === "complaint") {
    const r = recordComplaint(sql, id, report.address, report.feedbackType, nowMs);
    if (r.result === "ok") recordEvent(sql, { message_id: id, tenant, type: "email.complained", recipient: r.address, created_at: nowMs, data: { reason: report.feedbackType } });
    return r;
  }
  const r = recordLateBounce(sql, id, report.target, report.response, nowMs);
  if (r.result === "ok") {
    const attempt = sql.exec<{ attempts: number }>("SELECT attempts FROM rcpt WHERE message_id = ? AND address = ?", id, r.address).toArray()[0]?.attempts ?? 0;
    recordEvent(sql, { message_id: id, tenant, type: "email.bounced", recipient: r.address, created_at: nowMs, data: { attempt, response: report.response, reason: "late bounce" } });
  }
  return r;
}

/** cancelRecipients with one email.canceled event each, finishing the message if none is left open; returns how many. */
export function cancelWithEvents(sql: SqlStorage, id: string, tenant: string, domain: string | null, nowMs: number): number {
  const addresses = cancelRecipients(sql, id, domain, nowMs);
  for (const a of addresses) recordEvent(sql, { message_id: id, tenant, type: "email.canceled", recipient: a, created_at: nowMs, data: { reason: "cancelled by an operator" } });
  finishIfDone(sql, id, nowMs);
  return addresses.length;
}
