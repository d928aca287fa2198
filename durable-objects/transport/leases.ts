/**
 * The Transport DO's delivery leases, kept in memory: which dispatched entries the deliver
 * consumer may still report, and until when.
 *
 * DESCRIPTION
 *   Leases.restore(sql, legacy, inFlight, fallback, slack, unsure?, checkedAt?)  after a start: the leases
 *                     of the version-1 table (storage/delivery-state.ts takeLegacyLeases), and for
 *                     every other entry the core has in flight (restored from the journal) a lease
 *                     until the stored horizon (or `fallback`, stored, when there is none yet);
 *                     entries in `unsure.ids` (their hand-off was not seen to return: the journal's
 *                     `unconfirmed`) only until `unsure.until` as the first start that found
 *                     them stored it (unsureUntil), unless picked up first. Each counts as last
 *                     checked at `checkedAt` (ms; now by default).
 *   pickedUp(ids)     a consumer holds these entries' jobs: an unsure lease becomes a full one
 *                     (returns the entries that were unsure, for the journal's handedOver).
 *   add(entries, until)   leases entries whose jobs the deliver queue took (cover() first).
 *   cover(until)      moves the stored horizon past `until` (to until + slack) when it is not
 *                     already there: one row write per `slack` seconds of dispatching at most.
 *   take(entryId)     ends a lease (the entry is reported); its core message id, or null.
 *   has(entryId)      whether the entry is leased; size: how many are.
 *   expired(now)      entries whose lease ran out (at most 500, oldest first).
 *   nextUntil()       the earliest lease deadline, or null.
 *   unconfirmed(nowMs, ageMs)  entries given, restored or last confirmed at least `ageMs` ago
 *                     (at most 500): the ones to ask their delivery agent about.
 *   confirm(ids, nowMs)  their agent still holds them: the age starts again.
 *   nextCheck(ageMs)  when the oldest lease comes due for unconfirmed() (unix s), rounded up to a
 *                     multiple of ageMs: under steady traffic the alarm it sets moves once per
 *                     ageMs, not with every report. Null without leases.
 *   list()            every lease (inspection and tests).
 *   inFlightTimes()   how long the last RECENT_REPORTS reported entries were leased, from their
 *                     dispatch (add, `nowMs`) to their report (take, `nowMs`): count, mean, p50,
 *                     p99, max in ms, and the most entries leased at once at any of those
 *                     reports (against process_limit), or null before the first. Leases
 *                     restored after a start have no dispatch time and are not counted.
 *
 * Why not rows: a lease row was one insert and one delete per delivery (2 of a message's ~33
 * rows written). A lease only says when an unreported entry counts as crashed. The entries
 * themselves are durable in the core's journal, so after a start each entry in flight is leased
 * until the horizon: a time no lease given before the stop runs past, kept in one row. The
 * horizon is fixed in storage, not taken from the clock at the start: an object that is evicted
 * and started again and again (its alarm, a probe) must not push its restored leases further each
 * time, or an entry whose job was lost would never be crashed and retried. An entry whose agent
 * is gone is retried at most `slack` seconds later than its own lease (with DELIVERY "agents"
 * the agents are asked much sooner). An entry whose hand-off the object never saw return (it
 * stopped inside sendBatch: the journal's `unconfirmed`) may have no job anywhere, and would hold
 * a slot of its destination's window all that time: it is restored `unsure`, with a short lease
 * that becomes a full one when a deliver consumer asks about it (pickedUp). That lease's end is
 * stored too, by the first start that finds the entry (the `unsure_horizon` row, written only
 * then), for the same reason as the horizon. Nothing is lost
 * either way, and a job that does arrive after its entry was crashed finds it no longer leased
 * and is not sent.
 *
 * INVARIANTS
 *   Every entry the core has in flight is leased (or being sent); entries are at most
 *   process_limit, so every operation here is bounded by it. No lease given since the stored
 *   horizon was last moved runs past it.
 */
import type { InFlightTimes } from "../../worker/model/transport";

export interface Lease {
  coreId: string;
  until: number;
  /** When it was given (ms), for inFlightTimes(); unknown for a lease restored after a start. */
  since?: number;
  /** When it was given, restored or last confirmed by its agent (ms): unconfirmed() counts from here. */
  checked: number;
  /** Restored with a hand-off not seen to return: short until a consumer picks the job up (pickedUp). */
  unsure?: true;
}

/** How many reports inFlightTimes() looks back over. */
export const RECENT_REPORTS = 1024;

export class Leases {
  private readonly byEntry = new Map<number, Lease>();
  /** A ring of the last RECENT_REPORTS dispatch-to-report times, ms; `held` counts every one recorded. */
  private readonly recent = new Float64Array(RECENT_REPORTS);
  /** Entries leased when each of those reports came (it included). */
  private readonly leased = new Uint32Array(RECENT_REPORTS);
  private held = 0;

  private constructor(
    private readonly sql: SqlStorage,
    private horizon: number | null,
    private readonly slack: number,
  ) {}

  static restore(
    sql: SqlStorage,
    legacy: Iterable<[number, { coreId: string; until: number }]>,
    inFlight: Iterable<[number, string]>,
    fallback: number,
    slack: number,
    unsure: { ids: ReadonlySet<number>; until: number } | null = null,
    checkedAt = Date.now(),
  ): Leases {
    sql.exec(
      "CREATE TABLE IF NOT EXISTS lease_horizon (id INTEGER PRIMARY KEY CHECK (id = 0), until INTEGER NOT NULL)",
    );
    const row = sql.exec<{ until: number }>("SELECT until FROM lease_horizon WHERE id = 0").toArray()[0];
    const l = new Leases(sql, row?.until ?? null, slack);
    for (const [entryId, lease] of legacy) l.byEntry.set(entryId, { ...lease, checked: checkedAt });
    const entries = [...inFlight];
    const cut = new Set(unsure === null ? [] : entries.map(([id]) => id).filter((id) => unsure.ids.has(id)));
    const short = unsure === null ? 0 : unsureUntil(sql, cut, unsure.until);
    for (const [entryId, coreId] of entries) {
      if (l.byEntry.has(entryId)) continue;
      if (l.horizon === null) l.store(fallback);
      const until = cut.has(entryId) ? Math.min(short, l.horizon!) : l.horizon!;
      l.byEntry.set(entryId, {
        coreId,
        until,
        checked: checkedAt,
        ...(until < l.horizon! ? { unsure: true as const } : {}),
      });
    }
    return l;
  }

  pickedUp(entryIds: readonly number[]): number[] {
    const upgraded: number[] = [];
    for (const id of entryIds) {
      const l = this.byEntry.get(id);
      if (!l?.unsure) continue;
      delete l.unsure;
      l.until = this.horizon ?? l.until;
      upgraded.push(id);
    }
    return upgraded;
  }

  cover(until: number): void {
    if (this.horizon === null || this.horizon < until) this.store(until + this.slack);
  }

  add(entries: readonly { entryId: number; messageId: string }[], until: number, nowMs?: number): void {
    if (entries.length > 0) this.cover(until);
    for (const e of entries)
      this.byEntry.set(e.entryId, {
        coreId: e.messageId,
        until,
        checked: nowMs ?? Date.now(),
        ...(nowMs !== undefined ? { since: nowMs } : {}),
      });
  }

  private store(horizon: number): void {
    this.horizon = horizon;
    this.sql.exec(
      "INSERT INTO lease_horizon (id, until) VALUES (0, ?) ON CONFLICT (id) DO UPDATE SET until = excluded.until",
      horizon,
    );
  }

  take(entryId: number, nowMs?: number): string | null {
    const l = this.byEntry.get(entryId);
    if (!l) return null;
    this.byEntry.delete(entryId);
    if (l.since !== undefined && nowMs !== undefined) {
      this.leased[this.held % RECENT_REPORTS] = this.byEntry.size + 1;
      this.recent[this.held++ % RECENT_REPORTS] = Math.max(0, nowMs - l.since);
    }
    return l.coreId;
  }

  inFlightTimes(): InFlightTimes | null {
    const n = Math.min(this.held, RECENT_REPORTS);
    if (n === 0) return null;
    const xs = [...this.recent.subarray(0, n)].sort((a, b) => a - b);
    const at = (q: number) => xs[Math.min(n - 1, Math.ceil(q * n) - 1)]!;
    const peak = this.leased.subarray(0, n).reduce((a, x) => Math.max(a, x), 0);
    return {
      reports: n,
      mean_ms: Math.round(xs.reduce((a, x) => a + x, 0) / n),
      p50_ms: at(0.5),
      p99_ms: at(0.99),
      max_ms: xs[n - 1]!,
      peak_in_flight: peak,
    };
  }

  has(entryId: number): boolean {
    return this.byEntry.has(entryId);
  }

  /** Entries leased now. */
  get size(): number {
    return this.byEntry.size;
  }

  expired(now: number): number[] {
    return [...this.byEntry]
      .filter(([, l]) => l.until <= now)
      .sort((a, b) => a[1].until - b[1].until)
      .slice(0, 500)
      .map(([id]) => id);
  }

  nextUntil(): number | null {
    let min: number | null = null;
    for (const l of this.byEntry.values()) if (min === null || l.until < min) min = l.until;
    return min;
  }

  unconfirmed(nowMs: number, ageMs: number): number[] {
    return [...this.byEntry]
      .filter(([, l]) => l.checked + ageMs <= nowMs)
      .sort((a, b) => a[1].checked - b[1].checked)
      .slice(0, 500)
      .map(([id]) => id);
  }

  confirm(entryIds: readonly number[], nowMs: number): void {
    for (const id of entryIds) {
      const l = this.byEntry.get(id);
      if (l) l.checked = nowMs;
    }
  }

  nextCheck(ageMs: number): number | null {
    let min: number | null = null;
    for (const l of this.byEntry.values()) if (min === null || l.checked < min) min = l.checked;
    return min === null ? null : (Math.ceil((min + ageMs) / ageMs) * ageMs) / 1000;
  }

  list(): { entryId: number; coreId: string; until: number; checked: number }[] {
    return [...this.byEntry].map(([entryId, l]) => ({ entryId, coreId: l.coreId, until: l.until, checked: l.checked }));
  }
}

/**
 * Until when the entries in flight whose hand-off was cut short (`ids`) are leased: `proposed`
 * at the first start that finds them, and that same time at every later start that finds any of
 * them again. Counted from each start, restarts more often than that would move it every time,
 * and the entries would hold their destination's window until the horizon. Entry ids are never
 * reused, so a stored time for other entries is replaced. One row write at a start with such
 * entries; no statement otherwise.
 */
function unsureUntil(sql: SqlStorage, ids: ReadonlySet<number>, proposed: number): number {
  if (ids.size === 0) return proposed;
  sql.exec(
    "CREATE TABLE IF NOT EXISTS unsure_horizon (id INTEGER PRIMARY KEY CHECK (id = 0), until INTEGER NOT NULL, ids TEXT NOT NULL)",
  );
  const row = sql
    .exec<{ until: number; ids: string }>("SELECT until, ids FROM unsure_horizon WHERE id = 0")
    .toArray()[0];
  if (row && (JSON.parse(row.ids) as number[]).some((id) => ids.has(id))) return row.until;
  sql.exec(
    "INSERT INTO unsure_horizon (id, until, ids) VALUES (0, ?1, ?2) ON CONFLICT (id) DO UPDATE SET until = ?1, ids = ?2",
    proposed,
    JSON.stringify([...ids]),
  );
  return proposed;
}
