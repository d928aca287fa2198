/**
 * Coalesced admission of accepted messages (the accept's side of admit.ts's admitAll, from
 * intake.ts): one run admits what arrived meanwhile.
 *
 * DESCRIPTION
 *   AdmissionBatch        admission of accepted messages, coalesced only under load, by Nagle's
 *                         rule: the Outbox answers an accept once the run that admits its
 *                         messages has ended (add resolves then, failed or not), and an idle shard (no run in flight, none started within ADMIT_BATCH_MS)
 *                         admits them at once, with no timer. While a run is in flight, or one
 *                         started less than ADMIT_BATCH_MS ago, what arrives waits and goes in the
 *                         next run, one gap after the last began and not before it ended: one
 *                         admitAll (one Transport.admitMany per transport) for all of it. So an
 *                         idle relay adds no delay, and a busy shard makes at most one run per
 *                         gap, whose size grows with the load (group commit). A run takes at
 *                         most ADMIT_BATCH_MAX messages, the rest go in the next. A request that
 *                         brings ADMIT_AT_ONCE messages or more is a batch already: its run
 *                         starts at once (after one in flight). ADMIT_BATCH_MS "0": each accept
 *                         admits its own messages before it answers.
 *
 * INVARIANTS
 *   The wait only ever delays work that is already durable: a message waiting in it is stored
 *   `incoming` with its decisions. The accept stores it out of the index of waiting messages (it
 *   answers only after the admission, which the Transport DO then holds: an entry there would
 *   be a row written for nothing); a failed run puts its messages in that index (keepWaiting),
 *   and the sweeper hands them to the classify queue after OUTBOX_GRACE_SECONDS, whose consumer
 *   admits the recorded decisions. An Outbox that stops before the run ended gave no answer; the
 *   messages it stored are found by the cron's scan (unadmitted.ts) and classified likewise.
 */

/** Most messages one coalesced admission takes (the rest wait for the next run). */
export const ADMIT_BATCH_MAX = 500;

/** A request bringing this many messages or more starts a run at once (see the header). */
export const ADMIT_AT_ONCE = 10;

/** Coalesced admission of accepted messages (see the header). */
export class AdmissionBatch {
  private readonly pending = new Set<string>();
  /** Per message given to add(), the callers waiting for the run that takes it to end. */
  private readonly waiters = new Map<string, (() => void)[]>();
  private timer: ReturnType<typeof setTimeout> | null = null;
  private timerAt = 0;
  private running: Promise<void> = Promise.resolve();
  private busy = false;
  private lastStart = -Infinity;

  /** `admit` admits and indexes the given messages; it runs for one batch at a time. */
  constructor(
    private readonly gapMs: number,
    private readonly admit: (ids: string[]) => Promise<void>,
    private readonly now: () => number = Date.now,
  ) {}

  /** Messages waiting for the next run. */
  get waiting(): number {
    return this.pending.size;
  }

  /** Whether a message waits for a run or is in the one under way. */
  has(id: string): boolean {
    return this.waiters.has(id);
  }

  /** Resolves once the runs that take `ids` have ended: only for messages has() holds, or that add() takes. */
  whenDone(ids: readonly string[]): Promise<unknown> {
    return Promise.all(
      ids.map((id) => new Promise<void>((r) => this.waiters.set(id, [...(this.waiters.get(id) ?? []), r]))),
    );
  }

  /** Adds accepted messages and returns once the run that takes them has ended (see the header). */
  async add(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    if (this.gapMs === 0) {
      // Each accept's own run, before it returns; has() holds until it ends, as for a coalesced run.
      void this.whenDone(ids);
      const run = this.serially([...ids]);
      run.then(
        () => this.settle(ids),
        () => this.settle(ids),
      );
      return run;
    }
    const done = this.whenDone(ids);
    for (const id of ids) this.pending.add(id);
    const wait = ids.length >= ADMIT_AT_ONCE ? 0 : Math.max(0, this.lastStart + this.gapMs - this.now());
    // Idle (no run in flight, none started within the gap): at once, no timer.
    if (wait === 0 && !this.busy) void this.flush();
    else this.arm(wait);
    await done;
  }

  /** The run that took `ids` ended: their waiters go on. */
  private settle(ids: readonly string[]): void {
    for (const id of ids) {
      for (const r of this.waiters.get(id) ?? []) r();
      this.waiters.delete(id);
    }
  }

  /** Runs a flush `ms` from now, unless one is due sooner. */
  private arm(ms: number): void {
    const at = this.now() + ms;
    if (this.timer !== null && this.timerAt <= at) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, ms);
  }

  private async flush(): Promise<void> {
    // While a run is under way, what arrives waits and joins the next run whole (group commit): a
    // slow Transport DO makes the runs larger, not more numerous.
    await this.running;
    if (this.pending.size === 0 || this.busy) return;
    const ids = [...this.pending].slice(0, ADMIT_BATCH_MAX);
    for (const id of ids) this.pending.delete(id);
    // What was waiting goes now: a timer armed for it has no more work (what comes is re-armed from this run).
    if (this.timer !== null && this.pending.size === 0) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.busy = true;
    this.lastStart = this.now();
    try {
      await this.serially(ids);
    } catch (e) {
      console.error(
        JSON.stringify({
          error: "outbox: coalesced admission failed (the sweeper classifies them again)",
          messages: ids.length,
          detail: e instanceof Error ? e.message : String(e),
        }),
      );
    } finally {
      this.busy = false;
      this.settle(ids);
    }
    // What arrived during the run (or a full run left behind) goes one gap after this run began.
    if (this.pending.size > 0)
      this.arm(this.pending.size >= ADMIT_AT_ONCE ? 0 : Math.max(0, this.lastStart + this.gapMs - this.now()));
  }

  private serially(ids: string[]): Promise<void> {
    const run = this.running.then(() => this.admit(ids));
    this.running = run.catch(() => undefined);
    return run;
  }
}
