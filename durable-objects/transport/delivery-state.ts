/**
 * The Transport DO's delivery bookkeeping in its SQLite, beside the core's journal and backlog.
 *
 * DESCRIPTION
 *   lease        (version 1, no longer written) one row per dispatched entry: leases are kept in
 *                memory now (storage/leases.ts); takeLegacyLeases reads what a version-1
 *                object left and drops the table.
 *   final_rcpt   recipients (core message id, backlog index) that reached a final state while
 *                others of the same attempt did not (an attempt that ends writes none; one whose
 *                admission record is kept with a tiny core's snapshot keeps them in the record,
 *                admissions.ts).
 *   retry_due    messages the core deferred, with the time their next attempt is due, in ms: the
 *                configured back-off counted from the moment the attempt ended, never from the
 *                start of its second (the core's clock is whole seconds, and a retry armed at
 *                the core's second came up to 1 s early: greylisted mail met its greylist again).
 *                A retry whose admission record is kept with a tiny core's snapshot is kept in
 *                the record instead (admissions.ts `due`); its readers (retries.ts) take both.
 *   incoming     admitted messages waiting for room in the active queue (Postfix's incoming
 *                queue: qmgr_message_active_limit bounds the core, not what is accepted), in
 *                arrival order; their recipients are already in the backlog.
 *   unsure_horizon  (DELIVERY "queue", made only when needed) one row: until when the entries
 *                whose hand-off a start found cut short are leased, and which they were, so
 *                that later starts keep that time (leases.ts unsureUntil).
 *
 *   Each attempt of a message is its own core message (`<id>` for the first, `<id>#<n>` after),
 *   with its own backlog rows, so journal replay always reads exactly the rows it read live.
 *   What a message was admitted with is its admission record (storage/sqlite-source.ts).
 *
 * INVARIANTS
 *   All writes are idempotent (INSERT OR IGNORE / OR REPLACE), so a repeated report changes
 *   nothing twice.
 */
import { hasActiveRoom, type MessageFields, type MessageIntake, type Qmgr } from "../core";
import { recipientsFrom, type StoredRecipient } from "./sqlite-source";
import { Leases } from "./leases";
import { settingsOf } from "../../worker/settings/settings";
import { addMissingColumns } from "../../worker/lib/sql-columns";
import { admissionsOf, insertFinalRows } from "./admissions";
import { knownOf } from "./table-mins";

/** Creates the delivery tables if missing (schema version 1). */
export function migrateDelivery(sql: SqlStorage): void {
  sql.exec(
    "CREATE TABLE IF NOT EXISTS final_rcpt (core_id TEXT NOT NULL, idx INTEGER NOT NULL, PRIMARY KEY (core_id, idx)) WITHOUT ROWID",
  );
  sql.exec("CREATE TABLE IF NOT EXISTS retry_due (core_id TEXT PRIMARY KEY, due INTEGER NOT NULL) WITHOUT ROWID");
  // The next retry is found through this index, so the alarm's work does not grow with the backlog.
  sql.exec("CREATE INDEX IF NOT EXISTS retry_due_by_due ON retry_due (due)");
  // Version 3: due in ms (rows of older objects held seconds; a due in ms is above 10^11).
  sql.exec("UPDATE retry_due SET due = due * 1000 WHERE due < 100000000000");
  sql.exec(
    "CREATE TABLE IF NOT EXISTS incoming (seq INTEGER PRIMARY KEY AUTOINCREMENT, core_id TEXT NOT NULL UNIQUE, create_time INTEGER NOT NULL, tenant TEXT, " +
      "priority INTEGER NOT NULL, rcpt_total INTEGER NOT NULL, fields TEXT)",
  );
  // Version 2: a waiting message's pickup-policy fields (campaign, bulk), JSON or null.
  addMissingColumns(sql, "incoming", { fields: "TEXT" });
}

/** A message waiting in the incoming queue. */
export interface IncomingMessage {
  coreId: string;
  createTime: number;
  tenant: string | null;
  priority: number;
  rcptTotal: number;
  fields?: MessageFields | null;
}

/** The core's intake of a message. */
export function intakeOf(m: IncomingMessage): MessageIntake {
  return {
    id: m.coreId,
    createTime: m.createTime,
    tenant: m.tenant,
    priority: m.priority,
    rcptTotal: m.rcptTotal,
    ...(m.fields ? { fields: m.fields } : {}),
  };
}

/**
 * Moves messages from the incoming queue into the core, oldest first, while it has room;
 * `admit` runs the core's admit command (false: refused, stop). True when it left the queue empty.
 */
export function drainIncoming(
  sql: SqlStorage,
  qmgr: Qmgr<StoredRecipient>,
  admit: (intake: MessageIntake) => boolean,
): boolean {
  while (hasActiveRoom(qmgr)) {
    const next = oldestIncoming(sql, 50);
    if (next.length === 0) return true;
    for (const m of next) {
      if (!hasActiveRoom(qmgr) || !admit(intakeOf(m))) return false;
      dropIncoming(sql, m.coreId);
    }
  }
  return false;
}

/** Queues an admitted message for the active queue (idempotent by core id). */
export function addIncoming(sql: SqlStorage, m: IncomingMessage): void {
  sql.exec(
    "INSERT OR IGNORE INTO incoming (core_id, create_time, tenant, priority, rcpt_total, fields) VALUES (?, ?, ?, ?, ?, ?)",
    m.coreId,
    m.createTime,
    m.tenant,
    m.priority,
    m.rcptTotal,
    m.fields ? JSON.stringify(m.fields) : null,
  );
}

/** The oldest messages waiting in the incoming queue. */
export function oldestIncoming(sql: SqlStorage, limit: number): IncomingMessage[] {
  return sql
    .exec<{
      core_id: string;
      create_time: number;
      tenant: string | null;
      priority: number;
      rcpt_total: number;
      fields: string | null;
    }>("SELECT core_id, create_time, tenant, priority, rcpt_total, fields FROM incoming ORDER BY seq LIMIT ?", limit)
    .toArray()
    .map((r) => ({
      coreId: r.core_id,
      createTime: r.create_time,
      tenant: r.tenant,
      priority: r.priority,
      rcptTotal: r.rcpt_total,
      fields: r.fields === null ? null : (JSON.parse(r.fields) as MessageFields),
    }));
}

/** Takes a message out of the incoming queue; true if it was there. */
export function dropIncoming(sql: SqlStorage, coreId: string): boolean {
  return sql.exec("DELETE FROM incoming WHERE core_id = ?", coreId).rowsWritten > 0;
}

/** Whether the message (any attempt) waits in the incoming queue, and how many do. */
export function incomingOf(sql: SqlStorage, messageId: string): string[] {
  return sql
    .exec<{ core_id: string }>("SELECT core_id FROM incoming WHERE core_id = ?1 OR core_id LIKE ?1 || '#%'", messageId)
    .toArray()
    .map((r) => r.core_id);
}

/** How many messages wait in the incoming queue (the operator's view; it counts). */
export function incomingCount(sql: SqlStorage): number {
  return sql.exec<{ n: number }>("SELECT count(*) AS n FROM incoming").one().n;
}

/** Whether any message waits in the incoming queue (one probe, for the admission path). */
export function hasIncoming(sql: SqlStorage): boolean {
  return sql.exec("SELECT 1 FROM incoming LIMIT 1").toArray().length > 0;
}

/** The wall clock in unix seconds (the Transport DO's one clock read per call). */
export function nowSec(): number {
  return Math.floor(Date.now() / 1000);
}

/** When a lease taken at `now` (unix s) runs out (DELIVERY_LEASE_SECONDS). */
export function leaseUntil(env: object, now: number): number {
  return now + settingsOf(env).leaseSeconds;
}

/**
 * The Transport DO's leases after a start (storage/leases.ts): every entry in flight is leased
 * until the stored horizon (its job may be in the queue, and starting again must not extend
 * that); one whose hand-off to the deliver queue was cut short (the journal's `unconfirmed`) only
 * for AGENT_CHECK_SECONDS from the first start that found it (leases.ts unsureUntil), unless a consumer
 * picks its job up. With DELIVERY "agents" the agents are asked about every entry instead
 * (TransportQueue.checkAgents), at the first check after the start: the restored leases count as
 * checked AGENT_CHECK_SECONDS ago.
 */
export function restoreLeases(
  sql: SqlStorage,
  env: Env,
  busy: ReadonlyMap<number, { peer: { job: { message: { id: string } } } }>,
  unconfirmed: ReadonlySet<number>,
): Leases {
  const inFlight = [...busy].map(([id, e]): [number, string] => [id, e.peer.job.message.id]);
  const settings = settingsOf(env);
  const unsure = settings.agents ? null : { ids: unconfirmed, until: nowSec() + settings.agentCheckMs / 1000 };
  return Leases.restore(
    sql,
    takeLegacyLeases(sql),
    inFlight,
    leaseUntil(env, nowSec()),
    Math.ceil(settings.leaseSeconds / 2),
    unsure,
    // Due at the first agent check (the next alarm on its grid): counted from the start, a check
    // would be postponed by every start, and an object started more often than AGENT_CHECK_SECONDS
    // (evicted between a lone email's alarms) would never ask about entries whose report was lost.
    settings.agents ? Date.now() - settings.agentCheckMs : Date.now(),
  );
}

/** The leases a version-1 object kept in its `lease` table (dropped here), by entry id. */
export function takeLegacyLeases(sql: SqlStorage): [number, { coreId: string; until: number }][] {
  if (sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'lease'").toArray().length === 0) return [];
  const rows = sql
    .exec<{ entry_id: number; core_id: string; until: number }>("SELECT entry_id, core_id, until FROM lease")
    .toArray();
  sql.exec("DROP TABLE lease");
  return rows.map((r) => [r.entry_id, { coreId: r.core_id, until: r.until }]);
}

/** Marks recipients of a core message final: in its admission record while that is kept with the snapshot, else as rows. */
export function markFinal(sql: SqlStorage, coreId: string, idxs: number[]): void {
  if (!admissionsOf(sql).addFinal(coreId, idxs)) insertFinalRows(sql, coreId, idxs);
}

/**
 * The recipients of a core message that are not final yet (its recipients minus final ones, rows
 * or kept with its record). A record kept with the snapshot has no final_rcpt rows: they are
 * written only for a record that is a row (admissions.ts materialize, or addFinal refusing).
 */
export function pendingRecipients(sql: SqlStorage, coreId: string): StoredRecipient[] {
  const kept = admissionsOf(sql).get(coreId);
  const final = new Set(kept?.final);
  if (!kept)
    for (const r of sql.exec<{ idx: number }>("SELECT idx FROM final_rcpt WHERE core_id = ?", coreId)) final.add(r.idx);
  return recipientsFrom(sql, coreId, 0).filter((r) => !final.has(r.idx));
}

/**
 * Forgets the bookkeeping of a core message that was retried or finished. While its record is
 * kept with the snapshot its retry and final recipients are in the record, never rows (rows are
 * written only with the record's own row: admissions.ts), so no statement is run for it.
 */
export function forgetAttempt(sql: SqlStorage, coreId: string): void {
  const kept = admissionsOf(sql);
  if (kept.has(coreId)) return kept.clearAttempt(coreId);
  if (sql.exec("DELETE FROM retry_due WHERE core_id = ?", coreId).rowsWritten > 0) knownOf(sql).changed("retry_due");
  sql.exec("DELETE FROM final_rcpt WHERE core_id = ?", coreId);
}
