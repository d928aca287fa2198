/*
 * NAME
 *   destination-window - per-destination concurrency window and dead detection
 *   (after Postfix 2.5 qmgr_queue.c: qmgr_queue_unthrottle / qmgr_queue_throttle)
 * DESCRIPTION
 *   A destination's window is the number of deliveries it may have in flight. Deliveries
 *   that complete without a site failure give positive feedback (the window may open);
 *   site failures give negative feedback (the window closes) and count pseudo-cohorts
 *   towards declaring the destination dead (spec §6).
 *
 *   onPositiveFeedback() applies one completion without site failure; it also revives a
 *   dead destination. onNegativeFeedback() applies one site failure to a live destination
 *   and may kill it. reviveWindow() brings a dead destination back (timer, flush, memory
 *   pressure). initialWindow() is the starting window, clipped to the limit.
 *
 *   The arithmetic is Postfix's code, in doubles and in the same expression order, including
 *   the f/2 and g/2 rounding margins (spec §10.1) so the F* vectors match bit for bit.
 * INVARIANTS
 *   window > 0: ready; window 0: dead; window -1: suspended (rate delay, see the scheduler).
 *   Negative feedback never takes a live window below 1; only the cohort rule kills.
 *   Positive feedback never opens the window past the limit (0 = unlimited), nor past
 *   busy + initial (the safety rule).
 * ERRORS
 *   InvariantError if negative feedback is applied to a window that is not live.
 */
import { invariant } from "./errors";
import { feedbackValue, type Feedback } from "./feedback";

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
}

/** What a feedback step did, for logs and the dashboard. */
export type FeedbackOutcome = "revived" | "opened" | "closed" | "died" | "unchanged";

/** The window of a new destination: initial concurrency clipped to a non-zero limit. */
export function initialWindow(initial: number, limit: number): number {
  return limit > 0 && limit < initial ? limit : initial;
}

/** A fresh destination's state. */
export function createWindowState(p: WindowParams): WindowState {
  return { window: p.initialConcurrency, success: 0, failure: 0, failCohorts: 0 };
}

/** Brings a dead destination back: window = busy (if any) else initial; accumulators zeroed. */
export function reviveWindow(s: WindowState, busy: number, p: WindowParams): void {
  s.window = busy > 0 ? busy : p.initialConcurrency;
  s.success = 0;
  s.failure = 0;
  s.failCohorts = 0;
}

/**
 * Applies one completion without site failure. `busy` still counts the completing
 * delivery. A dead destination is revived at once.
 */
export function onPositiveFeedback(s: WindowState, busy: number, p: WindowParams): FeedbackOutcome {
  s.failCohorts = 0;
  if (s.window === 0) {
    reviveWindow(s, busy, p);
    return "revived";
  }
  // At the limit nothing accumulates at all (spec §10.5).
  if (p.concurrencyLimit !== 0 && s.window >= p.concurrencyLimit) return "unchanged";
  // Safety rule: keep the window within initial concurrency of what is really in flight, so a
  // destination used one delivery at a time cannot talk itself into a huge window.
  if (!(s.window < busy + p.initialConcurrency)) return "unchanged";
  const g = feedbackValue(p.positiveFeedback, s.window);
  const before = s.window;
  s.success += g;
  while (s.success + g / 2 >= 1) {
    s.window += 1;
    s.success -= 1;
    s.failure = 0;
  }
  if (p.concurrencyLimit > 0 && s.window > p.concurrencyLimit) s.window = p.concurrencyLimit;
  return s.window > before ? "opened" : "unchanged";
}

/**
 * Applies one site failure to a live destination (window > 0). The first failure of a cycle
 * drops the window at once and pre-charges the accumulator ("reverse hysteresis"); the
 * pseudo-cohort count decides death.
 */
export function onNegativeFeedback(s: WindowState, p: WindowParams): FeedbackOutcome {
  invariant(s.window > 0, "onNegativeFeedback", `window ${s.window} is not live`);
  s.failCohorts += 1.0 / s.window;
  if (p.failedCohortLimit > 0 && s.failCohorts >= p.failedCohortLimit) {
    s.window = 0;
    return "died";
  }
  const f = feedbackValue(p.negativeFeedback, s.window);
  const before = s.window;
  s.failure -= f;
  while (s.failure - f / 2 < 0) {
    s.window -= 1;
    s.success = 0;
    s.failure += 1;
  }
  if (s.window < 1) s.window = 1;
  return s.window < before ? "closed" : "unchanged";
}
