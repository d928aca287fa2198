/**
 * The Transport DO journal's sizes and the shape of a ring row (journal.ts).
 *
 * DESCRIPTION
 *   CHUNK_CHARS            characters per snapshot chunk, below the 2 MB value limit: a snapshot of
 *                          up to CHUNK_CHARS is kept in snapshot_meta, a larger one in chunks.
 *   RING                   slots of the journal ring by default (the Transport DO passes
 *                          TRANSPORT_JOURNAL_RING's).
 *   SMALL_SNAPSHOT_CHARS   up to this size a snapshot is written every checkpointEvery commands, a
 *                          larger one once the journal since has grown to half its size. A
 *                          snapshot is the whole core, so with a large backlog (100,000 messages:
 *                          about 28 M characters and a quarter of a second to serialise) a fixed
 *                          interval would make every command's share of it grow with the backlog;
 *                          tied to the journal's volume, it stays a constant share.
 *   TINY_SNAPSHOT_CHARS    a core at most this size is snapshotted at every flush, by default
 *                          (the Transport DO passes TRANSPORT_TINY_SNAPSHOT_CHARS's).
 *   Row                    a ring row: the commands of one flush, with its hand-off marks.
 */
import type { Command } from "../core";

/** Characters per snapshot chunk: 500k UTF-16 units stay under 2 MB of UTF-8. */
export const CHUNK_CHARS = 500_000;

/** Slots of the journal ring by default: the most flushes between two checkpoints, and so the most rows replayed at load. */
export const RING = 16384;

/** A snapshot up to this size is written every checkpointEvery commands; a larger one once the journal has half its size. */
export const SMALL_SNAPSHOT_CHARS = 1_000_000;

/** A core whose snapshot is at most this size is snapshotted at every flush instead of journaled, by default. */
export const TINY_SNAPSHOT_CHARS = 65_536;

/** A ring row: the commands of one flush (an array, as before hand-off marks), or with marks: entries handed over (`s`) and hand-offs that returned (`ok`). */
export type Row = Command[] | { c: Command[]; s?: number[]; ok?: number[] };
