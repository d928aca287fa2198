/**
 * The Outbox's SQLite schema (version 1) and its idempotency records.
 *
 * DESCRIPTION
 *   migrateOutbox       creates the tables if missing: message (envelope + summary), rcpt (the
 *                       recipient state machine), event (transitions not yet forwarded to D1),
 *                       idem (Idempotency-Key records) and meta (sweeper cursor). Schema 2 keys
 *                       message and event by their ids (no separate key index, no
 *                       AUTOINCREMENT) and indexes message only where the sweeper looks:
 *                       `message_unclassified` held just the messages not yet classified, and
 *                       `message_done` just the finished ones, by finish time (partial indexes:
 *                       a message costs an index entry only while it is in one of them). Tables
 *                       of schema 1 are rebuilt once. Schema 3 adds `body` (a small message's
 *                       text, kept in its row until it finishes, instead of an R2 object) and
 *                       `body_r2` (1 when the body is in R2). Schema 4 adds
 *                       `rcpt.pending_event`, schema 5 `message.queued_event` and `waiting`,
 *                       whose index `message_waiting` replaces `message_unclassified`: a
 *                       message is in it while it is unclassified, and after, until its
 *                       email.queued (kept in its row) is forwarded (outbox-forward.ts).
 *                       Schema 6 adds `message.return_path` (the VERP senders' domain),
 *                       schema 7 the `r_*` columns of a one-recipient message's recipient and
 *                       the view `rcpt_all` of both homes (rcpt.ts), schema 8 `message.content`
 *                       (a large text and HTML, deflated: content.ts), schema 9 `message.rcpts`
 *                       (the recipients of a message of more than one, rcpt.ts).
 *   checkIdempotency    what a key means now: fresh, a replay of a finished request, a payload
 *                       mismatch, or a request still in flight.
 *   reserveIdempotency  marks a key in flight for a short lease, so a concurrent retry gets 409.
 *   completeIdempotency stores the response for 24 h (same transaction as the envelope).
 *   releaseIdempotency  drops a reservation whose request failed, so the key can be used again.
 *
 * INVARIANTS
 *   A key's record belongs to (tenant, key). A finished record is kept 24 h from its creation; a
 *   reservation only RESERVATION_MS, so a crashed request never blocks its key for long.
 */
import { startForwardCursor } from "./forward";
import { INLINE_COLUMNS, RCPT_VIEW } from "./rcpt";
import type { IdempotencyClaim, IdempotencyResult, StoredResponse } from "../../worker/model/message";

/** How long a key is remembered (Resend: 24 h). */
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
/** How long an in-flight reservation holds its key. */
export const RESERVATION_MS = 120 * 1000;

const MESSAGE_COLUMNS = `id TEXT PRIMARY KEY, tenant TEXT NOT NULL, created_at INTEGER NOT NULL,
    scheduled_at INTEGER, state TEXT NOT NULL DEFAULT 'open', unclassified INTEGER NOT NULL DEFAULT 1,
    mail_from TEXT NOT NULL, size INTEGER NOT NULL, summary TEXT NOT NULL, classify_sent_at INTEGER,
    done_at INTEGER, body_deleted INTEGER NOT NULL DEFAULT 0, body, body_r2 INTEGER NOT NULL DEFAULT 1,
    waiting INTEGER NOT NULL DEFAULT 0, queued_event TEXT, return_path TEXT, ${INLINE_COLUMNS}, content BLOB, rcpts TEXT`;
const EVENT_COLUMNS = `message_id TEXT NOT NULL, seq INTEGER NOT NULL, tenant TEXT NOT NULL, type TEXT NOT NULL,
    recipient TEXT, created_at INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (message_id, seq)`;

const TABLES = [
  `CREATE TABLE IF NOT EXISTS message (${MESSAGE_COLUMNS}) WITHOUT ROWID`,
  "CREATE INDEX IF NOT EXISTS message_waiting ON message (scheduled_at, created_at) WHERE waiting = 1",
  "CREATE INDEX IF NOT EXISTS message_finished ON message (done_at) WHERE state = 'done'",
  `CREATE TABLE IF NOT EXISTS rcpt (message_id TEXT NOT NULL, idx INTEGER NOT NULL, address TEXT NOT NULL,
    status TEXT NOT NULL, transport TEXT, nexthop TEXT, attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER, last_response TEXT, blocked_by TEXT, updated_at INTEGER NOT NULL, pending_event TEXT,
    PRIMARY KEY (message_id, idx)) WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS event (${EVENT_COLUMNS}) WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS idem (tenant TEXT NOT NULL, key TEXT NOT NULL, hash TEXT NOT NULL,
    state TEXT NOT NULL, token TEXT, status INTEGER, body TEXT, created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL, PRIMARY KEY (tenant, key)) WITHOUT ROWID`,
  "CREATE INDEX IF NOT EXISTS idem_expiry ON idem (expires_at)",
  "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
];

/** Creates the Outbox tables if missing, rebuilding schema-1 tables once. */
export function migrateOutbox(sql: SqlStorage): void {
  const ddl = (t: string) =>
    sql.exec<{ sql: string }>("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", t).toArray()[0]?.sql ??
    null;
  const oldMessage = ddl("message");
  if (oldMessage !== null && !/WITHOUT ROWID/i.test(oldMessage)) {
    sql.exec("DROP INDEX IF EXISTS message_unclassified");
    sql.exec("DROP INDEX IF EXISTS message_done");
    sql.exec("ALTER TABLE message RENAME TO message_v1");
    sql.exec(`CREATE TABLE message (${MESSAGE_COLUMNS}) WITHOUT ROWID`);
    sql.exec(
      `INSERT INTO message (id, tenant, created_at, scheduled_at, state, unclassified, mail_from, size, summary, ` +
        `classify_sent_at, done_at, body_deleted, waiting)
      SELECT id, tenant, created_at, scheduled_at, state, unclassified, mail_from, size, summary, ` +
        `classify_sent_at, done_at, body_deleted, unclassified FROM message_v1`,
    );
    sql.exec("DROP TABLE message_v1");
  }
  const oldEvent = ddl("event");
  if (oldEvent !== null && /AUTOINCREMENT/i.test(oldEvent)) {
    sql.exec("DROP INDEX IF EXISTS event_by_message");
    sql.exec("ALTER TABLE event RENAME TO event_v1");
    sql.exec(`CREATE TABLE event (${EVENT_COLUMNS}) WITHOUT ROWID`);
    sql.exec("INSERT INTO event SELECT message_id, seq, tenant, type, recipient, created_at, data FROM event_v1");
    sql.exec("DROP TABLE event_v1");
  }
  // Schema 3: small bodies kept in the message row (`body`; `body_r2` 0) instead of R2.
  const message = ddl("message");
  if (message !== null && !/\bbody_r2\b/.test(message)) {
    sql.exec("ALTER TABLE message ADD COLUMN body");
    sql.exec("ALTER TABLE message ADD COLUMN body_r2 INTEGER NOT NULL DEFAULT 1");
  }
  // Schema 5: `waiting` (classification or email.queued still to do) replaces `unclassified` as
  // the condition of the sweeper's index; email.queued kept in the message row (queued_event).
  if (ddl("message") !== null && !/\bwaiting\b/.test(ddl("message")!)) {
    sql.exec("ALTER TABLE message ADD COLUMN waiting INTEGER NOT NULL DEFAULT 0");
    sql.exec("ALTER TABLE message ADD COLUMN queued_event TEXT");
    sql.exec("UPDATE message SET waiting = 1 WHERE unclassified = 1");
    sql.exec("DROP INDEX IF EXISTS message_unclassified");
  }
  // Schema 6: the domain of the message's VERP envelope senders.
  if (!/\breturn_path\b/.test(ddl("message") ?? "return_path"))
    sql.exec("ALTER TABLE message ADD COLUMN return_path TEXT");
  // Schema 4: a finishing report's event kept in its recipient row (outbox-forward.ts).
  const rcpt = ddl("rcpt");
  if (rcpt !== null && !/\bpending_event\b/.test(rcpt)) sql.exec("ALTER TABLE rcpt ADD COLUMN pending_event TEXT");
  // Schema 7: a one-recipient message's recipient in its own row (rcpt.ts).
  if (!/\br_status\b/.test(ddl("message") ?? "r_status"))
    for (const c of INLINE_COLUMNS.split(",")) sql.exec(`ALTER TABLE message ADD COLUMN ${c.trim()}`);
  // Schema 8: a large text and HTML kept deflated (content.ts).
  if (!/\bcontent\b/.test(ddl("message") ?? "content")) sql.exec("ALTER TABLE message ADD COLUMN content BLOB");
  // Schema 9: a message's recipients, when more than one, as a JSON list in its row (rcpt.ts);
  // the view of every recipient gains that home.
  if (!/\brcpts\b/.test(ddl("message") ?? "rcpts")) {
    sql.exec("ALTER TABLE message ADD COLUMN rcpts TEXT");
    sql.exec("DROP VIEW IF EXISTS rcpt_all");
  }
  for (const t of TABLES) sql.exec(t);
  sql.exec(RCPT_VIEW);
  startForwardCursor(sql, Date.now());
}

type IdemRow = {
  hash: string;
  state: string;
  token: string | null;
  status: number | null;
  body: string | null;
  expires_at: number;
};

/**
 * What `claim` means at `nowMs`. A reservation holding `ownToken` is the caller's own and
 * counts as fresh.
 */
export function checkIdempotency(
  sql: SqlStorage,
  tenant: string,
  claim: IdempotencyClaim,
  nowMs: number,
  ownToken?: string,
): IdempotencyResult {
  const row = sql
    .exec<IdemRow>(
      "SELECT hash, state, token, status, body, expires_at FROM idem WHERE tenant = ? AND key = ?",
      tenant,
      claim.key,
    )
    .toArray()[0];
  if (!row || row.expires_at <= nowMs) return { kind: "fresh" };
  if (row.hash !== claim.hash) return { kind: "mismatch" };
  if (row.state === "pending")
    return ownToken !== undefined && row.token === ownToken ? { kind: "fresh" } : { kind: "in_flight" };
  return { kind: "replay", response: { status: row.status ?? 200, body: JSON.parse(row.body ?? "null") } };
}

/** Reserves a fresh key for RESERVATION_MS under `token`; returns what the key meant. */
export function reserveIdempotency(
  sql: SqlStorage,
  tenant: string,
  claim: IdempotencyClaim,
  token: string,
  nowMs: number,
): IdempotencyResult {
  const seen = checkIdempotency(sql, tenant, claim, nowMs);
  if (seen.kind !== "fresh") return seen;
  sql.exec(
    "INSERT OR REPLACE INTO idem (tenant, key, hash, state, token, created_at, expires_at) VALUES (?, ?, ?, 'pending', ?, ?, ?)",
    tenant,
    claim.key,
    claim.hash,
    token,
    nowMs,
    nowMs + RESERVATION_MS,
  );
  return seen;
}

/** Records the finished response under the key for IDEMPOTENCY_TTL_MS. */
export function completeIdempotency(
  sql: SqlStorage,
  tenant: string,
  claim: IdempotencyClaim,
  response: StoredResponse,
  nowMs: number,
): void {
  sql.exec(
    "INSERT OR REPLACE INTO idem (tenant, key, hash, state, token, status, body, created_at, expires_at) VALUES (?, ?, ?, 'done', NULL, ?, ?, ?, ?)",
    tenant,
    claim.key,
    claim.hash,
    response.status,
    JSON.stringify(response.body),
    nowMs,
    nowMs + IDEMPOTENCY_TTL_MS,
  );
}

/** Drops the caller's reservation (only its own, and only while pending). */
export function releaseIdempotency(sql: SqlStorage, tenant: string, key: string, token: string): void {
  sql.exec("DELETE FROM idem WHERE tenant = ? AND key = ? AND state = 'pending' AND token = ?", tenant, key, token);
}

/** Deletes expired idempotency records. */
export function purgeIdempotency(sql: SqlStorage, nowMs: number): void {
  sql.exec("DELETE FROM idem WHERE expires_at <= ?", nowMs);
}
