/*
 * NAME
 *   window-state - a destination's concurrency window state and parameters (after Postfix 2.5
 *   qmgr_queue.c's QMGR_QUEUE fields); the feedback is destination-window.ts, the learned ceiling
 *   ceiling.ts
 * DESCRIPTION
 *   WindowState holds the window and the feedback accumulators of one destination, with its
 *   learned session ceiling (Ceiling, relay, §12.7). WindowParams are the per-transport
 *   parameters feedback needs; FeedbackOutcome is what a feedback step did.
 * INVARIANTS
 *   window > 0: ready; window 0: dead; window -1: suspended (rate delay, see the scheduler).
 */
import type { Feedback } from "./feedback";

/** The feedback accumulators of one destination (Postfix's QMGR_QUEUE fields). */
export interface WindowState {
  /** >0 ready (the concurrency limit), 0 dead, -1 suspended. */
  window: number;
  /** Positive feedback accumulator (double). */
  success: number;
  /** Negative feedback accumulator (double). */
  failure: number;
  /** Failed pseudo-cohorts since the last success: Σ 1/window (double). */
  failCohorts: number;
  /** The learned session ceiling (relay, §12.7); absent while none is known or the option is off. */
  ceiling?: Ceiling | null;
}

/**
 * What a destination said about its session limit (relay extension, §12.7): the last time it
 * refused one session more than it had, it had `limit` (the sessions in flight then, less the
 * refused one).
 */
export interface Ceiling {
  /** Sessions the server took at once when it refused one more (≥ 1). */
  limit: number;
  /** When a refusal last confirmed it (s); it is forgotten ceilingMemory after that. */
  at: number;
  /** Earliest time the window may open one past the limit, a probe (s): the time floor. */
  probeAt: number;
  /** Deliveries at the ceiling between probes; doubles while probes are refused. */
  gap: number;
  /** Deliveries at the ceiling still to go before the next probe (absent in records from before: 0). */
  left?: number;
  /** While a probe is out: deliveries with limit + 1 in flight still to finish before it counts as through. */
  pending?: number;
  /** When the probe out opened (s). */
  openedAt?: number;
  /** A probe got through: the window climbs one per delivery, with no wait, until refused. */
  climbing?: boolean;
  /** The latest report was a refusal: consecutive refusals are one cohort, whose least `busy` less one is the limit. */
  refusing: boolean;
  /** The start order (`seq`) of the current cohort's refusals, the last COHORT_MEMORY of them. */
  cohort?: number[];
}

/** The per-transport parameters feedback needs. */
export interface WindowParams {
  /** initial_destination_concurrency, already clipped to the limit (default 5). */
  initialConcurrency: number;
  /** destination_concurrency_limit; 0 = unlimited (default 20). */
  concurrencyLimit: number;
  /** destination_concurrency_positive_feedback, g(N) (default "1"). */
  positiveFeedback: Feedback;
  /** destination_concurrency_negative_feedback, f(N) (default "1"). */
  negativeFeedback: Feedback;
  /** destination_concurrency_failed_cohort_limit; 0 disables dead detection (default 1). */
  failedCohortLimit: number;
  /** destination_concurrency_ceiling_memory, s: how long a learned ceiling is kept; 0 or absent = Postfix (no ceiling). */
  ceilingMemory?: number;
  /** destination_concurrency_probe_delay, s: the least time between two probes past the ceiling. */
  probeDelay?: number;
}

/** What a feedback step did, for logs and the dashboard. */
export type FeedbackOutcome = "revived" | "opened" | "closed" | "died" | "unchanged";
