/**
 * The D1 message and recipient index: kept in step with the Outbox (GET /emails reads it:
 * message-reads.ts).
 *
 * DESCRIPTION
 *   indexStatements(db, items, tail?)      upserts of messages' rows, which hold their recipients
 *                                          (migrations 0035, 0039; recipients rows only for a
 *                                          message whose recipients' idx are not 0, 1, 2, …;
 *                                          those indexed before moved, 0041), a statement for all the
 *                                          messages (in chunks), not one per message; a row only
 *                                          moves forward (an older snapshot applied late never
 *                                          overwrites a newer one) and is only rewritten when a
 *                                          value changed; plus the messages' tags (message_tags,
 *                                          for the admin search) when any has them. After `tail`
 *                                          log rows written in the same batch (publish.ts), a new
 *                                          messages row names its email's first run of them
 *                                          (head_seq, head_run; migration 0037).
 *   messageFields(view)                    the row's columns its stored envelopes leave out.
 */
import { isMessageId } from "../model/ids";
import { FINAL_STATUSES, type MessageView } from "../model/message";
import { emailIdOf } from "../mail/arf";
import { chunkByJson, jsonColumns } from "./json-rows";
import type { MessageFields } from "../webhooks/core/stored-body";

const json = (v: unknown) => (v === null ? null : JSON.stringify(v));

/**
 * The version of a view: its latest change, so index writes only move forward. Two outcomes of
 * one message can be recorded in the same ms and written in either order, so within that ms the
 * view with more final recipients is the later one (a fraction of a ms: finals / (n + 1)); an
 * earlier view of the same ms with a recipient still open would otherwise undo the last_event.
 */
export function versionOf(v: MessageView): number {
  const last = Math.max(v.created_at, ...v.recipients.map((r) => r.updated_at));
  const finals = v.recipients.filter((r) => FINAL_STATUSES.includes(r.status)).length;
  return last + finals / (v.recipients.length + 1);
}

/** UTF-8 bytes of row JSON per upsert statement (D1 refuses a string above 2,000,000 bytes). */
const ROW_CHUNK_BYTES = 1_000_000;

/** The Message-ID to index: only one the sender set (the relay's own names the email already). */
function headerToIndex(v: MessageView): string | null {
  const mid = v.summary.message_id ?? null;
  return mid === null || emailIdOf(mid, isMessageId) === v.id ? null : mid;
}

/**
 * The columns of a message's row that its stored envelopes leave out (core/stored-body.ts), as
 * the insert below writes them; an update never changes them.
 */
export function messageFields(v: MessageView): MessageFields {
  return {
    id: v.id,
    created_at: v.created_at,
    from_addr: v.summary.from,
    to_json: JSON.stringify(v.summary.to),
    subject: v.summary.subject ?? null,
  };
}

/** A message to index: its view as the Outbox answered it, and the event GET /emails shows last. */
export interface IndexItem {
  view: MessageView;
  lastEvent: string;
}

/**
 * Upserts for messages and their recipients: one statement for the message rows, one per
 * ROW_CHUNK_BYTES of recipient rows when a message's recipients do not fit its row (none in the
 * usual case), and one for the tags (message_tags, for the admin search)
 * when any has tags, however many messages there are (each statement reads its rows from a JSON
 * array, json_each). An update writes only when something changed and never touches the indexed
 * identity columns (tenant, address, Message-ID, created_at), so it rewrites no index entry but
 * recipients_open (migration 0009) while the recipient is open.
 */
export function indexStatements(db: D1Database, items: readonly IndexItem[], tail = 0): D1PreparedStatement[] {
  if (items.length === 0) return [];
  const messages = items.map(({ view: v, lastEvent }) => {
    const s = v.summary;
    const one = v.recipients.length === 1 ? v.recipients[0]! : null;
    const fields = messageFields(v);
    return {
      id: v.id,
      tenant: v.tenant,
      created_at: fields.created_at,
      scheduled_at: v.scheduled_at,
      from: fields.from_addr,
      to: fields.to_json,
      cc: json(s.cc),
      bcc: json(s.bcc),
      reply_to: json(s.reply_to),
      subject: fields.subject,
      last_event: lastEvent,
      version: versionOf(v),
      message_id: headerToIndex(v),
      ...(one === null ? {} : rcptFields(one)),
      ...manyFields(v),
    };
  });
  const messageColumns = jsonColumns([
    "id",
    "tenant",
    "created_at",
    "scheduled_at",
    "from",
    "to",
    "cc",
    "bcc",
    "reply_to",
    "subject",
    "last_event",
    "version",
    "message_id",
    ...RCPT_FIELDS,
    "rcpts",
    "rcpts_open",
  ]);
  // A message keeps its recipients in its own row: one in the r_* columns (migration 0035), two
  // or more in `rcpts` (migration 0039). One whose recipients do not fit the row's form keeps
  // recipients rows (rcpts stays NULL), which the statement below moves instead.
  const upsertMessages = (chunk: readonly unknown[]) =>
    db
      .prepare(
        `${tail > 0 ? RUNS_NAMED : ""}INSERT INTO messages (id, tenant_id, created_at, scheduled_at, from_addr, to_json, cc_json, ` +
          `bcc_json, reply_to_json, subject, last_event, updated_at, message_id, ${INLINE_COLUMNS.join(", ")}, rcpts, rcpts_open, head_seq, head_run)
     SELECT ${messageColumns}, ${tail > 0 ? "h.lo, h.span" : "NULL, NULL"}
     FROM json_each(?1) AS j ${tail > 0 ? "LEFT JOIN heads h ON h.email_id = json_extract(j.value, '$.id')" : ""} WHERE true
     ON CONFLICT (id) DO UPDATE SET scheduled_at = excluded.scheduled_at, last_event = excluded.last_event, updated_at = excluded.updated_at,
       ${INLINE_COLUMNS.map((c) => `${c} = IIF(messages.r_status IS NULL, NULL, excluded.${c})`).join(", ")},
       rcpts = IIF(messages.rcpts IS NULL, NULL, excluded.rcpts), rcpts_open = IIF(messages.rcpts IS NULL, NULL, excluded.rcpts_open)
     WHERE excluded.updated_at >= messages.updated_at
       AND (excluded.updated_at <> messages.updated_at OR excluded.last_event IS NOT messages.last_event ` +
          `OR excluded.scheduled_at IS NOT messages.scheduled_at OR (messages.rcpts IS NOT NULL AND excluded.rcpts IS NOT messages.rcpts))`,
      )
      .bind(
        JSON.stringify(chunk),
        ...(tail > 0 ? [tail, JSON.stringify([...new Set(chunk.map((m) => (m as { tenant: string }).tenant))])] : []),
      );
  // Recipients rows only for a message of two or more whose recipients do not fit the row's form
  // (manyFields): those of messages indexed before migrations 0035 and 0039 moved into their rows
  // (migration 0041), so no statement names the rows of any other message.
  const irregular = items
    .filter(({ view: v }) => v.recipients.length >= 2 && manyFields(v).rcpts === null)
    .flatMap(({ view: v }) => v.recipients.map((r) => ({ m: v.id, t: v.tenant, idx: r.idx, ...rcptFields(r) })));
  const upsertRcpts = (chunk: readonly unknown[]) =>
    db
      .prepare(
        `INSERT INTO recipients (message_id, idx, tenant_id, address, status, transport, nexthop, attempts, next_attempt_at, updated_at)
     SELECT ${jsonColumns(["m", "idx", "t", ...RCPT_FIELDS])}
     FROM json_each(?1) AS j WHERE true
     ON CONFLICT (message_id, idx) DO UPDATE SET ${RCPT_SET}
     WHERE ${RCPT_CHANGED}`,
      )
      .bind(JSON.stringify(chunk));
  // Chunked (ROW_CHUNK_BYTES), so a large batch or message stays within D1's statement limits.
  return [
    ...chunkByJson(messages, ROW_CHUNK_BYTES).map(upsertMessages),
    ...chunkByJson(irregular, ROW_CHUNK_BYTES).map(upsertRcpts),
    ...tagStatements(
      db,
      items.map((i) => i.view),
    ),
  ];
}

/**
 * The runs of events a messages row names (migration 0037): the rows of the `?2` (at least as
 * many as the batch wrote before this statement) last seqs of each tenant `?3` names, by email,
 * for an email whose log has no run with an index entry. Those rows were written by this batch
 * (D1 runs a batch as one transaction, and a tenant's seqs only grow), read once per statement.
 */
const RUNS_NAMED = `WITH tail AS MATERIALIZED (
    SELECT e.email_id, e.seq FROM json_each(?3) AS t JOIN event_runs e ON e.tenant_id = t.value
      AND e.seq >= IFNULL((SELECT x.seq FROM event_runs x WHERE x.tenant_id = t.value ORDER BY x.seq DESC LIMIT 1 OFFSET ?2 - 1), 0)),
  heads AS MATERIALIZED (SELECT email_id, MIN(seq) AS lo, MAX(seq) - MIN(seq) AS span FROM tail
    WHERE NOT EXISTS (SELECT 1 FROM event_runs x WHERE x.email_id = tail.email_id AND x.run IS NOT -1) GROUP BY email_id)
`;

/** A recipient's indexed fields, by the names the statements read (RCPT_FIELDS). */
function rcptFields(r: MessageView["recipients"][number]) {
  return {
    email: r.email,
    status: r.status,
    transport: r.transport,
    nexthop: r.nexthop,
    attempts: r.attempts,
    next_attempt_at: r.next_attempt_at,
    updated_at: r.updated_at,
  };
}

const RCPT_FIELDS = ["email", "status", "transport", "nexthop", "attempts", "next_attempt_at", "updated_at"];

/**
 * The `rcpts` and `rcpts_open` columns of a message of two or more recipients (migration 0039):
 * each recipient as an array of RCPT_FIELDS' values at its idx, and 1 while any is open. None
 * (recipients rows instead) when the idx are not 0, 1, 2, … in order, the form the array needs.
 */
function manyFields(v: MessageView): { rcpts: string | null; rcpts_open: 1 | null } {
  const rs = v.recipients;
  if (rs.length < 2 || rs.some((r, i) => r.idx !== i)) return { rcpts: null, rcpts_open: null };
  const rows = rs.map((r) => Object.values(rcptFields(r)));
  return { rcpts: JSON.stringify(rows), rcpts_open: rs.some((r) => !FINAL_STATUSES.includes(r.status)) ? 1 : null };
}

/** The messages columns of its one recipient, in RCPT_FIELDS' order (migration 0035). */
const INLINE_COLUMNS = [
  "r_address",
  "r_status",
  "r_transport",
  "r_nexthop",
  "r_attempts",
  "r_next_attempt_at",
  "r_updated_at",
];

const RCPT_SET = `status = excluded.status, transport = excluded.transport, nexthop = excluded.nexthop,
       attempts = excluded.attempts, next_attempt_at = excluded.next_attempt_at, updated_at = excluded.updated_at`;

const RCPT_CHANGED =
  `excluded.updated_at >= recipients.updated_at
       AND (excluded.status IS NOT recipients.status OR excluded.transport IS NOT recipients.transport OR excluded.nexthop IS NOT recipients.nexthop
         OR excluded.attempts IS NOT recipients.attempts OR excluded.next_attempt_at IS NOT recipients.next_attempt_at ` +
  `OR excluded.updated_at IS NOT recipients.updated_at)`;

/** The messages' tags for search (migration 0005), a statement per ROW_CHUNK_BYTES of them; none when no message has tags. */
function tagStatements(db: D1Database, views: readonly MessageView[]): D1PreparedStatement[] {
  const tags = views.flatMap((v) =>
    (v.summary.tags ?? []).map(({ name, value }) => ({ m: v.id, t: v.tenant, name, value })),
  );
  if (tags.length === 0) return [];
  return chunkByJson(tags, ROW_CHUNK_BYTES).map((chunk) =>
    db
      .prepare(
        `INSERT OR IGNORE INTO message_tags (message_id, tenant_id, name, value)
     SELECT ${jsonColumns(["m", "t", "name", "value"])} FROM json_each(?1) AS j`,
      )
      .bind(JSON.stringify(chunk)),
  );
}
