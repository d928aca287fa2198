/**
 * The Transport DO's durable state as a snapshot plus a journal of commands.
 *
 * The scheduling core is deterministic, so instead of rewriting its whole state on every
 * call the shell journals the commands it ran (a few hundred bytes each), and every
 * `checkpointEvery` commands writes a snapshot (split into chunks below the 2 MB value limit).
 * After an eviction or a crash, load() restores the newest snapshot and replays the journal
 * rows written after it. The recipient backlog the core reads from must stay
 * unchanged for replay: rows of finished messages are deleted only at a checkpoint (see
 * onCheckpoint).
 *
 * Rows are billed one by one, so run() only buffers a command and flush() writes everything
 * buffered as ONE row (a JSON array). The shell flushes before every await and at the end of
 * every call: a Durable Object commits its writes when it next awaits, so the row lands in the
 * same commit as the state change and everything else the call wrote, exactly as a row per
 * command would. Commands that change nothing (core runJournaled) are not journaled at all.
 *
 * The journal is a ring of RING slots (slot = seq mod RING): a flush overwrites the slot's old
 * row, which is one row written, where an insert and a later delete were two. Rows at or below
 * the snapshot's seq are dead and skipped by load(); at most checkpointEvery (≤ RING) flushes
 * happen between two checkpoints, so a live row is never overwritten. clear() empties the ring
 * when the transport falls idle, so no command naming a finished message stays behind.
 */
import { createQmgr, restoreQmgr, runCommand, runJournaled, snapshotQmgr, type Command, type Qmgr, type QmgrSnapshot, type RecipientSource, type ResolvedRecipient, type SchedulerConfig } from "../core";

/** Characters per snapshot chunk: 500k UTF-16 units stay under 2 MB of UTF-8. */
const CHUNK_CHARS = 500_000;

/** Slots of the journal ring; checkpointEvery is capped at this. */
export const RING = 1024;

/** Creates the journal tables if missing (schema version 2: the ring; version 1's `journal` is read once, then dropped). */
export function migrateJournal(sql: SqlStorage): void {
  sql.exec("CREATE TABLE IF NOT EXISTS journal_ring (slot INTEGER PRIMARY KEY, seq INTEGER NOT NULL, cmd TEXT NOT NULL)");
  sql.exec("CREATE TABLE IF NOT EXISTS snapshot_chunk (part INTEGER PRIMARY KEY, data TEXT NOT NULL)");
  sql.exec("CREATE TABLE IF NOT EXISTS snapshot_meta (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL, parts INTEGER NOT NULL)");
}

/** A journal bound to one DO's SQLite. */
export class Journal<R extends ResolvedRecipient> {
  private seq = 0;
  private sinceCheckpoint = 0;
  /** Whether the ring holds rows (live or dead). */
  private ringUsed = false;
  /** Commands run since the last flush, not yet stored. */
  private buffered: Command[] = [];

  private readonly checkpointEvery: number;

  constructor(
    private readonly sql: SqlStorage,
    checkpointEvery = 500,
    private readonly onCheckpoint: (q: Qmgr<R>) => void = () => {},
  ) {
    this.checkpointEvery = Math.min(Math.max(1, checkpointEvery), RING);
  }

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
    const legacy = this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'journal'").one().n > 0;
    const rows = this.sql.exec<{ seq: number; cmd: string }>(legacy
      ? "SELECT seq, cmd FROM journal WHERE seq > ?1 UNION ALL SELECT seq, cmd FROM journal_ring WHERE seq > ?1 ORDER BY seq"
      : "SELECT seq, cmd FROM journal_ring WHERE seq > ?1 ORDER BY seq", this.seq).toArray();
    this.ringUsed = this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM (SELECT 1 FROM journal_ring LIMIT 1)").one().n > 0;
    for (const row of rows) {
      // A row is one command (version 1's first rows) or the array of commands one flush wrote.
      const parsed = JSON.parse(row.cmd) as Command | Command[];
      for (const c of Array.isArray(parsed) ? parsed : [parsed]) {
        runCommand(q, c);
        this.sinceCheckpoint += 1;
      }
      this.seq = row.seq;
    }
    if (legacy) {
      // Version 1 kept rows by seq: fold them into a snapshot once, then the ring takes over.
      this.checkpoint(q);
      this.sql.exec("DROP TABLE journal");
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
    this.sql.exec("INSERT INTO journal_ring (slot, seq, cmd) VALUES (?1, ?2, ?3) ON CONFLICT (slot) DO UPDATE SET seq = ?2, cmd = ?3",
      this.seq % RING, this.seq, JSON.stringify(this.buffered));
    this.buffered = [];
    this.ringUsed = true;
  }

  /** Writes a snapshot at the current state (buffered commands included); the ring rows it covers are dead from then on. */
  checkpoint(q: Qmgr<R>): void {
    this.buffered = [];
    const text = JSON.stringify(snapshotQmgr(q));
    const parts = Math.max(1, Math.ceil(text.length / CHUNK_CHARS));
    this.sql.exec("DELETE FROM snapshot_chunk");
    for (let i = 0; i < parts; i++) this.sql.exec("INSERT INTO snapshot_chunk (part, data) VALUES (?, ?)", i, text.slice(i * CHUNK_CHARS, (i + 1) * CHUNK_CHARS));
    this.sql.exec("INSERT OR REPLACE INTO snapshot_meta (id, seq, parts) VALUES (1, ?, ?)", this.seq, parts);
    this.sinceCheckpoint = 0;
    this.onCheckpoint(q);
  }

  /** Checkpoints and empties the ring (the transport is idle: its dead rows would only keep finished messages' ids). */
  clear(q: Qmgr<R>): void {
    this.checkpoint(q);
    if (this.ringUsed) this.sql.exec("DELETE FROM journal_ring");
    this.ringUsed = false;
  }

  /** Whether clear() has anything to do: commands since the snapshot, or rows in the ring. */
  get dirty(): boolean {
    return this.sinceCheckpoint > 0 || this.ringUsed;
  }

  /** Commands journaled (or buffered) since the last checkpoint. */
  get pending(): number {
    return this.sinceCheckpoint;
  }
}
