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
 *   With destination_concurrency_ceiling_memory set (relay, §12.7), a concurrency refusal
 *   (isConcurrencyRefusal) also teaches learnCeiling() the server's session limit: the window is
 *   held at it, and opens one past it only now and then, a probe. Probes are counted in
 *   deliveries at the ceiling: the first comes PROBE_GAP_MIN × limit of them after the refusal
 *   (Postfix's 1/N feedback probes every N), each refused probe doubles the gap up to
 *   PROBE_GAP_MAX × limit, and never two within destination_concurrency_probe_delay seconds (a
 *   floor for busy destinations). A probe has got through when limit + 1 deliveries that started
 *   with limit + 1 in flight finished and no refusal came (a whole round), and more than a second
 *   has passed since it opened (PROBE_SETTLE_SEC: a refusal reported late still lands); then the
 *   ceiling rises and the
 *   window climbs one session per delivery until the server refuses again, so a server that
 *   raised its limit is found sooner than Postfix's 1/N climb finds it. The ceiling is forgotten
 *   ceilingMemory after the last refusal (the relay's default: 1 h). Off (0), nothing here
 *   differs from Postfix.
 *   Each report carries `conc`, the deliveries in flight when the reported one started (itself
 *   included): reports reach the scheduler in batches, after completions that came later, so the
 *   count at the report understates the sessions open when the refused one knocked. A refusal
 *   of a session that started beside others of ours (conc > 1) sets the ceiling only: the server
 *   is up, and no pseudo-cohort is counted towards its death (refusalOnly).
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

/** The first gap between probes, in deliveries at the ceiling, per session of the limit. */
export const PROBE_GAP_MIN = 2;
/** The longest gap between probes, in deliveries at the ceiling, per session of the limit. */
export const PROBE_GAP_MAX = 4;
/**
 * A probe is through no sooner than this many clock seconds after it opened (more than one second
 * of time): delivery agents report in batches, and a refusal of the probe's own session must
 * still land before the ceiling rises.
 */
export const PROBE_SETTLE_SEC = 2;
/** Refusals of a cohort remembered for their start order (learnCeiling). */
export const COHORT_MEMORY = 64;

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

/** The window of a new destination: initial concurrency clipped to a non-zero limit. */
export function initialWindow(initial: number, limit: number): number {
  return limit > 0 && limit < initial ? limit : initial;
}

/** A fresh destination's state. */
export function createWindowState(p: WindowParams): WindowState {
  return { window: p.initialConcurrency, success: 0, failure: 0, failCohorts: 0 };
}

/** The ceiling in force at `now`: null when the option is off, none was learned, or it expired (then it is dropped). */
function activeCeiling(s: WindowState, now: number, p: WindowParams): Ceiling | null {
  if (!p.ceilingMemory || !s.ceiling) return null;
  if (now - s.ceiling.at >= p.ceilingMemory) {
    s.ceiling = null;
    return null;
  }
  return s.ceiling;
}

/**
 * A success with a learned ceiling (§12.7). Climbing, the window opens by one. With a probe out
 * (window = limit + 1), a delivery that started with more than the limit in flight (`conc`)
 * counts towards a whole round, which ends no sooner than PROBE_SETTLE_SEC after the probe
 * opened; after one the probe is through and the climb starts. At the limit the window holds,
 * and nothing accumulates, while deliveries count down to the next probe; then it opens by
 * exactly one. Returns null when Postfix's arithmetic decides (below the ceiling, or none).
 */
function holdAtCeiling(
  s: WindowState,
  busy: number,
  conc: number,
  now: number,
  p: WindowParams,
): FeedbackOutcome | null {
  const c = activeCeiling(s, now, p);
  if (!c) return null;
  c.refusing = false;
  if (!c.climbing && s.window === c.limit + 1 && (c.pending ?? 0) > 0) {
    // A whole round, and PROBE_SETTLE_SEC since the probe opened: a refusal of the probe's
    // session, reported late, still lands inside it.
    if (conc > c.limit) c.pending = Math.max((c.pending ?? 0) - 1, now >= (c.openedAt ?? 0) + PROBE_SETTLE_SEC ? 0 : 1);
    if ((c.pending ?? 0) > 0) return "unchanged";
    c.climbing = true;
  }
  if (c.climbing) {
    if (p.concurrencyLimit !== 0 && s.window >= p.concurrencyLimit) return "unchanged";
    if (!(s.window < busy + p.initialConcurrency)) return "unchanged";
    s.window += 1;
    c.limit = s.window - 1;
    s.success = 0;
    s.failure = 0;
    return "opened";
  }
  if (s.window < c.limit) return null;
  // Past the probe step (a window revived at the initial concurrency): back to the limit.
  if (s.window > c.limit) {
    s.window = c.limit;
    c.pending = 0;
  }
  if ((c.left ?? 0) > 0) c.left = (c.left ?? 0) - 1;
  if ((c.left ?? 0) > 0 || now < c.probeAt) return "unchanged";
  if (p.concurrencyLimit !== 0 && s.window >= p.concurrencyLimit) return "unchanged";
  s.window = c.limit + 1;
  s.success = 0;
  s.failure = 0;
  c.pending = c.limit + 1;
  c.openedAt = now;
  c.left = c.gap;
  c.probeAt = now + (p.probeDelay ?? 1);
  return "opened";
}

/**
 * Whether a site failure is the server refusing one session more than it allows: a 421 at the
 * greeting, or "too many connections/sessions/clients" in the reply (§12.7).
 */
export function isConcurrencyRefusal(reason: string): boolean {
  return (
    /refused to talk to me: 421\b/.test(reason) ||
    /too many (?:connections|connected clients|concurrent|simultaneous|sessions|clients)/i.test(reason)
  );
}

/**
 * Whether a site failure that is a concurrency refusal (isConcurrencyRefusal, or a ceiling reply
 * rule's) only sets the learned ceiling, without Postfix's negative feedback and
 * dead detection (§12.7): a concurrency refusal of a session that started beside others of ours
 * (`conc` > 1, the refused one included) says the server is up and serving us; it refused one
 * session more than it allows. A refusal of our only session counts as any site failure does.
 */
export function refusalOnly(refusal: boolean, conc: number, p: WindowParams): boolean {
  return refusal && (p.ceilingMemory ?? 0) > 0 && conc > 1;
}

/**
 * Learns from a concurrency refusal, after its negative feedback or instead of it (refusalOnly):
 * the sessions in flight when the refused one started, less the refused one, are the server's
 * limit; the window is set to it. A refused probe doubles
 * the gap to the next one (at most PROBE_GAP_MAX × limit); the first refusal, or one that ends a
 * climb, starts at PROBE_GAP_MIN × limit. Consecutive refusals (no success between) are one
 * cohort: the refused sessions count in each other's `busy`, so the cohort's least is the limit.
 */
export function learnCeiling(s: WindowState, busy: number, now: number, p: WindowParams, seq?: number): void {
  if (!p.ceilingMemory || s.window <= 0) return;
  const c = activeCeiling(s, now, p);
  let limit = Math.max(1, busy - 1);
  if (c?.refusing) {
    // `busy` counted when the refused session started (`seq`: the order sessions started in)
    // included the cohort's refusals that started before it, which held no session: a server that
    // sheds sessions is followed down at once.
    if (seq !== undefined) {
      limit = Math.max(1, limit - (c.cohort ?? []).filter((x) => x < seq).length);
      c.cohort = [...(c.cohort ?? []), seq].slice(-COHORT_MEMORY);
    }
    c.at = now;
    c.limit = Math.min(c.limit, limit);
    c.gap = Math.min(c.gap, PROBE_GAP_MAX * c.limit);
    c.left = Math.min(c.left ?? 0, c.gap);
    if (s.window > c.limit) s.window = c.limit;
    return;
  }
  // A refusal never raises a ceiling in force (short of a climb): the server took fewer, not more.
  if (c !== null && !c.climbing) limit = Math.min(limit, c.limit);
  const probeRefused = c !== null && !c.climbing && (c.pending ?? 0) > 0;
  const gap = probeRefused
    ? Math.min(c.gap * 2, PROBE_GAP_MAX * limit)
    : c !== null && !c.climbing
      ? Math.min(Math.max(c.gap, PROBE_GAP_MIN * limit), PROBE_GAP_MAX * limit)
      : PROBE_GAP_MIN * limit;
  s.ceiling = {
    limit,
    at: now,
    probeAt: now + (p.probeDelay ?? 1),
    gap,
    left: gap,
    pending: 0,
    climbing: false,
    refusing: true,
    ...(seq !== undefined ? { cohort: [seq] } : {}),
  };
  // The server took `limit` sessions: the window goes to it, not below (Postfix's negative
  // feedback may have taken it further down), nor above.
  s.window = limit;
  s.success = 0;
  s.failure = 0;
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
