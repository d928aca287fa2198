/*
 * NAME
 *   ceiling - a destination's learned session ceiling (relay extension, §12.7); the window and
 *   Postfix's feedback are destination-window.ts
 * DESCRIPTION
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
 *
 *   activeCeiling() and holdAtCeiling() are what destination-window.ts's onPositiveFeedback()
 *   asks of the ceiling.
 * ERRORS
 *   None.
 */
import type { Ceiling, FeedbackOutcome, WindowParams, WindowState } from "./window-state";

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

/** The ceiling in force at `now`: null when the option is off, none was learned, or it expired (then it is dropped). */
export function activeCeiling(s: WindowState, now: number, p: WindowParams): Ceiling | null {
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
export function holdAtCeiling(
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
