/*
 * NAME
 *   stats - the simulator's measurements: step series, time-weighted moments, percentiles
 * DESCRIPTION
 *   StepSeries records a piecewise-constant quantity (entries in flight, a window) as
 *   (time, value) change points; timeWeighted() integrates it over an interval chosen after
 *   the run, giving the time-weighted mean and standard deviation.
 *   summarize() gives nearest-rank percentiles (p50, p90, p99), the maximum and the mean of
 *   a sample. round1() and round2() round for display and JSON.
 * INVARIANTS
 *   Change points are recorded in non-decreasing time order; a value holds from its time
 *   until the next change point.
 * ERRORS
 *   record() throws if time goes backwards (a simulator bug).
 */

/** Time-weighted mean and standard deviation of a step function over an interval. */
export interface TimeWeighted {
  mean: number;
  stddev: number;
  /** Length of the interval actually integrated (seconds). */
  spanSec: number;
}

/** A piecewise-constant quantity over simulated time. */
export class StepSeries {
  private readonly times: number[] = [];
  private readonly values: number[] = [];

  /** Records that the quantity is `value` from time `at` on. */
  record(at: number, value: number): void {
    const n = this.times.length;
    const lastAt = this.times[n - 1];
    if (lastAt !== undefined && at < lastAt) throw new Error(`StepSeries: time went back from ${lastAt} to ${at}`);
    if (n > 0 && this.values[n - 1] === value) return;
    if (lastAt === at) this.values[n - 1] = value;
    else {
      this.times.push(at);
      this.values.push(value);
    }
  }

  /** Time-weighted mean and standard deviation over [from, to]. */
  timeWeighted(from: number, to: number): TimeWeighted {
    let sum = 0;
    let sumSq = 0;
    let span = 0;
    for (let i = 0; i < this.times.length; i++) {
      const start = Math.max(this.times[i]!, from);
      const end = Math.min(this.times[i + 1] ?? to, to);
      if (end <= start) continue;
      const v = this.values[i]!;
      const dt = end - start;
      sum += v * dt;
      sumSq += v * v * dt;
      span += dt;
    }
    if (span === 0) return { mean: 0, stddev: 0, spanSec: 0 };
    const mean = sum / span;
    return { mean, stddev: Math.sqrt(Math.max(0, sumSq / span - mean * mean)), spanSec: span };
  }
}

/** Percentile summary of a sample. */
export interface Summary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentile of an ascending sample (p in (0, 100]). */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1]!;
}

/** Summarises a sample: p50, p90, p99, max, mean. */
export function summarize(sample: readonly number[]): Summary {
  const sorted = [...sample].sort((a, b) => a - b);
  const mean = sorted.reduce((s, v) => s + v, 0) / (sorted.length || 1);
  return {
    n: sorted.length,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted[sorted.length - 1] ?? NaN,
    mean,
  };
}

/** Rounds to one decimal. */
export function round1(x: number): number {
  return Math.round(x * 10) / 10;
}

/** Rounds to two decimals. */
export function round2(x: number): number {
  return Math.round(x * 100) / 100;
}
