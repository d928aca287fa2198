/*
 * NAME
 *   webhook-config - the webhook settings from the Worker's vars
 *
 * SUMMARY
 *   Parses the [vars] that tune event publication and webhook delivery into
 *   the configurations of events.ts, retry.ts and endpoint-health.ts.
 *
 * DESCRIPTION
 *   parseWebhookConfig(vars) reads:
 *     WEBHOOK_DELAYED_EVERY_NTH             email.delivery_delayed again on
 *                                           every Nth deferral (0 = never;
 *                                           default 0)
 *     WEBHOOK_DELAYED_MIN_INTERVAL_SECONDS  or once this long has passed
 *                                           since the last notice (0 = never;
 *                                           default 0)
 *     WEBHOOK_RETRY_SCALE                   factor on the retry schedule and
 *                                           on the endpoint dead periods, in
 *                                           (0, 1]; default 1 (the production
 *                                           schedule). Tests use small values.
 *     WEBHOOK_TIMEOUT_MS                    per-request timeout; default
 *                                           15 000, at most 15 000
 *   and returns {events, retry, health, timeoutMs, warnings}. A missing or
 *   empty var takes its default; an invalid one takes its default and adds a
 *   warning (as Postfix falls back on bad parameters), so a typo never stops
 *   delivery.
 *
 * INVARIANTS
 *   With no vars set, the result is exactly the modules' defaults.
 *
 * ERRORS
 *   None thrown: bad values are warnings.
 */

import { DEFAULT_HEALTH_CONFIG, type HealthConfig } from "./endpoint-health";
import { DEFAULT_EVENT_CONFIG, type EventConfig } from "./events";
import { DEFAULT_RETRY_CONFIG, type RetryConfig } from "./retry";

/** The vars read (all strings, as wrangler passes them). */
export interface WebhookVars {
  WEBHOOK_DELAYED_EVERY_NTH?: string;
  WEBHOOK_DELAYED_MIN_INTERVAL_SECONDS?: string;
  WEBHOOK_RETRY_SCALE?: string;
  WEBHOOK_TIMEOUT_MS?: string;
}

/** The parsed settings. */
export interface WebhookConfig {
  events: EventConfig;
  retry: RetryConfig;
  health: HealthConfig;
  /** Per-request timeout, ms; default 15 000. */
  timeoutMs: number;
  /** Scale applied to retry delays and dead periods; default 1. */
  scale: number;
  warnings: string[];
}

/** The production timeout of one delivery, ms. */
export const WEBHOOK_TIMEOUT_MS = 15_000;

function num(
  vars: WebhookVars,
  name: keyof WebhookVars,
  fallback: number,
  ok: (n: number) => boolean,
  warnings: string[],
): number {
  const raw = vars[name];
  if (raw === undefined || raw.trim() === "") return fallback;
  const n = Number(raw);
  if (Number.isFinite(n) && ok(n)) return n;
  warnings.push(`${name}="${raw}" is invalid; using ${fallback}`);
  return fallback;
}

/** Parses the webhook vars (see the header). */
export function parseWebhookConfig(vars: WebhookVars): WebhookConfig {
  const warnings: string[] = [];
  const everyNth = num(
    vars,
    "WEBHOOK_DELAYED_EVERY_NTH",
    DEFAULT_EVENT_CONFIG.delayedEveryNth,
    (n) => Number.isInteger(n) && n >= 0,
    warnings,
  );
  const intervalS = num(
    vars,
    "WEBHOOK_DELAYED_MIN_INTERVAL_SECONDS",
    DEFAULT_EVENT_CONFIG.delayedMinIntervalMs / 1000,
    (n) => n >= 0,
    warnings,
  );
  const scale = num(vars, "WEBHOOK_RETRY_SCALE", 1, (n) => n > 0 && n <= 1, warnings);
  const timeoutMs = num(
    vars,
    "WEBHOOK_TIMEOUT_MS",
    WEBHOOK_TIMEOUT_MS,
    (n) => n >= 100 && n <= WEBHOOK_TIMEOUT_MS,
    warnings,
  );
  const retry: RetryConfig =
    scale === 1
      ? DEFAULT_RETRY_CONFIG
      : { ...DEFAULT_RETRY_CONFIG, delaysMs: DEFAULT_RETRY_CONFIG.delaysMs.map((d) => Math.round(d * scale)) };
  const health: HealthConfig =
    scale === 1
      ? DEFAULT_HEALTH_CONFIG
      : {
          ...DEFAULT_HEALTH_CONFIG,
          minDeadMs: Math.round(DEFAULT_HEALTH_CONFIG.minDeadMs * scale),
          maxDeadMs: Math.round(DEFAULT_HEALTH_CONFIG.maxDeadMs * scale),
        };
  return {
    events: { delayedEveryNth: everyNth, delayedMinIntervalMs: intervalS * 1000 },
    retry,
    health,
    timeoutMs,
    scale,
    warnings,
  };
}
