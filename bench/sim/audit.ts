/*
 * NAME
 *   audit - invariant violations and counters of one simulation run
 * DESCRIPTION
 *   Audit collects what the simulator's cheap checks find while it drives the core:
 *   violate() records a broken invariant (the run is then reported as failed, and the CLI
 *   exits non-zero); count() keeps named counters (effects seen, destination events). Each
 *   kind of problem keeps its first few messages and a total, so a systematic failure cannot
 *   flood memory or the terminal.
 * INVARIANTS
 *   ok is true iff no violation was recorded.
 * ERRORS
 *   None.
 */

const KEEP = 5;

/** A problem class: total count and the first few descriptions. */
export interface ProblemLog {
  total: number;
  samples: string[];
}

/** Findings of one run. */
export class Audit {
  readonly violations = new Map<string, ProblemLog>();
  readonly counters = new Map<string, number>();

  /** True iff no invariant was violated. */
  get ok(): boolean {
    return this.violations.size === 0;
  }

  /** Records a broken invariant of kind `kind`. */
  violate(kind: string, detail: string): void {
    note(this.violations, kind, detail);
  }

  /** Adds `n` to counter `name`. */
  count(name: string, n = 1): void {
    this.counters.set(name, (this.counters.get(name) ?? 0) + n);
  }

  /** One line per violation kind, for printing. */
  describeViolations(): string[] {
    return describe(this.violations);
  }
}

function note(log: Map<string, ProblemLog>, kind: string, detail: string): void {
  let p = log.get(kind);
  if (!p) {
    p = { total: 0, samples: [] };
    log.set(kind, p);
  }
  p.total += 1;
  if (p.samples.length < KEEP) p.samples.push(detail);
}

function describe(log: Map<string, ProblemLog>): string[] {
  return [...log].map(([kind, p]) => `${kind}: ${p.total}× (e.g. ${p.samples.join("; ")})`);
}
