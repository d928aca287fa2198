/*
 * NAME
 *   limiter - scenario "limiter": concurrency feedback against an active concurrency limiter
 *   (spec §6.7, vector F-LIM; Postfix SCHEDULER_README "Impact of active server concurrency
 *   limiter")
 * DESCRIPTION
 *   runLimiter() delivers 2000 recipients to one destination whose server accepts at most
 *   S = 5 sessions and rejects every further connection at once with 421 (a site failure),
 *   once per feedback style (1/N, 1/sqrt(N), constant 1, the same for positive and negative
 *   feedback). Client: destination concurrency limit 20, initial concurrency 5, recipient
 *   limit 2 (so 1000 entries of 2 recipients, 2 s each at 1 s per recipient, ±10 % jitter),
 *   failed-cohort limit 0 (the destination is never declared dead).
 *
 *   Arrivals. One message with 2000 recipients arriving at t = 0, as in the README's
 *   measurement (one message to an alias expanding to 2000 recipients). All 1000 entries
 *   are in core from the start (one read: 2000 < 5000), so the destination always has work
 *   waiting and the window, not the supply of mail, is what limits concurrency: the steady
 *   state of §6.7. The measurement covers the first pass only, as the README's did ("first
 *   delivery runs only"): each entry is tried once, 421s are counted, and the interval ends
 *   with the last dispatch of that pass (afterwards nothing waits and the window no longer
 *   matters). Many small messages would reach the same steady state but mix second
 *   attempts into it.
 *
 *   Retries. A rejected entry's recipients stay undelivered; when the message leaves the
 *   active queue the core defers it and the simulator re-admits its undelivered recipients
 *   at nextAttemptAt. minimal_backoff_time = maximal_backoff_time = 10 s keeps that short;
 *   passes repeat until everything is delivered (an invariant of the run). Figures "all
 *   passes" include those retries.
 *
 *   Concurrency is the number of entries in flight at the destination (client side), time
 *   weighted over the first pass. With rejectDelaySec = 0 a 421 takes no time, so this is
 *   also the number of sessions the server actually serves. The window is reported too.
 *
 *   idealisedDeferFraction() is vector F-LIM run through the core's own feedback functions:
 *   a serial model in which a delivery fails iff window > S. readmeDeferFraction() is the
 *   README's 1/(1 + roundup(1/g(S))).
 * INVARIANTS
 *   See engine.ts; every recipient is delivered exactly once in every run.
 * ERRORS
 *   None; invariant violations are in each run's audit.
 */
import {
  createWindowState,
  feedbackValue,
  mustParseSchedulerConfig,
  onNegativeFeedback,
  onPositiveFeedback,
  parseFeedback,
  transportParams,
  type SchedulerConfigInput,
} from "../../durable-objects/core";
import type { Audit } from "./audit";
import { DEFAULT_DESTINATION } from "./destination";
import { runSimulation, type SimMessage } from "./engine";
import { deriveSeed } from "./rng";
import type { TimeWeighted } from "./stats";

/** The feedback styles compared, in table order. */
export const LIMITER_FEEDBACKS = ["1/concurrency", "1/sqrt_concurrency", "1"] as const;
/** One of the compared feedback styles. */
export type LimiterFeedback = (typeof LIMITER_FEEDBACKS)[number];

/** The seed README's measurements (no connection caching): deferred %, concurrency mean/stddev. */
export const README_LIMITER: Record<LimiterFeedback, { deferredPct: number; mean: number; stddev: number }> = {
  "1/concurrency": { deferredPct: 16.5, mean: 5.17, stddev: 0.38 },
  "1/sqrt_concurrency": { deferredPct: 24.5, mean: 5.28, stddev: 0.45 },
  "1": { deferredPct: 49.7, mean: 5.63, stddev: 0.67 },
};

/** Scenario parameters (defaults in LIMITER_DEFAULTS). */
export interface LimiterOptions {
  recipients: number;
  serverLimit: number;
  perRcptLatencySec: number;
  jitter: number;
  rejectDelaySec: number;
  retryDelaySec: number;
  seed: number;
}

/** The scenario as specified: 2000 recipients, S = 5, 1 s per recipient. */
export const LIMITER_DEFAULTS: LimiterOptions = {
  recipients: 2000,
  serverLimit: 5,
  perRcptLatencySec: 1,
  jitter: 0.1,
  rejectDelaySec: 0,
  retryDelaySec: 10,
  seed: 1,
};

/** Results of one feedback style. */
export interface LimiterRun {
  feedback: LimiterFeedback;
  firstPass: { attempts: number; rejected: number; deferredPct: number; endSec: number };
  allPasses: { attempts: number; rejected: number; deferredPct: number; passes: number };
  /** Entries in flight at the destination, time weighted over the first pass. */
  concurrency: TimeWeighted;
  /** The core's window, time weighted over the first pass. */
  window: TimeWeighted;
  /** Largest number of sessions the server ever held. */
  serverPeak: number;
  endSec: number;
  predicted: { readme: number; coreSerial: number };
  audit: Audit;
}

const NEXTHOP = "limited.example";

/** The scheduler configuration of the scenario for one feedback style. */
export function limiterConfig(feedback: string, retryDelaySec: number): SchedulerConfigInput {
  return {
    initial_destination_concurrency: 5,
    default_destination_concurrency_limit: 20,
    default_destination_recipient_limit: 2,
    default_destination_concurrency_positive_feedback: feedback,
    default_destination_concurrency_negative_feedback: feedback,
    default_destination_concurrency_failed_cohort_limit: 0,
    // Postfix's feedback as the README measured it: without the relay's learned ceiling (§12.7; the ceiling scenario compares).
    default_destination_concurrency_ceiling_memory: 0,
    minimal_backoff_time: retryDelaySec,
    maximal_backoff_time: retryDelaySec,
  };
}

/** Runs the scenario for one feedback style. */
export function runLimiterOnce(feedback: LimiterFeedback, opts: LimiterOptions = LIMITER_DEFAULTS): LimiterRun {
  const rcpts = Array.from({ length: opts.recipients }, (_, i) => ({ address: `u${i}@${NEXTHOP}`, nexthop: NEXTHOP }));
  const messages: SimMessage[] = [{ id: "list", arriveAt: 0, rcpts }];
  const spec = {
    ...DEFAULT_DESTINATION,
    sessionLimit: opts.serverLimit,
    perRcptLatencySec: opts.perRcptLatencySec,
    jitter: opts.jitter,
    rejectDelaySec: opts.rejectDelaySec,
  };
  const r = runSimulation({
    config: limiterConfig(feedback, opts.retryDelaySec),
    messages,
    destinationFor: () => spec,
    seed: deriveSeed(opts.seed, 2),
    traceNexthops: [NEXTHOP],
  });
  const first = r.attempts.filter((a) => a.pass === 1);
  const rejected = (list: typeof first) => list.filter((a) => a.outcome === "rejected-421").length;
  const endSec = first.reduce((m, a) => Math.max(m, a.startAt), 0);
  const trace = r.traces.get(NEXTHOP)!;
  return {
    feedback,
    firstPass: {
      attempts: first.length,
      rejected: rejected(first),
      deferredPct: pct(rejected(first), first.length),
      endSec,
    },
    allPasses: {
      attempts: r.attempts.length,
      rejected: rejected(r.attempts),
      deferredPct: pct(rejected(r.attempts), r.attempts.length),
      passes: r.store.get("list").passes,
    },
    concurrency: trace.inflight.timeWeighted(0, endSec),
    window: trace.window.timeWeighted(0, endSec),
    serverPeak: r.servers.get(NEXTHOP)?.peakOpen ?? 0,
    endSec: r.endAt,
    predicted: {
      readme: readmeDeferFraction(feedback, opts.serverLimit),
      coreSerial: idealisedDeferFraction(feedback, opts.serverLimit),
    },
    audit: r.audit,
  };
}

/** Runs the scenario for every feedback style. */
export function runLimiter(opts: LimiterOptions = LIMITER_DEFAULTS): LimiterRun[] {
  return LIMITER_FEEDBACKS.map((fb) => runLimiterOnce(fb, opts));
}

/** Vector F-LIM through the core's feedback code: fail iff window > S, start at the initial window. */
export function idealisedDeferFraction(feedback: string, serverLimit: number, events = 6000): number {
  const p = transportParams(mustParseSchedulerConfig(limiterConfig(feedback, 10)), "smtp");
  const s = createWindowState(p);
  let failures = 0;
  for (let i = 0; i < events; i++) {
    if (s.window > serverLimit) {
      onNegativeFeedback(s, p);
      failures += 1;
    } else {
      onPositiveFeedback(s, s.window, p);
    }
  }
  return failures / events;
}

/** The README's theoretical defer rate 1/(1 + roundup(1/g(S))). */
export function readmeDeferFraction(feedback: string, serverLimit: number): number {
  const parsed = parseFeedback(feedback, "relay");
  if (!parsed.ok) throw new Error(parsed.error);
  const g = feedbackValue(parsed.feedback, serverLimit);
  return 1 / (1 + Math.ceil(1 / g - 1e-9));
}

function pct(part: number, whole: number): number {
  return whole === 0 ? 0 : (100 * part) / whole;
}
