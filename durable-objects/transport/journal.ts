/**
 * The Transport DO's durable state as a snapshot plus a journal of commands.
 *
 * The scheduling core is deterministic, so instead of rewriting its whole state on every call the
 * shell journals the commands it ran (a few hundred bytes each), and now and then writes a
 * snapshot (split into chunks below the 2 MB value limit): after `checkpointEvery` commands while
 * the snapshot is small (at most SMALL_SNAPSHOT_CHARS), and once the journal since the last
 * snapshot has grown to half the snapshot's size when it is larger (why: journal-sizes.ts). After
 * an eviction or a crash, load() restores the newest snapshot and replays the journal rows
 * written after it. The recipient backlog the core reads from must stay unchanged for replay:
 * rows of finished messages are deleted only at a checkpoint (see onCheckpoint).
 *
 * Rows are billed one by one, so run() only buffers a command and flush() writes everything
 * buffered as ONE row (a JSON array). The shell flushes before every await and at the end of
 * every call: a Durable Object commits its writes when it next awaits, so the row lands in the
 * same commit as the state change and everything else the call wrote, exactly as a row per
 * command would. Commands that change nothing (core runJournaled) are not journaled at all.
 *
 * The journal is a ring of `ring` slots (slot = seq mod ring, RING by default): a flush
 * overwrites the slot's old row, which is one row written, where an insert and a later delete
 * were two. Rows at or below the snapshot's seq are dead and skipped by load(); fewer than
 * `ring` flushes happen between two checkpoints (one is forced before), so a live row is never
 * overwritten. Rows written with another ring size (an upgrade) are folded into a snapshot at
 * load. settle(q, true) empties the ring when finished messages' records are forgotten while the
 * transport is idle, so no command naming a finished message outlives its records.
 *
 * A small core (its last snapshot at most `tinyChars`, TRANSPORT_TINY_SNAPSHOT_CHARS) is not
 * journaled: every flush writes a snapshot instead, in the snapshot_meta row itself (one row, as
 * a ring row is, and none to delete later), with its messages' admission records (admissions.ts;
 * a ring row is written only once every record is a row). Mail that comes one message at a time
 * leaves no journal behind.
 *
 * Hand-offs: the shell journals a dispatch before it hands the entries over (the deliver queue,
 * the agents), so an entry is never delivered without being on record; but a stop inside the
 * hand-off leaves entries on record whose jobs may never have left. flush(q, sending) marks the
 * row with those entries, handedOver(ids) notes that the hand-off returned, and that note rides
 * in the next row written anyway (no row of its own); a checkpoint stores the hand-offs still
 * outstanding with the snapshot, and a flush that hands entries over writes a row, not a due
 * checkpoint (unless the ring forces one). After load(), `unconfirmed` holds the entries whose
 * hand-off was not seen to return: the shell gives those a short lease instead of a full one.
 */
import {
  createQmgr,
  restoreQmgr,
  runCommand,
  runJournaled,
  snapshotQmgr,
  type Command,
  type Qmgr,
  type QmgrSnapshot,
  type RecipientSource,
  type ResolvedRecipient,
  type SchedulerConfig,
} from "../core";
import { emptyRing, migrateJournal, readSnapshotMeta } from "./journal-schema";
import { admissionsOf } from "./admissions";
import { CHUNK_CHARS, RING, SMALL_SNAPSHOT_CHARS, TINY_SNAPSHOT_CHARS, type Row } from "./journal-sizes";

/** A journal bound to one DO's SQLite. */
export class Journal<R extends ResolvedRecipient> {
  private seq = 0;
  private sinceCheckpoint = 0;
  /** Rows the ring holds (live or dead). */
  private ringRows = 0;
  /** Commands run since the last flush, not yet stored. */
  private buffered: Command[] = [];
  /** Entries being handed over, not yet seen to return; and the marks for the next row. */
  private readonly outstanding = new Set<number>();
  private marks: { s: number[]; ok: number[] } = { s: [], ok: [] };
  /** After load(): entries whose hand-off was on record and never seen to return (see the header). */
  readonly unconfirmed = new Set<number>();

  /** Flushes and characters journaled since the last checkpoint, and the size of that snapshot. */
  private flushes = 0;
  private journalChars = 0;
  private snapshotChars = 0;

  /** Messages and queues (plus one) the core held at the last snapshot (tinyNow). */
  private heldAtSnapshot = 1;
  /** Chunk rows the stored snapshot uses (0: it is kept in snapshot_meta), so a smaller one deletes only what is there. */
  private chunks = 0;

  private readonly checkpointEvery: number;

  constructor(
    private readonly sql: SqlStorage,
    checkpointEvery = 500,
    private readonly onCheckpoint: (q: Qmgr<R>) => void = () => {},
    private readonly ring = RING,
    private readonly tinyChars = TINY_SNAPSHOT_CHARS,
  ) {
    this.checkpointEvery = Math.max(1, checkpointEvery);
  }

  /** Restores the newest snapshot and replays the journal after it. */
  load(cfg: SchedulerConfig, source: RecipientSource<R>): Qmgr<R> {
    migrateJournal(this.sql);
    const meta = readSnapshotMeta(this.sql);
    admissionsOf(this.sql).load(this.sql, meta?.admissions ?? null);
    for (const id of JSON.parse(meta?.sending ?? "[]") as number[]) this.unconfirmed.add(id);
    let q: Qmgr<R>;
    if (meta) {
      const parts =
        meta.data !== null
          ? [{ data: meta.data }]
          : this.sql
              .exec<{ data: string }>("SELECT data FROM snapshot_chunk WHERE part < ? ORDER BY part", meta.parts)
              .toArray();
      this.chunks = meta.data !== null ? 0 : meta.parts;
      const text = parts.map((p) => p.data).join("");
      this.snapshotChars = text.length;
      q = restoreQmgr(JSON.parse(text) as QmgrSnapshot<R>, cfg, source);
      this.heldAtSnapshot = q.messages.size + q.queueCount + 1;
      this.seq = meta.seq;
    } else {
      q = createQmgr(cfg, source);
    }
    const legacy =
      this.sql
        .exec<{ n: number }>("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'journal'")
        .one().n > 0;
    const rows = this.sql
      .exec<{ slot: number; seq: number; cmd: string }>(
        legacy
          ? "SELECT -1 AS slot, seq, cmd FROM journal WHERE seq > ?1 UNION ALL SELECT slot, seq, cmd FROM journal_ring WHERE seq > ?1 ORDER BY seq"
          : "SELECT slot, seq, cmd FROM journal_ring WHERE seq > ?1 ORDER BY seq",
        this.seq,
      )
      .toArray();
    this.ringRows = this.sql.exec<{ n: number }>("SELECT count(*) AS n FROM journal_ring").one().n;
    for (const row of rows) {
      // A row is one command (version 1's first rows) or the array of commands one flush wrote.
      const parsed = JSON.parse(row.cmd) as Command | Row;
      const marked = !Array.isArray(parsed) && "c" in parsed ? parsed : null;
      for (const id of marked?.s ?? []) this.unconfirmed.add(id);
      for (const id of marked?.ok ?? []) this.unconfirmed.delete(id);
      for (const c of marked ? marked.c : Array.isArray(parsed) ? parsed : [parsed as Command]) {
        runCommand(q, c);
        this.sinceCheckpoint += 1;
      }
      this.seq = row.seq;
      this.flushes += 1;
      this.journalChars += row.cmd.length;
    }
    // Still unconfirmed and in flight: kept through this life's checkpoints until picked up or done.
    for (const id of this.unconfirmed) if (q.busy.has(id)) this.outstanding.add(id);
    // Rows written with another ring size could be overwritten by this one's slots: fold them in now.
    if (!legacy && rows.some((r) => r.slot !== r.seq % this.ring)) this.checkpoint(q);
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

  /**
   * Writes the buffered commands as one journal row, or a checkpoint when one is due (and no
   * entries are `sending`, unless the ring forces it); `sending`: entries about to be handed over.
   */
  flush(q: Qmgr<R>, sending: readonly number[] = []): void {
    for (const id of sending) this.outstanding.add(id);
    this.marks.s.push(...sending);
    if (this.buffered.length === 0) return;
    const due = this.checkpointDue();
    // A tiny core's snapshot is one row, as a journal row is (see the header).
    if (due === "forced" || (due && sending.length === 0) || this.tinyNow(q)) {
      this.checkpoint(q);
      return;
    }
    // A ring row's replay reads the admission records of what it names: none may be only in memory.
    admissionsOf(this.sql).materialize(this.sql);
    this.seq += 1;
    const { s, ok } = this.marks;
    const cmd = JSON.stringify(
      s.length + ok.length === 0
        ? this.buffered
        : ({ c: this.buffered, ...(s.length > 0 ? { s } : {}), ...(ok.length > 0 ? { ok } : {}) } satisfies Row),
    );
    this.marks = { s: [], ok: [] };
    this.sql.exec(
      "INSERT INTO journal_ring (slot, seq, cmd) VALUES (?1, ?2, ?3) ON CONFLICT (slot) DO UPDATE SET seq = ?2, cmd = ?3",
      this.seq % this.ring,
      this.seq,
      cmd,
    );
    this.buffered = [];
    this.ringRows = Math.min(this.ring, this.ringRows + 1);
    this.flushes += 1;
    this.journalChars += cmd.length;
  }

  /** Whether every command buffered since the last flush is a delivery report (and there is one). */
  onlyReports(): boolean {
    return this.buffered.length > 0 && this.buffered.every((c) => c.kind === "report");
  }

  /** The hand-off of these entries returned (or, after a start, a consumer asked about their jobs): noted in the next row written (see the header). */
  handedOver(entryIds: readonly number[]): void {
    for (const id of entryIds) if (this.outstanding.delete(id)) this.marks.ok.push(id);
  }

  /**
   * Whether the core's snapshot would be tiny now: the last snapshot's size scaled by the
   * messages and queues held now against then (no serialisation to find out).
   */
  private tinyNow(q: Qmgr<R>): boolean {
    if (this.tinyChars === 0) return false;
    const held = q.messages.size + q.queueCount + 1;
    return (this.snapshotChars * held) / this.heldAtSnapshot <= this.tinyChars;
  }

  /** Whether the next flush is a checkpoint instead (see the header); "forced" when the ring would wrap. */
  private checkpointDue(): boolean | "forced" {
    if (this.flushes >= this.ring - 1) return "forced";
    if (this.sinceCheckpoint < this.checkpointEvery) return false;
    return this.snapshotChars <= SMALL_SNAPSHOT_CHARS || this.journalChars * 2 >= this.snapshotChars;
  }

  /** Writes a snapshot at the current state (buffered commands included); the ring rows it covers are dead from then on. */
  checkpoint(q: Qmgr<R>): void {
    this.buffered = [];
    const text = JSON.stringify(snapshotQmgr(q));
    // One chunk: in the meta row itself (parts 0). More: each part rewritten in place (one row
    // written; a delete and an insert were two). Then the chunk rows past the new last, if any.
    const parts = text.length <= CHUNK_CHARS ? 0 : Math.ceil(text.length / CHUNK_CHARS);
    for (let i = 0; i < parts; i++) {
      const data = text.slice(i * CHUNK_CHARS, (i + 1) * CHUNK_CHARS);
      this.sql.exec(
        "INSERT INTO snapshot_chunk (part, data) VALUES (?1, ?2) ON CONFLICT (part) DO UPDATE SET data = ?2",
        i,
        data,
      );
    }
    if (this.chunks > parts) this.sql.exec("DELETE FROM snapshot_chunk WHERE part >= ?", parts);
    this.chunks = parts;
    for (const id of this.outstanding) if (!q.busy.has(id)) this.outstanding.delete(id); // reported, crashed or never dispatched
    this.sql.exec(
      "INSERT INTO snapshot_meta (id, seq, parts, sending, data, admissions) VALUES (1, ?1, ?2, ?3, ?4, ?5) " +
        "ON CONFLICT (id) DO UPDATE SET seq = ?1, parts = ?2, sending = ?3, data = ?4, admissions = ?5",
      this.seq,
      parts,
      this.outstanding.size > 0 ? JSON.stringify([...this.outstanding]) : null,
      parts === 0 ? text : null,
      admissionsOf(this.sql).stored(),
    );
    this.marks = { s: [], ok: [] };
    this.sinceCheckpoint = 0;
    this.flushes = 0;
    this.journalChars = 0;
    this.snapshotChars = text.length;
    this.heldAtSnapshot = q.messages.size + q.queueCount + 1;
    this.onCheckpoint(q);
  }

  /**
   * Makes the stored snapshot the current state: a checkpoint when commands came after the last
   * one (else onCheckpoint alone: what it forgets is in no live ring row) or a record it held was
   * forgotten; `idle`, empties the ring too (its dead rows would only keep finished messages' ids).
   */
  settle(q: Qmgr<R>, idle: boolean): void {
    if (this.sinceCheckpoint > 0 || this.buffered.length > 0) this.checkpoint(q);
    else this.onCheckpoint(q);
    if (admissionsOf(this.sql).stale) this.checkpoint(q); // where the records' rows were deleted
    if (idle && this.ringRows > 0) emptyRing(this.sql, this.ringRows);
    if (idle) this.ringRows = 0;
  }

  /** Whether settle(q, true) has anything to do: commands since the snapshot, or rows in the ring. */
  get dirty(): boolean {
    return this.sinceCheckpoint > 0 || this.ringRows > 0;
  }

  /** Commands journaled (or buffered) since the last checkpoint. */
  get pending(): number {
    return this.sinceCheckpoint;
  }
}
