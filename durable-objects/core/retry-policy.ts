/*
 * NAME
 *   retry-policy - back-off, expiry and delay warnings (after Postfix qmgr_active.c, spec §8)
 * DESCRIPTION
 *   decideAfterAttempt() is what Postfix does when a message that had deferred recipients
 *   leaves the active queue: return it if it is older than its lifetime; otherwise maybe send
 *   the one delay warning, and compute the next attempt time with age-based back-off:
 *   delay = clamp(now - createTime, minimal_backoff_time, maximal_backoff_time).
 *   Back-off doubles each retry until capped, because each wait is about the message's age.
 *
 *   nextScanAt() models Postfix's deferred-queue scans (every queue_run_delay), used only to
 *   reproduce Postfix's own timing tables; the relay arms an alarm at the exact due time
 *   (spec §12.3).
 *
 *   initialWarnTime() is the warn time fixed at enqueue: arrival + delay_warning_time, for
 *   non-null senders and only when that parameter is non-zero.
 * INVARIANTS
 *   All times are whole seconds. minimal ≤ delay ≤ maximal. A warning is sent at most once
 *   (warnTime becomes -1). An expired message gets no warning.
 * ERRORS
 *   None.
 */

/** The retry parameters (Postfix main.cf names in comments; seconds). */
export interface RetryParams {
  /** minimal_backoff_time, default 300 s. */
  minimalBackoffTime: number;
  /** maximal_backoff_time, default 4000 s. */
  maximalBackoffTime: number;
  /** maximal_queue_lifetime, default 5 d = 432000 s. */
  maximalQueueLifetime: number;
  /** bounce_queue_lifetime (null sender), default 5 d; clipped to maximal_queue_lifetime. */
  bounceQueueLifetime: number;
  /** delay_warning_time, default 0 (off). */
  delayWarningTime: number;
}

/** What to do with a message whose attempt ended with deferred recipients. */
export type RetryDecision =
  | { kind: "expired"; lifetimeSec: number }
  | { kind: "deferred"; nextAttemptAt: number; delaySec: number; warn: boolean; warnTime: number };

/** The part of a message retry decisions look at. */
export interface RetryInput {
  /** Arrival time (seconds); null if unknown. */
  createTime: number | null;
  /** True for mail with the null envelope sender (bounces). */
  nullSender: boolean;
  /** >0: time of the one delay warning; -1: already sent; 0: none. */
  warnTime: number;
}

/** The lifetime that applies to a message. */
export function lifetimeOf(nullSender: boolean, p: RetryParams): number {
  return nullSender ? Math.min(p.bounceQueueLifetime, p.maximalQueueLifetime) : p.maximalQueueLifetime;
}

/** Age-based back-off delay for an attempt that ends now. */
export function backoffDelay(now: number, createTime: number | null, p: RetryParams): number {
  if (createTime === null) return p.minimalBackoffTime;
  const age = now - createTime;
  return Math.min(Math.max(age, p.minimalBackoffTime), p.maximalBackoffTime);
}

/**
 * Decides expiry, warning and next attempt for a message with deferred recipients. `soon`: the
 * next attempt is minimal_backoff_time away whatever the message's age (relay §12.7, a message
 * deferred only by sessions refused at a learned ceiling).
 */
export function decideAfterAttempt(m: RetryInput, now: number, p: RetryParams, soon = false): RetryDecision {
  const lifetimeSec = lifetimeOf(m.nullSender, p);
  if (m.createTime !== null && now >= m.createTime + lifetimeSec) return { kind: "expired", lifetimeSec };
  let warn = false;
  let warnTime = m.warnTime;
  if (warnTime > 0 && now >= warnTime - 1) {
    warn = true;
    warnTime = -1;
  }
  const delaySec = soon ? p.minimalBackoffTime : backoffDelay(now, m.createTime, p);
  return { kind: "deferred", nextAttemptAt: now + delaySec, delaySec, warn, warnTime };
}

/** The warn time fixed at enqueue (0 when warnings are off or the sender is null). */
export function initialWarnTime(createTime: number, nullSender: boolean, p: RetryParams): number {
  return p.delayWarningTime > 0 && !nullSender ? createTime + p.delayWarningTime : 0;
}

/** Postfix only: the first deferred-queue scan at or after `stamp - 1` (scans every `period`). */
export function nextScanAt(stamp: number, period: number): number {
  return Math.max(0, Math.ceil((stamp - 1) / period) * period);
}
