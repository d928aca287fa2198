/*
 * NAME
 *   ceiling - scenario "ceiling": the relay's learned session ceiling (§12.7) against servers
 *   that limit sessions, beside Postfix's feedback on the same mail
 * DESCRIPTION
 *   runCeiling() delivers 6000 recipients (one message, recipient limit 2: 3000 entries of 2 s)
 *   to one destination whose server answers 421 beyond its session limit, in three cases:
 *     fixed     5 sessions throughout;
 *     rising    5, then 10 from RISE_AT;
 *     falling   10, then 3 from RISE_AT;
 *   each twice: Postfix's feedback (default_destination_concurrency_ceiling_memory 0) and the
 *   relay's default (ceiling memory 3600 s, a probe every 2 to 4 × the limit deliveries, at most one a second). Feedback is Postfix's default
 *   (1), failed-cohort limit 0, minimal = maximal backoff 10 s. It reports 421s per delivery
 *   attempt, how long the run took, the mean concurrency, and for "rising" how long after the
 *   change the window first reached the new limit.
 * INVARIANTS
 *   Every recipient is delivered exactly once in every run (the audit).
 */
import type { SchedulerConfigInput } from "../../durable-objects/core";
import type { Audit } from "./audit";
import { DEFAULT_DESTINATION } from "./destination";
import { runSimulation, type SimMessage } from "./engine";
import { deriveSeed } from "./rng";

export const CEILING_CASES = ["fixed", "rising", "falling"] as const;
export type CeilingCase = (typeof CEILING_CASES)[number];
/** When the server's limit changes in "rising" and "falling", seconds. */
export const RISE_AT = 300;
const NEXTHOP = "limited.example";
const RECIPIENTS = 6000;

const LIMITS: Record<CeilingCase, (t: number) => number> = {
  fixed: () => 5,
  rising: (t) => (t < RISE_AT ? 5 : 10),
  falling: (t) => (t < RISE_AT ? 10 : 3),
};

export interface CeilingRun {
  case: CeilingCase;
  ceiling: boolean;
  attempts: number;
  rejected: number;
  rejectedPct: number;
  /** Seconds until the last recipient was delivered. */
  endSec: number;
  /** Entries in flight, time weighted over the run. */
  concurrencyMean: number;
  /** rising: seconds after RISE_AT until the window first reached 10 (null if never). */
  reachedNewLimitAfterSec: number | null;
  /** falling: 421s after RISE_AT + 10 s. */
  rejectedAfterChange: number;
  audit: Audit;
}

function config(ceiling: boolean): SchedulerConfigInput {
  return {
    initial_destination_concurrency: 5,
    default_destination_concurrency_limit: 20,
    default_destination_recipient_limit: 2,
    default_destination_concurrency_failed_cohort_limit: 0,
    default_destination_concurrency_ceiling_memory: ceiling ? 3600 : 0,
    default_destination_concurrency_probe_delay: 60,
    minimal_backoff_time: 10,
    maximal_backoff_time: 10,
  };
}

/** One case, with or without the ceiling. */
export function runCeilingOnce(c: CeilingCase, ceiling: boolean, seed = 1): CeilingRun {
  const rcpts = Array.from({ length: RECIPIENTS }, (_, i) => ({ address: `u${i}@${NEXTHOP}`, nexthop: NEXTHOP }));
  const messages: SimMessage[] = [{ id: "list", arriveAt: 0, rcpts }];
  const spec = { ...DEFAULT_DESTINATION, sessionLimit: 1, sessionLimitAt: LIMITS[c] };
  const r = runSimulation({
    config: config(ceiling),
    messages,
    destinationFor: () => spec,
    seed: deriveSeed(seed, 3),
    traceNexthops: [NEXTHOP],
  });
  const rejected = r.attempts.filter((a) => a.outcome === "rejected-421");
  const trace = r.traces.get(NEXTHOP)!;
  const end = r.endAt;
  let reached: number | null = null;
  if (c === "rising") {
    for (let t = RISE_AT; t <= end; t += 1) {
      if (trace.window.timeWeighted(t, t + 1).mean >= 10) {
        reached = t - RISE_AT;
        break;
      }
    }
  }
  return {
    case: c,
    ceiling,
    attempts: r.attempts.length,
    rejected: rejected.length,
    rejectedPct: (100 * rejected.length) / r.attempts.length,
    endSec: end,
    concurrencyMean: trace.inflight.timeWeighted(0, end).mean,
    reachedNewLimitAfterSec: reached,
    rejectedAfterChange: rejected.filter((a) => a.startAt >= RISE_AT + 10).length,
    audit: r.audit,
  };
}

/** Every case, Postfix's feedback then the ceiling. */
export function runCeiling(seed = 1): CeilingRun[] {
  return CEILING_CASES.flatMap((c) => [runCeilingOnce(c, false, seed), runCeilingOnce(c, true, seed)]);
}

/** The human table. */
export function formatCeiling(runs: readonly CeilingRun[]): string[] {
  const out = [
    "== ceiling: the learned session ceiling (relay §12.7) against servers that limit sessions ==",
    `${RECIPIENTS} recipients in one message, recipient limit 2, 1 s per recipient; feedback 1 (Postfix's default); backoff 10 s;`,
    `fixed: 5 sessions; rising: 5, then 10 from t=${RISE_AT} s; falling: 10, then 3 from t=${RISE_AT} s.`,
    "",
    "case     feedback        attempts   421s  421 %   run s  conc mean  after the change",
  ];
  for (const r of runs) {
    const after =
      r.case === "rising"
        ? `window 10 after ${r.reachedNewLimitAfterSec ?? "never"} s`
        : r.case === "falling"
          ? `${r.rejectedAfterChange} 421s from t=${RISE_AT + 10} s`
          : "";
    out.push(
      `${r.case.padEnd(8)} ${(r.ceiling ? "with ceiling" : "Postfix").padEnd(14)} ` +
        `${String(r.attempts).padStart(9)} ${String(r.rejected).padStart(6)} ` +
        `${r.rejectedPct.toFixed(1).padStart(6)} ${r.endSec.toFixed(0).padStart(7)} ` +
        `${r.concurrencyMean.toFixed(2).padStart(10)}  ${after}`,
    );
  }
  return out;
}

/** The JSON line. */
export function ceilingJson(runs: readonly CeilingRun[]): object {
  return {
    scenario: "ceiling",
    results: runs.map((r) => ({
      case: r.case,
      ceiling: r.ceiling,
      attempts: r.attempts,
      rejected_pct: Number(r.rejectedPct.toFixed(2)),
      run_s: Math.round(r.endSec),
      concurrency_mean: Number(r.concurrencyMean.toFixed(2)),
      reached_new_limit_after_s: r.reachedNewLimitAfterSec,
      rejected_after_change: r.rejectedAfterChange,
    })),
  };
}
