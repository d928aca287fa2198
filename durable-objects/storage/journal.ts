/**
 * The Transport DO's durable state as a snapshot plus a journal of commands.
 *
 * The scheduling core is deterministic, so instead of rewriting its whole state on every
 * call the shell journals the commands it ran (a few hundred bytes each), and every
 * `checkpointEvery` commands writes a snapshot (split into chunks below the 2 MB value limit)
 * and drops the journal rows it covers. After an eviction or a crash, load() restores the
 * newest snapshot and replays the journal. The recipient backlog the core reads from must stay
 * unchanged for replay: rows of finished messages are deleted only at a checkpoint (see
 * onCheckpoint).
 *
 * Rows are billed one by one, so run() only buffers a command and flush() writes everything
 * buffered as ONE row (a JSON array). The shell flushes before every await and at the end of
 * every call: a Durable Object commits its writes when it next awaits, so the row lands in the
 * same commit as the state change and everything else the call wrote, exactly as a row per
 * command would. Commands that change nothing (core runJournaled) are not journaled at all.
 */
import { createQmgr, restoreQmgr, runCommand, runJournaled, snapshotQmgr, type Command, type Qmgr, type QmgrSnapshot, type RecipientSource, type ResolvedRecipient, type SchedulerConfig } from "../core";

/** Characters per snapshot chunk: 500k UTF-16 units stay under 2 MB of UTF-8. */
const CHUNK_CHARS = 500_000;

/** Creates the journal tables if missing (schema version 1). */
export function migrateJournal(sql: SqlStorage): void {
  sql.exec("CREATE TABLE IF NOT EXISTS journal (seq INTEGER PRIMARY KEY, cmd TEXT NOT NULL)");
  sql.exec("CREATE TABLE IF NOT EXISTS snapshot_chunk (part INTEGER PRIMARY KEY, data TEXT NOT NULL)");
  sql.exec("CREATE TABLE IF NOT EXISTS snapshot_meta (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL, parts INTEGER NOT NULL)");
}

/** A journal bound to one DO's SQLite. */
export class Journal<R extends ResolvedRecipient> {
  private seq = 0;
  private sinceCheckpoint = 0;
  /** Commands run since the last flush, not yet stored. */
  private buffered: Command[] = [];

  constructor(
    private readonly sql: SqlStorage,
    private readonly checkpointEvery = 500,
    private readonly onCheckpoint: (q: Qmgr<R>) => void = () => {},
  ) {}

  /** Restores the newest snapshot and replays the journal after it. */
  load(cfg: SchedulerConfig, source: RecipientSource<R>): Qmgr<R> {
    migrateJournal(this.sql);
    const meta = this.sql.exec<{ seq: number; parts: number }>("SELECT seq, parts FROM snapshot_meta WHERE id = 1").toArray()[0];
    let q: Qmgr<R>;
    if (meta) {
      const parts = this.sql.exec<{ data: string }>("SELECT data FROM snapshot_chunk WHERE part < ? ORDER BY part", meta.parts).toArray();
      q = restoreQmgr(JSON.parse(parts.map((p) => p.data).join("")) as QmgrSnapshot<R>, cfg, source);
      this.seq = meta.seq;
    } else {
      q = createQmgr(cfg, source);
    }
    for (const row of this.sql.exec<{ seq: number; cmd: string }>("SELECT seq, cmd FROM journal WHERE seq > ? ORDER BY seq", this.seq)) {
      // A row is one command (older rows) or the array of commands one flush wrote.
      const parsed = JSON.parse(row.cmd) as Command | Command[];
      for (const c of Array.isArray(parsed) ? parsed : [parsed]) {
        runCommand(q, c);
        this.sinceCheckpoint += 1;
      }
      this.seq = row.seq;
    }
    return q;
  }

  /** Runs a command and buffers it for the journal when it changed anything; see flush(). */
  run(q: Qmgr<R>, cmd: Command) {
    const result = runJournaled(q, cmd);
    if (result.changed) {
      this.buffered.push(cmd);
      this.sinceCheckpoint += 1;
    }
    return result;
  }

  /** Writes the buffered commands as one journal row, or a checkpoint when one is due. */
  flush(q: Qmgr<R>): void {
    if (this.buffered.length === 0) return;
    if (this.sinceCheckpoint >= this.checkpointEvery) {
      this.checkpoint(q);
      return;
    }
    this.seq += 1;
    this.sql.exec("INSERT INTO journal (seq, cmd) VALUES (?, ?)", this.seq, JSON.stringify(this.buffered));
    this.buffered = [];
  }

  /** Writes a snapshot at the current state (buffered commands included) and drops the journal it covers. */
  checkpoint(q: Qmgr<R>): void {
    this.buffered = [];
    const text = JSON.stringify(snapshotQmgr(q));
    const parts = Math.max(1, Math.ceil(text.length / CHUNK_CHARS));
    this.sql.exec("DELETE FROM snapshot_chunk");
    for (let i = 0; i < parts; i++) this.sql.exec("INSERT INTO snapshot_chunk (part, data) VALUES (?, ?)", i, text.slice(i * CHUNK_CHARS, (i + 1) * CHUNK_CHARS));
    this.sql.exec("INSERT OR REPLACE INTO snapshot_meta (id, seq, parts) VALUES (1, ?, ?)", this.seq, parts);
    this.sql.exec("DELETE FROM journal WHERE seq <= ?", this.seq);
    this.sinceCheckpoint = 0;
    this.onCheckpoint(q);
  }

  /** Commands journaled (or buffered) since the last checkpoint. */
  get pending(): number {
    return this.sinceCheckpoint;
  }
}
