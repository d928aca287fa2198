/**
 * The mean interval between events, as an exponentially weighted moving average: how often
 * something happens lately, to decide whether waiting for the next one pays (a batching window
 * that opens only under load, as Nagle's rule does for TCP).
 *
 * DESCRIPTION
 *   new IntervalMean(weight = 0.2, idleMs = 1000)
 *   note(nowMs)   an event happened at nowMs.
 *   mean(nowMs)   the weighted mean interval, ms; the time since the last event counts once it is
 *                 longer than the mean (a quiet spell raises it at once); Infinity before two events
 *                 or after idleMs without one.
 *
 * INVARIANTS
 *   Pure: time comes from the caller. Memory O(1).
 */
export class IntervalMean {
  private last: number | null = null;
  private avg = Number.POSITIVE_INFINITY;

  constructor(private readonly weight = 0.2, private readonly idleMs = 1000) {}

  note(nowMs: number): void {
    if (this.last !== null) {
      const gap = Math.max(0, nowMs - this.last);
      if (gap >= this.idleMs) this.avg = Number.POSITIVE_INFINITY; // a quiet spell: start afresh
      else this.avg = Number.isFinite(this.avg) ? this.avg + this.weight * (gap - this.avg) : gap;
    }
    this.last = nowMs;
  }

  mean(nowMs: number): number {
    if (this.last === null) return Number.POSITIVE_INFINITY;
    const since = nowMs - this.last;
    if (since >= this.idleMs) return Number.POSITIVE_INFINITY;
    return Math.max(this.avg, since);
  }
}
