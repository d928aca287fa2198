/**
 * The Transport DO's delivery leases, kept in memory: which dispatched entries the deliver
 * consumer may still report, and until when.
 *
 * DESCRIPTION
 *   Leases.restore(legacy, inFlight, until)  after a start: the leases of the version-1 table
 *                     (storage/delivery-state.ts takeLegacyLeases), and a fresh one until `until`
 *                     for every other entry the core has in flight (restored from the journal).
 *   add(entries, until)   leases entries whose jobs the deliver queue took.
 *   take(entryId)     ends a lease (the entry is reported); its core message id, or null.
 *   has(entryId)      whether the entry is leased.
 *   expired(now)      entries whose lease ran out (at most 500, oldest first).
 *   nextUntil()       the earliest lease deadline, or null.
 *   list()            every lease (inspection and tests).
 *
 * Why not rows: a lease row was one insert and one delete per delivery (2 of a message's ~33
 * rows written). A lease only says when an unreported entry counts as crashed. The entries
 * themselves are durable in the core's journal, so after a restart each entry in flight is simply
 * leased anew: one whose agent is gone is retried a lease later than it would have been, and one
 * whose job never reached the queue (the object stopped inside sendBatch) too, instead of at once.
 * Nothing is lost either way.
 *
 * INVARIANTS
 *   Every entry the core has in flight is leased (or being sent); entries are at most
 *   process_limit, so every operation here is bounded by it.
 */

export interface Lease {
  coreId: string;
  until: number;
}

export class Leases {
  private readonly byEntry = new Map<number, Lease>();

  static restore(legacy: Iterable<[number, Lease]>, inFlight: Iterable<[number, string]>, until: number): Leases {
    const l = new Leases();
    for (const [entryId, lease] of legacy) l.byEntry.set(entryId, lease);
    for (const [entryId, coreId] of inFlight) if (!l.byEntry.has(entryId)) l.byEntry.set(entryId, { coreId, until });
    return l;
  }

  add(entries: readonly { entryId: number; messageId: string }[], until: number): void {
    for (const e of entries) this.byEntry.set(e.entryId, { coreId: e.messageId, until });
  }

  take(entryId: number): string | null {
    const l = this.byEntry.get(entryId);
    if (!l) return null;
    this.byEntry.delete(entryId);
    return l.coreId;
  }

  has(entryId: number): boolean {
    return this.byEntry.has(entryId);
  }

  expired(now: number): number[] {
    return [...this.byEntry].filter(([, l]) => l.until <= now).sort((a, b) => a[1].until - b[1].until).slice(0, 500).map(([id]) => id);
  }

  nextUntil(): number | null {
    let min: number | null = null;
    for (const l of this.byEntry.values()) if (min === null || l.until < min) min = l.until;
    return min;
  }

  list(): { entryId: number; coreId: string; until: number }[] {
    return [...this.byEntry].map(([entryId, l]) => ({ entryId, ...l }));
  }
}
