/** The tables of the Transport DO's journal (journal.ts): created, and upgraded in place. */
import { addMissingColumns } from "../../worker/lib/sql-columns";

const RING_TABLE =
  "CREATE TABLE IF NOT EXISTS journal_ring (slot INTEGER PRIMARY KEY, seq INTEGER NOT NULL, cmd TEXT NOT NULL)";

/**
 * Deletes every row of the ring (`rows` of them); returns the rows written. More than two go with
 * the table: a DROP TABLE frees its pages and reports no row written, and creating it again
 * reports two, where a DELETE reports each row it removes (a row written, $1 per million, each).
 */
export function emptyRing(sql: SqlStorage, rows: number): number {
  if (rows <= 2) return sql.exec("DELETE FROM journal_ring").rowsWritten;
  return sql.exec("DROP TABLE journal_ring").rowsWritten + sql.exec(RING_TABLE).rowsWritten;
}

/** Creates the journal tables if missing (schema version 2: the ring; version 1's `journal` is read once, then dropped). */
export function migrateJournal(sql: SqlStorage): void {
  sql.exec(RING_TABLE);
  sql.exec("CREATE TABLE IF NOT EXISTS snapshot_chunk (part INTEGER PRIMARY KEY, data TEXT NOT NULL)");
  sql.exec(
    "CREATE TABLE IF NOT EXISTS snapshot_meta (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL, parts INTEGER NOT NULL, sending TEXT, data TEXT, admissions TEXT)",
  );
  // Added in place: version 2 without `sending` (hand-offs outstanding at the checkpoint); version
  // 3 keeps a snapshot of one chunk in the row itself (`data`; `parts` 0); version 4 the admission
  // records kept with the snapshot (`admissions`, admissions.ts).
  addMissingColumns(sql, "snapshot_meta", { sending: "TEXT", data: "TEXT", admissions: "TEXT" });
}

/** The stored snapshot's row (see journal.ts), or undefined before the first. */
export function readSnapshotMeta(sql: SqlStorage) {
  return sql
    .exec<{ seq: number; parts: number; sending: string | null; data: string | null; admissions: string | null }>(
      "SELECT seq, parts, sending, data, admissions FROM snapshot_meta WHERE id = 1",
    )
    .toArray()[0];
}
