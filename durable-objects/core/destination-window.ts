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
 *   The state and parameters (WindowState, WindowParams) are window-state.ts; the learned
 *   session ceiling (destination_concurrency_ceiling_memory, §12.7) is ceiling.ts.
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
import { activeCeiling, holdAtCeiling } from "./ceiling";
import { invariant } from "./errors";
import { feedbackValue } from "./feedback";
import type { FeedbackOutcome, WindowParams, WindowState } from "./window-state";

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
 * delivery; `conc` is the number in flight when it started, itself included (§12.7's probe
 * evidence; by default `busy`). A dead destination is revived at once.
 */
export function onPositiveFeedback(
  s: WindowState,
  busy: number,
  p: WindowParams,
  now = 0,
  conc = busy,
): FeedbackOutcome {
  s.failCohorts = 0;
  if (s.window === 0) {
    reviveWindow(s, busy, p);
    const c = activeCeiling(s, now, p);
    if (c && s.window > c.limit) s.window = c.limit;
    return "revived";
  }
  const held = holdAtCeiling(s, busy, conc, now, p);
  if (held !== null) return held;
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
