/*
 * NAME
 *   endpoint-health - per-endpoint concurrency window and dead-endpoint backoff
 *
 * SUMMARY
 *   The relay's concurrency feedback (after Postfix qmgr_queue.c and
 *   qmgr_feedback.c) applied to webhook endpoints: each endpoint has its own
 *   window of concurrent deliveries that opens on success and closes on
 *   failure, and is marked dead for a while after too many failed cohorts.
 *   State is per endpoint, so a slow or dead endpoint never holds a slot
 *   that another endpoint could use.
 *
 * DESCRIPTION
 *   initialHealth(cfg) gives a fresh state: window cfg.initialWindow.
 *
 *   acquireSlot(state, nowMs) asks to start one delivery and returns the new
 *   state and {kind:"send"}, {kind:"wait", untilMs} while the endpoint is
 *   dead or throttled, or {kind:"full"} while the window is in use.
 *
 *   onDeliverySuccess(state, cfg) releases the slot; positive feedback of
 *   1/window per success opens the window by one per window's worth of
 *   successes (up to cfg.maxWindow), and any success clears the failure
 *   cohorts and the dead-period backoff. Only a success with the window in
 *   use (every slot taken) is feedback: a window that limited nothing has
 *   shown nothing about a larger one (TCP's congestion window validation,
 *   RFC 7661), and an endpoint sent one event at a time keeps a state that
 *   does not change, so it is not written again per event.
 *
 *   onDeliveryFailure(state, nowMs, cfg, untilMs?) releases the slot;
 *   negative feedback of 1/window per failure closes the window by one per
 *   window's worth of failures (not below 1). Each failure also adds 1/window
 *   of a failed cohort; at cfg.failCohortLimit cohorts the endpoint is dead
 *   until nowMs + backoff, where the backoff doubles per consecutive dead
 *   period from cfg.minDeadMs to cfg.maxDeadMs, and the window restarts at 1
 *   so revival is a single probe. untilMs (from a honoured Retry-After)
 *   throttles the endpoint at least that long without counting as dead.
 *
 *   Why failures are counted in cohorts: with a window of N, N deliveries
 *   are in flight together and fail together when the endpoint goes down;
 *   counting each as 1/N makes one outage one cohort, not N.
 *
 * INVARIANTS
 *   1 <= window <= cfg.maxWindow; 0 <= inflight; acquireSlot never returns
 *   "send" while inflight >= window or while nowMs < blockedUntilMs.
 *   State is versioned ({v: 1}) and JSON-serialisable.
 *
 * ERRORS
 *   None thrown.
 */

/** Health configuration (all counts are deliveries, all times ms). */
export interface HealthConfig {
  /** Window of a new endpoint; default 4. */
  initialWindow: number;
  /** Largest window; default 32. */
  maxWindow: number;
  /** Failed cohorts in a row that mark the endpoint dead; default 1 (as Postfix). */
  failCohortLimit: number;
  /** First dead period, ms; default 60 000. */
  minDeadMs: number;
  /** Longest dead period, ms; default 3 600 000. */
  maxDeadMs: number;
}

/** Default health configuration. */
export const DEFAULT_HEALTH_CONFIG: HealthConfig = {
  initialWindow: 4,
  maxWindow: 32,
  failCohortLimit: 1,
  minDeadMs: 60_000,
  maxDeadMs: 3_600_000,
};

/** Health of one endpoint: plain, versioned, JSON-serialisable. */
export interface EndpointHealth {
  v: 1;
  window: number;
  inflight: number;
  /** Accumulated positive feedback, in [0, 1). */
  success: number;
  /** Accumulated negative feedback, in [0, 1). */
  failure: number;
  /** Failed cohorts since the last success. */
  failCohorts: number;
  /** Consecutive dead periods, for the doubling backoff. */
  deadPeriods: number;
  /** No delivery starts before this time; null when not blocked. */
  blockedUntilMs: number | null;
  /** Whether the block is a dead period (true) or a Retry-After throttle (false). */
  dead: boolean;
}

/** Answer of acquireSlot. */
export type SlotDecision = { kind: "send" } | { kind: "wait"; untilMs: number } | { kind: "full" };

/** A fresh endpoint state. */
export function initialHealth(cfg: HealthConfig = DEFAULT_HEALTH_CONFIG): EndpointHealth {
  return {
    v: 1,
    window: Math.max(1, Math.min(cfg.initialWindow, cfg.maxWindow)),
    inflight: 0,
    success: 0,
    failure: 0,
    failCohorts: 0,
    deadPeriods: 0,
    blockedUntilMs: null,
    dead: false,
  };
}

/** Tries to start one delivery to the endpoint. */
export function acquireSlot(state: EndpointHealth, nowMs: number): { state: EndpointHealth; decision: SlotDecision } {
  if (state.blockedUntilMs !== null && nowMs < state.blockedUntilMs) {
    return { state, decision: { kind: "wait", untilMs: state.blockedUntilMs } };
  }
  const open = state.blockedUntilMs === null ? state : { ...state, blockedUntilMs: null, dead: false };
  if (open.inflight >= open.window) return { state: open, decision: { kind: "full" } };
  return { state: { ...open, inflight: open.inflight + 1 }, decision: { kind: "send" } };
}

/** Whether the endpoint is inside a dead period or throttle at nowMs. */
export function isBlocked(state: EndpointHealth, nowMs: number): boolean {
  return state.blockedUntilMs !== null && nowMs < state.blockedUntilMs;
}

/** Records a delivery that succeeded (2xx): positive feedback, clears failure history. */
export function onDeliverySuccess(state: EndpointHealth, cfg: HealthConfig = DEFAULT_HEALTH_CONFIG): EndpointHealth {
  let window = state.window;
  // Feedback only while the window was in use (see the header).
  let success = state.success + (state.inflight >= window ? 1 / window : 0);
  // Open by one per window's worth of successes, as Postfix's unthrottle does.
  while (success >= 1 - 1e-9) {
    success -= 1;
    if (window < cfg.maxWindow) window += 1;
  }
  // At the largest window there is nothing left to open: no feedback is kept, so a healthy
  // endpoint's state stays the same from one delivery to the next (and is not written again).
  if (window >= cfg.maxWindow) success = 0;
  return {
    ...state,
    window,
    inflight: Math.max(0, state.inflight - 1),
    success: Math.max(0, success),
    failure: 0,
    failCohorts: 0,
    deadPeriods: 0,
  };
}

/** The dead period after `deadPeriods` earlier consecutive ones: doubling, bounded. */
export function deadPeriodMs(deadPeriods: number, cfg: HealthConfig = DEFAULT_HEALTH_CONFIG): number {
  const doubled = cfg.minDeadMs * 2 ** Math.min(deadPeriods, 40);
  return Math.min(cfg.maxDeadMs, doubled);
}

/** Records a failed delivery: negative feedback, failure cohorts, maybe a dead period or throttle. */
export function onDeliveryFailure(
  state: EndpointHealth,
  nowMs: number,
  cfg: HealthConfig = DEFAULT_HEALTH_CONFIG,
  untilMs?: number,
): EndpointHealth {
  const feedback = 1 / state.window;
  let window = state.window;
  let failure = state.failure + feedback;
  while (failure >= 1 - 1e-9) {
    failure -= 1;
    if (window > 1) window -= 1;
  }
  const failCohorts = state.failCohorts + feedback;
  const base = {
    ...state,
    window,
    inflight: Math.max(0, state.inflight - 1),
    success: 0,
    failure: Math.max(0, failure),
  };
  if (failCohorts >= cfg.failCohortLimit - 1e-9) {
    const deadUntil = nowMs + deadPeriodMs(state.deadPeriods, cfg);
    return {
      ...base,
      window: 1,
      failure: 0,
      failCohorts: 0,
      deadPeriods: state.deadPeriods + 1,
      blockedUntilMs: Math.max(deadUntil, untilMs ?? 0, state.blockedUntilMs ?? 0),
      dead: true,
    };
  }
  const throttled =
    untilMs !== undefined && untilMs > nowMs ? Math.max(untilMs, state.blockedUntilMs ?? 0) : state.blockedUntilMs;
  return { ...base, failCohorts, blockedUntilMs: throttled, dead: state.dead };
}
