/**
 * The Transport DO's backlog in its SQLite, exposed to the core as a synchronous
 * RecipientSource (the "queue file"): recipients are read by message and offset.
 */
import type { RecipientBatch, RecipientSource, ResolvedRecipient } from "../core";
import type { MessageFields } from "../core/model";
import { settingsOf } from "../../worker/settings/settings";
import { addMissingColumns } from "../../worker/lib/sql-columns";
import { admissionRowExists, admissionsOf, insertAdmissionRow } from "./admissions";
import { knownOf } from "./table-mins";

/** A stored recipient: the resolution the classify stage made, plus its index. */
export interface StoredRecipient extends ResolvedRecipient {
  idx: number;
}

/** What a message was admitted with: arrival time (expiry counts from it), tenant, priority, policy fields. */
export interface AdmissionMeta {
  createTime: number;
  tenant: string | null;
  priority: number;
  fields?: MessageFields | null;
}

/**
 * Creates the backlog tables if missing (schema version 2):
 *   rcpt       the recipients of every core message (attempt), read by the core.
 *   admission  one row per core message admitted here: the idempotency record of admit() and
 *              the arrival time, tenant and priority its later attempts are admitted with; and
 *              (`rcpts`, JSON) the recipients of a core message of at most INLINE_RCPTS, which
 *              then have no rcpt rows (an insert and a delete each saved; version 3); and
 *              (`fields`, JSON or null) its pickup-policy fields (campaign, bulk; version 4).
 *   finished   core messages that left for good, by time: their backlog rows go at the next
 *              checkpoint, their admission rows after admissionTtlSec().
 * Version 1 kept one `admitted` row per recipient, `msg_meta` per message and `finished` without
 * a time; they are carried over once.
 */
export function migrateBacklog(sql: SqlStorage): void {
  sql.exec(`CREATE TABLE IF NOT EXISTS rcpt (
    message_id TEXT NOT NULL, idx INTEGER NOT NULL, address TEXT NOT NULL,
    transport TEXT NOT NULL, nexthop TEXT NOT NULL, egress TEXT, site TEXT,
    PRIMARY KEY (message_id, idx)) WITHOUT ROWID`);
  const has = (t: string) =>
    sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", t).toArray().length > 0;
  if (
    has("finished") &&
    !sql
      .exec<{ name: string }>("PRAGMA table_info(finished)")
      .toArray()
      .some((c) => c.name === "at")
  ) {
    sql.exec("ALTER TABLE finished RENAME TO finished_v1");
  }
  sql.exec(
    "CREATE TABLE IF NOT EXISTS finished (at INTEGER NOT NULL, core_id TEXT NOT NULL, PRIMARY KEY (at, core_id)) WITHOUT ROWID",
  );
  sql.exec(
    "CREATE TABLE IF NOT EXISTS admission (core_id TEXT PRIMARY KEY, create_time INTEGER NOT NULL, tenant TEXT, priority INTEGER NOT NULL, rcpts TEXT, fields TEXT) WITHOUT ROWID",
  );
  if (has("finished_v1")) {
    sql.exec("INSERT OR IGNORE INTO finished (at, core_id) SELECT 0, message_id FROM finished_v1");
    sql.exec("DROP TABLE finished_v1");
  }
  if (has("msg_meta")) {
    sql.exec(
      "INSERT OR IGNORE INTO admission (core_id, create_time, tenant, priority) SELECT message_id, create_time, tenant, priority FROM msg_meta",
    );
    if (has("admitted")) {
      sql.exec(`INSERT OR IGNORE INTO admission (core_id, create_time, tenant, priority)
        SELECT DISTINCT a.message_id, m.create_time, m.tenant, m.priority FROM admitted a JOIN msg_meta m
          ON m.message_id = CASE WHEN instr(a.message_id, '#') > 0 THEN substr(a.message_id, 1, instr(a.message_id, '#') - 1) ELSE a.message_id END`);
    }
    sql.exec("DROP TABLE msg_meta");
  }
  if (has("admitted")) sql.exec("DROP TABLE admitted");
  addMissingColumns(sql, "admission", { rcpts: "TEXT", fields: "TEXT" });
}

/** Core messages with at most this many recipients keep them in their admission row. */
export const INLINE_RCPTS = 50;

type RcptRow = {
  idx: number;
  address: string;
  transport: string;
  nexthop: string;
  egress: string | null;
  site: string | null;
};

function toStored(r: RcptRow): StoredRecipient {
  return {
    idx: r.idx,
    address: r.address,
    transport: r.transport,
    nexthop: r.nexthop,
    ...(r.egress ? { egress: r.egress } : {}),
    ...(r.site ? { site: r.site } : {}),
  };
}

/** The recipients kept in a core message's admission record, or null when they are rcpt rows. */
function inlineRecipients(sql: SqlStorage, coreId: string): StoredRecipient[] | null {
  const text =
    admissionsOf(sql).get(coreId)?.rcpts ??
    sql.exec<{ rcpts: string | null }>("SELECT rcpts FROM admission WHERE core_id = ?", coreId).toArray()[0]?.rcpts ??
    null;
  if (text === null) return null;
  return (JSON.parse(text) as ResolvedRecipient[]).map((r, idx) => ({ ...r, idx }));
}

/** A core message's recipients with idx ≥ offset, in order (admission row or rcpt rows). */
export function recipientsFrom(sql: SqlStorage, coreId: string, offset: number, limit = -1): StoredRecipient[] {
  const inline = inlineRecipients(sql, coreId);
  if (inline !== null) return inline.slice(offset, limit < 0 ? undefined : offset + limit);
  return sql
    .exec<RcptRow>(
      "SELECT idx, address, transport, nexthop, egress, site FROM rcpt WHERE message_id = ? AND idx >= ? ORDER BY idx LIMIT ?",
      coreId,
      offset,
      limit,
    )
    .toArray()
    .map(toStored);
}

/**
 * How long an admission record outlives its message, seconds: a repeated admit() within it
 * changes nothing. A day (a classify retry comes within minutes), and never longer than
 * MESSAGE_RETENTION_DAYS, after which a message leaves no row behind.
 */
export function admissionTtlSec(env: object): number {
  return Math.min(86_400, Math.ceil(settingsOf(env).retentionMs / 1000));
}

/** When the oldest finished record's admission expires (unix s), or null: one probe of the key. */
export function nextForgetAt(sql: SqlStorage, ttlSec: number): number | null {
  const at = knownOf(sql).min(
    "finished",
    () => sql.exec<{ at: number | null }>("SELECT min(at) AS at FROM finished").one().at,
    Date.now() / 1000 - ttlSec,
  );
  return at === null ? null : at + ttlSec;
}

/**
 * Records the admission of a core message with what later attempts need, and its recipients:
 * in the admission record up to INLINE_RCPTS, else as rcpt rows. The record is kept with the
 * snapshot (admissions.ts) when that is enabled and the recipients are inline, else it is a row.
 * Idempotent: false (nothing written) when the message was admitted here before (a repeated
 * RPC, also after it left the core).
 */
export function recordAdmission(
  sql: SqlStorage,
  coreId: string,
  m: AdmissionMeta,
  rcpts: readonly ResolvedRecipient[],
): boolean {
  const kept = admissionsOf(sql);
  if (kept.has(coreId)) return false;
  const inline = rcpts.length <= INLINE_RCPTS;
  const json = inline
    ? JSON.stringify(
        rcpts.map((r) => ({
          address: r.address,
          transport: r.transport,
          nexthop: r.nexthop,
          ...(r.egress ? { egress: r.egress } : {}),
          ...(r.site ? { site: r.site } : {}),
        })),
      )
    : null;
  const fields = m.fields ? JSON.stringify(m.fields) : null;
  if (json !== null && kept.enabled) {
    if (admissionRowExists(sql, coreId)) return false;
    kept.add({ coreId, createTime: m.createTime, tenant: m.tenant, priority: m.priority, rcpts: json, fields });
    return true;
  }
  const fresh = insertAdmissionRow(sql, {
    coreId,
    createTime: m.createTime,
    tenant: m.tenant,
    priority: m.priority,
    rcpts: json,
    fields,
  });
  if (fresh && !inline) storeRecipients(sql, coreId, rcpts);
  return fresh;
}

/** What a message (any of its attempts still recorded) was admitted with, or null. */
export function readMeta(sql: SqlStorage, messageId: string): AdmissionMeta | null {
  const kept = admissionsOf(sql).byMessage(messageId);
  if (kept)
    return {
      createTime: kept.createTime,
      tenant: kept.tenant,
      priority: kept.priority,
      fields: kept.fields === null ? null : (JSON.parse(kept.fields) as MessageFields),
    };
  // Attempts are `<id>` and `<id>#<n>`: a range on the key ('$' follows '#').
  const row = sql
    .exec<{ create_time: number; tenant: string | null; priority: number; fields: string | null }>(
      "SELECT create_time, tenant, priority, fields FROM admission WHERE core_id >= ?1 AND core_id < ?1 || '$' LIMIT 1",
      messageId,
    )
    .toArray()[0];
  return row
    ? {
        createTime: row.create_time,
        tenant: row.tenant,
        priority: row.priority,
        fields: row.fields === null ? null : (JSON.parse(row.fields) as MessageFields),
      }
    : null;
}

/** Stores a message's recipients as rcpt rows; idempotent by (message, index). */
function storeRecipients(sql: SqlStorage, messageId: string, rcpts: readonly ResolvedRecipient[]): void {
  rcpts.forEach((r, idx) => {
    sql.exec(
      "INSERT OR IGNORE INTO rcpt (message_id, idx, address, transport, nexthop, egress, site) VALUES (?, ?, ?, ?, ?, ?, ?)",
      messageId,
      idx,
      r.address,
      r.transport,
      r.nexthop,
      r.egress ?? null,
      r.site ?? null,
    );
  });
}

/** The backlog as the core's recipient source. */
export class SqliteRecipientSource implements RecipientSource<StoredRecipient> {
  constructor(private readonly sql: SqlStorage) {}

  read(messageId: string, offset: number, limit: number): RecipientBatch<StoredRecipient> {
    const inline = inlineRecipients(this.sql, messageId);
    if (inline !== null) {
      const rcpts = inline.slice(offset, offset + limit);
      const nextOffset = rcpts.length > 0 ? rcpts[rcpts.length - 1]!.idx + 1 : offset;
      return { rcpts, nextOffset, unread: Math.max(0, inline.length - nextOffset) };
    }
    const rcpts = recipientsFrom(this.sql, messageId, offset, limit);
    const nextOffset = rcpts.length > 0 ? rcpts[rcpts.length - 1]!.idx + 1 : offset;
    const left = this.sql
      .exec<{ n: number }>("SELECT count(*) AS n FROM rcpt WHERE message_id = ? AND idx >= ?", messageId, nextOffset)
      .one().n;
    return { rcpts, nextOffset, unread: left };
  }
}

/** Remembers that a core message left for good (done, expired, retried as a new attempt, removed). */
export function noteFinished(sql: SqlStorage, coreId: string, now: number): void {
  admissionsOf(sql).materialize(sql, coreId); // the record outlives the attempt by a day
  if (sql.exec("INSERT OR IGNORE INTO finished (at, core_id) VALUES (?, ?)", now, coreId).rowsWritten > 0)
    knownOf(sql).inserted("finished", now);
}

/**
 * Drops the backlog rows of core messages finished at or after `since` (call only right after a
 * checkpoint), and the admission and finished records older than `ttlSec` (admissionTtlSec), at
 * most `limit` of them: both through the key of `finished`, never a scan of the backlog.
 * Returns `now`, the next call's `since`.
 */
export function forgetFinished(sql: SqlStorage, since: number, now: number, ttlSec: number, limit = 500): number {
  const known = knownOf(sql);
  // What is known of `finished` skips the statements that would find nothing (table-mins.ts).
  if (known.finishedSince)
    sql.exec("DELETE FROM rcpt WHERE message_id IN (SELECT core_id FROM finished WHERE at >= ?)", since);
  known.finishedSince = false;
  const first = nextForgetAt(sql, ttlSec);
  if (first === null || first > now) return now;
  const old = sql
    .exec<{ at: number; core_id: string }>(
      "SELECT at, core_id FROM finished WHERE at <= ? ORDER BY at LIMIT ?",
      now - ttlSec,
      limit,
    )
    .toArray();
  for (const f of old) {
    sql.exec("DELETE FROM admission WHERE core_id = ?", f.core_id);
    sql.exec("DELETE FROM finished WHERE at = ? AND core_id = ?", f.at, f.core_id);
  }
  known.changed("finished");
  return now;
}
