/**
 * Admission records kept in the snapshot instead of rows, while the core is tiny.
 *
 * A tiny core (journal.ts) writes its snapshot at every flush, in one row. An admission record
 * (sqlite-source.ts recordAdmission) admitted into such a core is kept here, in memory, and stored
 * in that same row (`snapshot_meta.admissions`) with the snapshot of the core that holds its
 * attempt: the admission row's insert, and its delete when the attempt is done, are saved.
 *
 * A record becomes a row (materialize) whenever something must find it outside a snapshot:
 *   - the journal writes a ring row: replaying it after a restart reads the records of the
 *     attempts it names, and those added since the last snapshot would be in none (all go);
 *   - its attempt expires or is dropped (a `finished` record keeps it a day), or waits in the
 *     incoming queue.
 * A record whose attempt is deferred stays here with its retry's due time (`due`: what a
 * retry_due row holds, delivery-state.ts), while at most KEPT_RETRIES_MAX do: the deferral's
 * flush stores it (a snapshot with the records, or a ring row once every record is a row, its
 * retry a retry_due row then), and the retry reads its recipients from it. Mail deferred one
 * message at a time saves the admission row, the retry_due row with its index entry and the
 * final_rcpt rows, each written and later deleted. Beyond that many the retry is a row, so
 * the records stored beside a snapshot stay small whatever the deferred backlog.
 * A record kept here also keeps the recipients of its attempt that became final while the attempt
 * goes on (`final`: delivery-state.ts's final_rcpt rows, saved the same way); materialize writes
 * them as rows with the record. The flush of the report that made them final stores them (a
 * snapshot with the records, or a ring row once every record is a row). Were they lost, a retry
 * would name a recipient that is final, and the Outbox gives no envelope for it (it holds every
 * outcome first), so nothing is sent twice.
 *
 * A record whose attempt ended done goes after its grace (done-records.ts); the stored snapshot
 * still names it until the next one is written, so forgetting one makes the snapshot `stale`,
 * and the journal writes a new one where it would have deleted the row (settle).
 *
 * DESCRIPTION
 *   admissionsOf(sql)      the records of one object's SQLite (one set per SqlStorage).
 *   enabled                records may be kept here (TRANSPORT_TINY_SNAPSHOT_CHARS above 0).
 *   add / get / has        by core id; byMessage(messageId) the first of a message's attempts.
 *   materialize(sql, id?)  writes one record (or every one) as an admission row, and forgets it here.
 *   forget(id)             drops a done attempt's record.
 *   addFinal(id, idxs)     notes recipients of a kept record's attempt final; false when the
 *                          record is not kept here (the caller writes final_rcpt rows).
 *   defer(id, dueMs)       keeps a deferred attempt's retry with its record; false when the record
 *                          is not kept here or KEPT_RETRIES_MAX retries are (the caller writes rows).
 *   retries()              the kept records waiting for a retry (retryCount of them, the earliest
 *                          due at nextDue()); clearAttempt(id) forgets one's retry and final
 *                          recipients (retried or ended), flushDue(nowMs) makes every kept retry
 *                          due by then.
 *   stored() / load(sql, text)  the JSON kept with a snapshot (null when none), and read back at load.
 *   stale                  a record the stored snapshot holds was forgotten since.
 *   insertAdmissionRow / admissionRowExists  the admission row's write and probe (sqlite-source.ts
 *                          recordAdmission's too).
 */

import { knownOf } from "./table-mins";

/** What an admission row holds, as the row's columns are (rcpts and fields as JSON text). */
export interface AdmissionRecord {
  coreId: string;
  createTime: number;
  tenant: string | null;
  priority: number;
  rcpts: string;
  fields: string | null;
  /** Backlog indexes of recipients final while the attempt goes on (see the header). */
  final?: number[];
  /** When a deferred attempt's retry is due, ms (see the header). */
  due?: number;
}

/** Deferred attempts whose retry is kept with the snapshot at most (see the header). */
export const KEPT_RETRIES_MAX = 64;

/** The records of one Transport DO kept with its snapshot (see the header). */
export class SnapshotAdmissions {
  private readonly records = new Map<string, AdmissionRecord>();
  /** Ids of the kept records with a retry (`due`), so its readers at every call scan nothing else. */
  private readonly waiting = new Set<string>();
  /** Ids the stored snapshot holds. */
  private inSnapshot = new Set<string>();
  enabled = false;
  stale = false;

  has(coreId: string): boolean {
    return this.records.has(coreId);
  }

  get(coreId: string): AdmissionRecord | undefined {
    return this.records.get(coreId);
  }

  get size(): number {
    return this.records.size;
  }

  ids(): IterableIterator<string> {
    return this.records.keys();
  }

  add(r: AdmissionRecord): void {
    this.records.set(r.coreId, r);
    if (r.due !== undefined) this.waiting.add(r.coreId);
    else this.waiting.delete(r.coreId);
  }

  /** The first recorded attempt of a message (`<id>` or `<id>#<n>`), as readMeta's range finds rows. */
  byMessage(messageId: string): AdmissionRecord | undefined {
    const first = this.records.get(messageId);
    if (first) return first;
    for (const [id, r] of this.records) if (id.startsWith(`${messageId}#`)) return r;
    return undefined;
  }

  /** Drops a record (its attempt is done and its grace over). */
  forget(coreId: string): void {
    this.waiting.delete(coreId);
    if (this.records.delete(coreId) && this.inSnapshot.has(coreId)) this.stale = true;
  }

  /** Notes recipients of a kept record's attempt final; false when its record is not kept here. */
  addFinal(coreId: string, idxs: readonly number[]): boolean {
    const r = this.records.get(coreId);
    if (!r) return false;
    r.final = [...new Set([...(r.final ?? []), ...idxs])];
    return true;
  }

  /** Keeps a deferred attempt's retry, due at `dueMs`, with its record; false when not kept here or too many are. */
  defer(coreId: string, dueMs: number): boolean {
    const r = this.records.get(coreId);
    if (!r || (r.due === undefined && this.waiting.size >= KEPT_RETRIES_MAX)) return false;
    r.due = dueMs;
    this.waiting.add(coreId);
    return true;
  }

  /** The kept records whose attempt waits for a retry. */
  retries(): AdmissionRecord[] {
    return [...this.waiting].map((id) => this.records.get(id)!);
  }

  /** How many kept records wait for a retry. */
  get retryCount(): number {
    return this.waiting.size;
  }

  /** The earliest kept retry's due time (ms), or null: read at every call (wakeup.ts), so no copy. */
  nextDue(): number | null {
    let min: number | null = null;
    for (const id of this.waiting) {
      const due = this.records.get(id)!.due!;
      if (min === null || due < min) min = due;
    }
    return min;
  }

  /** Forgets a kept attempt's retry and final recipients (it was retried, or it ended). */
  clearAttempt(coreId: string): void {
    const r = this.records.get(coreId);
    if (!r) return;
    delete r.due;
    delete r.final;
    this.waiting.delete(coreId);
  }

  /** Makes every kept retry due by `nowMs` (postqueue -f). */
  flushDue(nowMs: number): void {
    for (const r of this.retries()) if (r.due! > nowMs) r.due = nowMs;
  }

  /** Writes a record (every record, without `coreId`) as an admission row, with its final recipients and retry, and forgets it here. */
  materialize(sql: SqlStorage, coreId?: string): void {
    const list = coreId === undefined ? [...this.records.values()] : [this.records.get(coreId)].filter((r) => !!r);
    for (const r of list) {
      insertAdmissionRow(sql, r);
      insertFinalRows(sql, r.coreId, r.final ?? []);
      if (r.due !== undefined) insertRetryRow(sql, r.coreId, r.due);
      this.records.delete(r.coreId);
      this.waiting.delete(r.coreId);
    }
  }

  /** The records as stored beside a snapshot being written now (null when none); that snapshot then holds them. */
  stored(): string | null {
    this.inSnapshot = new Set(this.records.keys());
    this.stale = false;
    return this.records.size === 0 ? null : JSON.stringify([...this.records.values()]);
  }

  /**
   * At load: the records the stored snapshot holds, but for those written as rows since (the
   * row is the record then: a retry or a `finished` record may rely on it).
   */
  load(sql: SqlStorage, text: string | null): void {
    this.records.clear();
    this.waiting.clear();
    for (const r of text === null ? [] : (JSON.parse(text) as AdmissionRecord[])) this.add(r);
    this.inSnapshot = new Set(this.records.keys());
    this.stale = false;
    for (const id of [...this.records.keys()]) if (admissionRowExists(sql, id)) this.forget(id);
  }
}

/** Writes a record as an admission row (rcpts null: its recipients are rcpt rows); false when the row was there. */
export function insertAdmissionRow(
  sql: SqlStorage,
  r: Omit<AdmissionRecord, "rcpts"> & { rcpts: string | null },
): boolean {
  return (
    sql.exec(
      "INSERT OR IGNORE INTO admission (core_id, create_time, tenant, priority, rcpts, fields) VALUES (?, ?, ?, ?, ?, ?)",
      r.coreId,
      r.createTime,
      r.tenant,
      r.priority,
      r.rcpts,
      r.fields,
    ).rowsWritten > 0
  );
}

/** Schedules attempt `coreId`'s retry as a retry_due row, due at `dueMs` (delivery-state.ts). */
export function insertRetryRow(sql: SqlStorage, coreId: string, dueMs: number): void {
  sql.exec("INSERT OR REPLACE INTO retry_due (core_id, due) VALUES (?, ?)", coreId, dueMs);
  knownOf(sql).replaced("retry_due", dueMs);
}

/** Notes recipients (backlog indexes) of attempt `coreId` final as final_rcpt rows (delivery-state.ts). */
export function insertFinalRows(sql: SqlStorage, coreId: string, idxs: readonly number[]): void {
  for (const idx of idxs) sql.exec("INSERT OR IGNORE INTO final_rcpt (core_id, idx) VALUES (?, ?)", coreId, idx);
}

/** Whether a core message's admission is a row. */
export function admissionRowExists(sql: SqlStorage, coreId: string): boolean {
  return sql.exec("SELECT 1 FROM admission WHERE core_id = ?", coreId).toArray().length > 0;
}

const BY_SQL = new WeakMap<SqlStorage, SnapshotAdmissions>();

/** The records kept with the snapshot of the object whose SQLite this is. */
export function admissionsOf(sql: SqlStorage): SnapshotAdmissions {
  let a = BY_SQL.get(sql);
  if (!a) BY_SQL.set(sql, (a = new SnapshotAdmissions()));
  return a;
}
