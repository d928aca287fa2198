/*
 * NAME
 *   retry - what to do after one webhook delivery attempt
 *
 * SUMMARY
 *   The Standard Webhooks / Svix retry schedule (api-conventions §6):
 *   immediately, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h; after the
 *   last try the event is dead-lettered.
 *
 * DESCRIPTION
 *   decideAfterAttempt(input, cfg) takes the number of the attempt just
 *   made (1 = the immediate first try), its HTTP outcome and the injected
 *   nowMs, and returns a decision:
 *     2xx                     -> delivered
 *     410 Gone                -> disable-endpoint
 *     webhook-delivery: abort-message (any non-2xx) -> dead-letter
 *     3xx                     -> failure; redirects are not followed
 *     other 4xx, 5xx, network error, timeout -> failure
 *   A failure retries at nowMs + the schedule's delay for the next attempt,
 *   or dead-letters when the schedule is used up.
 *
 *   Retry-After is honoured on 429 and 503 only. It may be delta-seconds or
 *   an HTTP-date (read against nowMs). The delay used is
 *   max(schedule delay, min(Retry-After, cfg.maxRetryAfterMs)): a receiver
 *   may slow us down but never speed us up past the schedule, and a huge
 *   or malicious Retry-After cannot park an event for more than the cap
 *   (24 h by default). A Retry-After still uses up an attempt.
 *
 *   parseRetryAfter(value, nowMs) gives the wait in ms (>= 0) or null.
 *   retryDelayMs(nextAttempt, cfg) gives the schedule delay or null.
 *
 * INVARIANTS
 *   A retry's atMs is > nowMs - 1 (delays are >= 0), is non-decreasing in
 *   the attempt number for equal inputs, and never exceeds nowMs plus
 *   max(largest schedule delay, cfg.maxRetryAfterMs).
 *
 * ERRORS
 *   None thrown; unparsable headers are ignored.
 */

/** Delays before attempts 2..9 in ms; attempt 1 is immediate. */
export const WEBHOOK_RETRY_DELAYS_MS: readonly number[] = [
  5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000,
];

/** Configuration of the retry decision. */
export interface RetryConfig {
  /** Delays before attempts 2, 3, …; default WEBHOOK_RETRY_DELAYS_MS (so 8 tries in all). */
  delaysMs: readonly number[];
  /** Upper bound on an honoured Retry-After, ms; default 86 400 000 (24 h). */
  maxRetryAfterMs: number;
}

/** Default retry configuration. */
export const DEFAULT_RETRY_CONFIG: RetryConfig = {
  delaysMs: WEBHOOK_RETRY_DELAYS_MS,
  maxRetryAfterMs: 86_400_000,
};

/** What happened to one HTTP attempt, as the shell observed it. */
export type HttpOutcome =
  | { kind: "response"; status: number; retryAfter?: string | null; deliveryHeader?: string | null }
  | { kind: "network-error"; message?: string }
  | { kind: "timeout" };

/** Input of decideAfterAttempt. */
export interface AttemptInput {
  /** Number of the attempt just made, 1-based. */
  attempt: number;
  outcome: HttpOutcome;
  nowMs: number;
}

/** What the shell must do next with the event. */
export type RetryDecision =
  | { kind: "delivered" }
  | { kind: "retry"; atMs: number; nextAttempt: number; reason: string }
  | { kind: "dead-letter"; reason: string }
  | { kind: "disable-endpoint"; reason: string };

const DELTA_SECONDS = /^\s*(\d+)\s*$/;
// IMF-fixdate and the obsolete forms all start with a weekday or a day number and contain a
// 4- or 2-digit year; Date.parse handles them, and we only accept a result that parsed.
const HTTP_DATE = new RegExp(
  /^\s*[A-Za-z]{3,9},?\s+\d{1,2}[\s-][A-Za-z]{3}[\s-]\d{2,4}\s+\d{2}:\d{2}:\d{2}\s+GMT\s*$/.source +
    "|" +
    /^\s*[A-Za-z]{3}\s+[A-Za-z]{3}\s+\d{1,2}\s+\d{2}:\d{2}:\d{2}\s+\d{4}\s*$/.source,
);

/** Parses Retry-After (delta-seconds or HTTP-date) into a wait in ms from nowMs, or null. */
export function parseRetryAfter(value: string | null | undefined, nowMs: number): number | null {
  if (value === null || value === undefined) return null;
  const delta = DELTA_SECONDS.exec(value);
  if (delta) return Number(delta[1]) * 1000;
  if (!HTTP_DATE.test(value)) return null;
  const atMs = Date.parse(value);
  if (!Number.isFinite(atMs)) return null;
  return Math.max(0, atMs - nowMs);
}

/** The schedule's delay before attempt `nextAttempt` (2-based), or null when there is none. */
export function retryDelayMs(nextAttempt: number, cfg: RetryConfig = DEFAULT_RETRY_CONFIG): number | null {
  if (!Number.isInteger(nextAttempt) || nextAttempt < 2) return null;
  return cfg.delaysMs[nextAttempt - 2] ?? null;
}

/** Total number of tries the schedule allows (the first plus one per delay). */
export function maxAttempts(cfg: RetryConfig = DEFAULT_RETRY_CONFIG): number {
  return cfg.delaysMs.length + 1;
}

/** Decides delivered / retry / dead-letter / disable-endpoint after one attempt. */
export function decideAfterAttempt(input: AttemptInput, cfg: RetryConfig = DEFAULT_RETRY_CONFIG): RetryDecision {
  const { outcome } = input;
  if (outcome.kind === "response") {
    const status = outcome.status;
    if (status >= 200 && status <= 299) return { kind: "delivered" };
    if (status === 410) return { kind: "disable-endpoint", reason: "410 Gone" };
    if ((outcome.deliveryHeader ?? "").trim().toLowerCase() === "abort-message") {
      return { kind: "dead-letter", reason: `receiver aborted (HTTP ${status})` };
    }
  }
  return scheduleRetry(input, failureReason(outcome), honouredRetryAfterMs(input, cfg), cfg);
}

function failureReason(outcome: HttpOutcome): string {
  if (outcome.kind === "timeout") return "timeout";
  if (outcome.kind === "network-error") return "network error";
  if (outcome.status >= 300 && outcome.status <= 399) return `HTTP ${outcome.status} (redirects are not followed)`;
  return `HTTP ${outcome.status}`;
}

function honouredRetryAfterMs(input: AttemptInput, cfg: RetryConfig): number {
  const o = input.outcome;
  if (o.kind !== "response" || (o.status !== 429 && o.status !== 503)) return 0;
  const waitMs = parseRetryAfter(o.retryAfter, input.nowMs);
  return waitMs === null ? 0 : Math.min(waitMs, cfg.maxRetryAfterMs);
}

function scheduleRetry(input: AttemptInput, reason: string, retryAfterMs: number, cfg: RetryConfig): RetryDecision {
  const nextAttempt = Math.max(1, Math.floor(input.attempt)) + 1;
  const delayMs = retryDelayMs(nextAttempt, cfg);
  if (delayMs === null) return { kind: "dead-letter", reason: `${reason}; ${nextAttempt - 1} attempts made` };
  return { kind: "retry", atMs: input.nowMs + Math.max(delayMs, retryAfterMs), nextAttempt, reason };
}
