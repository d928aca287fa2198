/**
 * The Outbox's queue directory in its SQLite: messages, recipients and their transitions. The
 * classify stage's bookkeeping is classify-state.ts, delivery outcomes outcomes.ts, the event
 * rows events.ts.
 *
 * DESCRIPTION
 *   insertMessage        stores one accepted envelope with its recipients `incoming`, decided
 *                        when the accepting worker classified it (and email.scheduled when it
 *                        waits). Callers run it inside transactionSync with the idempotency
 *                        record, so accept is all or nothing.
 *   readView             what the status API reads (the index sync's events: events.ts).
 *   cancelMessage / rescheduleMessage   for scheduled messages not yet due: scheduled.ts.
 *   readMessage          the message's own row (state, tenant, summary), without recipients.
 *   readHead             the row with its readmission flag and largest event seq, for a change.
 *
 * INVARIANTS
 *   A final recipient never changes again. Every status change writes its event in the same
 *   transaction: an event row, or (a report that finishes the message) its recipient row. A
 *   message is `done` exactly when all its recipients are final.
 */
import {
  FINAL_STATUSES,
  type MessageSummary,
  type MessageView,
  type NewMessage,
  type RcptStatus,
  type RcptView,
} from "../../worker/model/message";
import { finishIfDone } from "./finish";
import { packSummary, unpackSummary } from "./content";
import { LAST_SEQ, recordEvent } from "./events";
import { packRcpts, type StoredRcpt } from "./rcpt";

export type MessageRow = {
  id: string;
  tenant: string;
  created_at: number;
  scheduled_at: number | null;
  state: "open" | "done";
  mail_from: string;
  unclassified: number;
};

/** The row with its summary (which may hold the text and HTML, up to 256 KiB: read only where needed). */
type MessageWithSummary = MessageRow & { summary: string };

type RcptRow = {
  idx: number;
  address: string;
  status: RcptStatus;
  transport: string | null;
  nexthop: string | null;
  attempts: number;
  next_attempt_at: number | null;
  last_response: string | null;
  blocked_by: string | null;
  updated_at: number;
};

export const FINAL_SQL = FINAL_STATUSES.map((s) => `'${s}'`).join(", ");

/** What readHead adds to the message row. */
type Head = { again: number; last_seq: number; body_r2: number; inline: number; waiting: number; rcpts: string | null };

/**
 * The message row with what a change to it needs, in one statement instead of three: whether it
 * was readmitted (isReadmission), its largest event seq (lastSeq), where its body is, and whether
 * its one recipient is in its row (`inline`) or its recipients' list (`rcpts`, rcpt.ts).
 */
export function readHead(sql: SqlStorage, id: string): (MessageRow & Head) | undefined {
  return sql
    .exec<MessageRow & Head>(
      `SELECT id, tenant, created_at, scheduled_at, state, mail_from, unclassified, waiting, body_r2, r_status IS NOT NULL AS inline, rcpts,
       EXISTS (SELECT 1 FROM readmit WHERE message_id = ?1) AS again, ${LAST_SEQ} AS last_seq FROM message WHERE id = ?1`,
      id,
    )
    .toArray()[0];
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
 * `admitting`: the accept admits it before it answers (Outbox.accept), so it is not put in the
 * index of waiting messages; the admission puts it there if it must wait (markReady, or a
 * failed admission: keepWaiting).
 */
export function insertMessage(
  sql: SqlStorage,
  tenant: string,
  m: NewMessage,
  nowMs = m.createdAt,
  admitting = false,
): void {
  const decided = new Map(m.scheduledAt === null ? (m.decisions ?? []).map((d) => [d.idx, d]) : []);
  const open = m.rcptTo.some((_, idx) => decided.get(idx)?.status !== "suppressed");
  const rcpts = m.rcptTo.map((address, idx): StoredRcpt => {
    const d = decided.get(idx);
    if (d === undefined) return { address, status: "incoming", transport: null, nexthop: null, blocked_by: null };
    if (d.status === "ready")
      return { address: d.address, status: "incoming", transport: d.transport, nexthop: d.nexthop, blocked_by: null };
    return { address: d.address, status: "suppressed", transport: null, nexthop: null, blocked_by: "suppressed" };
  });
  // A message keeps its recipients in its own row: one in columns, more as a list (rcpt.ts).
  const one = rcpts.length === 1 ? rcpts[0]! : null;
  const { summary, content } = packSummary(m.summary);
  sql.exec(
    "INSERT INTO message (id, tenant, created_at, scheduled_at, mail_from, size, summary, body, body_r2, unclassified, waiting, return_path, " +
      "r_address, r_status, r_transport, r_nexthop, r_blocked_by, r_updated_at, content, rcpts) " +
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?10, ?18, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?19, ?20)",
    m.id,
    tenant,
    m.createdAt,
    m.scheduledAt,
    m.mailFrom,
    m.size,
    summary,
    inlineBody(m.body),
    m.body === undefined ? 1 : 0,
    open ? 1 : 0,
    m.returnPath ?? null,
    one?.address ?? null,
    one?.status ?? null,
    one?.transport ?? null,
    one?.nexthop ?? null,
    one?.blocked_by ?? null,
    one === null ? null : m.createdAt,
    open && !admitting ? 1 : 0,
    content,
    one === null ? packRcpts(rcpts, m.createdAt) : null,
  );
  rcpts.forEach((_, idx) => {
    const d = decided.get(idx);
    if (d?.status === "suppressed")
      recordEvent(sql, {
        message_id: m.id,
        tenant,
        type: "email.suppressed",
        recipient: d.address,
        created_at: m.createdAt,
        data: { reason: d.reason },
      });
  });
  // No email.accepted row: the message row says when it was accepted (the D1 timeline shows it
  // from there), and an event row would cost an insert and a delete here and two rows in D1.
  if (m.scheduledAt !== null)
    recordEvent(sql, {
      message_id: m.id,
      tenant,
      recipient: null,
      created_at: m.createdAt,
      type: "email.scheduled",
      data: { scheduled_at: new Date(m.scheduledAt).toISOString() },
    });
  if (!open) finishIfDone(sql, m.id, nowMs);
}

/** The message's own row without its summary (no recipients), or undefined. */
export function readMessage(sql: SqlStorage, id: string): MessageRow | undefined {
  return sql
    .exec<MessageRow>(
      "SELECT id, tenant, created_at, scheduled_at, state, mail_from, unclassified FROM message WHERE id = ?",
      id,
    )
    .toArray()[0];
}

/** readMessage with the summary. */
export function readWithSummary(sql: SqlStorage, id: string): MessageWithSummary | undefined {
  return sql
    .exec<MessageWithSummary>(
      "SELECT id, tenant, created_at, scheduled_at, state, summary, mail_from, unclassified FROM message WHERE id = ?",
      id,
    )
    .toArray()[0];
}

/**
 * The message as the status API shows it, or null (`admitted`: admitted though not marked ready,
 * unmarked.ts); with `whole` false its summary's text and HTML are null when they are kept
 * deflated (content.ts: the index and the publication never read them).
 */
export function readView(
  sql: SqlStorage,
  id: string,
  nowMs: number,
  admitted = false,
  whole = true,
): MessageView | null {
  // One statement for the row, its control action (controlOf) and whether it drew a complaint (complainedOf).
  const m = sql
    .exec<MessageWithSummary & { action: string | null; complained: number; content: ArrayBuffer | null }>(
      `SELECT id, tenant, created_at, scheduled_at, state, summary, mail_from, unclassified, IIF(?2, content, NULL) AS content,
       (SELECT action FROM control WHERE message_id = ?1) AS action, EXISTS (SELECT 1 FROM complaint WHERE message_id = ?1) AS complained
     FROM message WHERE id = ?1`,
      id,
      whole ? 1 : 0,
    )
    .toArray()[0];
  if (!m) return null;
  const waiting = m.scheduled_at !== null && m.scheduled_at > nowMs;
  const held = m.action === "hold";
  const rows = sql
    .exec<RcptRow>(
      "SELECT idx, address, status, transport, nexthop, attempts, next_attempt_at, last_response, blocked_by, updated_at " +
        "FROM rcpt_all WHERE message_id = ? ORDER BY idx",
      id,
    )
    .toArray();
  const recipients: RcptView[] = rows.map((r) => ({
    idx: r.idx,
    email: r.address,
    status: isAdmitted(m, r, admitted) ? "ready" : r.status,
    transport: r.transport,
    nexthop: r.nexthop,
    attempts: r.attempts,
    next_attempt_at: r.next_attempt_at,
    last_response: r.last_response,
    blocked_by:
      held && !FINAL_STATUSES.includes(r.status)
        ? "held"
        : r.status === "incoming" && waiting
          ? "scheduled"
          : r.blocked_by,
    updated_at: r.updated_at,
  }));
  return {
    id: m.id,
    tenant: m.tenant,
    created_at: m.created_at,
    scheduled_at: m.scheduled_at,
    state: m.state,
    summary: unpackSummary(m.summary, m.content, whole),
    recipients,
    complained: m.complained === 1,
  };
}

/**
 * Whether a recipient stored `incoming` is in fact `ready`: decided, and its message admitted
 * (markReady cleared `unclassified` instead of rewriting every recipient row).
 */
function isAdmitted(m: Pick<MessageRow, "unclassified">, r: Pick<RcptRow, "status" | "transport">, admitted: boolean) {
  return r.status === "incoming" && r.transport !== null && (m.unclassified === 0 || admitted);
}

/**
 * Clears message.unclassified once no recipient is left `incoming` (suppressed, cancelled or
 * reported before markReady); writes (and moves the index) only on a change. It never sets it:
 * a recipient becomes `incoming` again only by readmitMessage, which does, and a decided
 * `incoming` recipient of an admitted message is `ready` (see isAdmitted).
 */
export function updateUnclassified(sql: SqlStorage, id: string): void {
  sql.exec(
    "UPDATE message SET unclassified = 0, waiting = (queued_event IS NOT NULL) " +
      "WHERE id = ?1 AND unclassified = 1 AND NOT EXISTS (SELECT 1 FROM rcpt_all WHERE message_id = ?1 AND status = 'incoming')",
    id,
  );
}
