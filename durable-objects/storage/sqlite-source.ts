/**
 * The Transport DO's backlog in its SQLite, exposed to the core as a synchronous
 * RecipientSource (the "queue file"): recipients are read by message and offset.
 */
import type { RecipientBatch, RecipientSource, ResolvedRecipient } from "../core";

/** A stored recipient: the resolution the classify stage made, plus its index. */
export interface StoredRecipient extends ResolvedRecipient {
  idx: number;
}

/** Creates the backlog tables if missing (schema version 1). */
export function migrateBacklog(sql: SqlStorage): void {
  sql.exec(`CREATE TABLE IF NOT EXISTS rcpt (
    message_id TEXT NOT NULL, idx INTEGER NOT NULL, address TEXT NOT NULL,
    transport TEXT NOT NULL, nexthop TEXT NOT NULL, egress TEXT, site TEXT,
    PRIMARY KEY (message_id, idx)) WITHOUT ROWID`);
  sql.exec(`CREATE TABLE IF NOT EXISTS finished (message_id TEXT PRIMARY KEY) WITHOUT ROWID`);
  sql.exec(`CREATE TABLE IF NOT EXISTS admitted (message_id TEXT NOT NULL, address TEXT NOT NULL,
    PRIMARY KEY (message_id, address)) WITHOUT ROWID`);
}

/**
 * True when any of these recipients of the message was admitted here before (a repeated RPC,
 * even after the message left the core). The classify stage admits a message's recipients for
 * one transport in a single call, so the set repeats exactly.
 */
export function wasAdmitted(sql: SqlStorage, messageId: string, rcpts: ResolvedRecipient[]): boolean {
  return rcpts.some((r) => sql.exec("SELECT 1 FROM admitted WHERE message_id = ? AND address = ?", messageId, r.address).toArray().length > 0);
}

/** Records the admission of a message's recipients. */
export function recordAdmission(sql: SqlStorage, messageId: string, rcpts: ResolvedRecipient[]): void {
  for (const r of rcpts) sql.exec("INSERT OR IGNORE INTO admitted (message_id, address) VALUES (?, ?)", messageId, r.address);
}

/** Stores a message's recipients; idempotent by (message, index). */
export function storeRecipients(sql: SqlStorage, messageId: string, rcpts: ResolvedRecipient[]): void {
  rcpts.forEach((r, idx) => {
    sql.exec(
      "INSERT OR IGNORE INTO rcpt (message_id, idx, address, transport, nexthop, egress, site) VALUES (?, ?, ?, ?, ?, ?, ?)",
      messageId, idx, r.address, r.transport, r.nexthop, r.egress ?? null, r.site ?? null,
    );
  });
}

/** The backlog as the core's recipient source. */
export class SqliteRecipientSource implements RecipientSource<StoredRecipient> {
  constructor(private readonly sql: SqlStorage) {}

  read(messageId: string, offset: number, limit: number): RecipientBatch<StoredRecipient> {
    const rows = this.sql
      .exec<{ idx: number; address: string; transport: string; nexthop: string; egress: string | null; site: string | null }>(
        "SELECT idx, address, transport, nexthop, egress, site FROM rcpt WHERE message_id = ? AND idx >= ? ORDER BY idx LIMIT ?",
        messageId, offset, limit,
      )
      .toArray();
    const rcpts = rows.map((r) => ({ idx: r.idx, address: r.address, transport: r.transport, nexthop: r.nexthop, ...(r.egress ? { egress: r.egress } : {}), ...(r.site ? { site: r.site } : {}) }));
    const nextOffset = rows.length > 0 ? rows[rows.length - 1]!.idx + 1 : offset;
    const left = this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM rcpt WHERE message_id = ? AND idx >= ?", messageId, nextOffset).one().n;
    return { rcpts, nextOffset, unread: left };
  }
}

/** Remembers that a message left the core for good (done or expired). */
export function noteFinished(sql: SqlStorage, messageId: string): void {
  sql.exec("INSERT OR IGNORE INTO finished (message_id) VALUES (?)", messageId);
}

/** Drops the backlog rows of finished messages (call only right after a checkpoint). */
export function forgetFinished(sql: SqlStorage): void {
  sql.exec("DELETE FROM rcpt WHERE message_id IN (SELECT message_id FROM finished)");
  sql.exec("DELETE FROM finished");
}
