/**
 * An exponentially weighted moving average of samples (durations, say): what is typical lately,
 * to decide whether waiting for the next event pays (a batching window that opens only when it
 * is likely to catch something, as Nagle's rule does for TCP).
 *
 * DESCRIPTION
 *   new Ewma(weight = 0.2)
 *   add(x)     takes a sample.
 *   value()    the average; Infinity before the first sample.
 *
 * INVARIANTS
 *   Pure; memory O(1). The first sample is the average as it is.
 */
export class Ewma {
  private avg = Number.POSITIVE_INFINITY;

  constructor(private readonly weight = 0.2) {}

  add(x: number): void {
    this.avg = Number.isFinite(this.avg) ? this.avg + this.weight * (x - this.avg) : x;
  }

  value(): number {
    return this.avg;
  }
}
