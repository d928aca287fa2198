/**
 * Configurable limits of the accept path, and `scheduled_at` parsing.
 *
 * DESCRIPTION
 *   limitsOf(env)        { maxMessageBytes (MAX_MESSAGE_BYTES, default 40 MiB),
 *                          maxRecipients (MAX_RECIPIENTS, default 50),
 *                          shards (OUTBOX_SHARDS, default 8) }.
 *   parseScheduledAt     Resend's `scheduled_at`: ISO 8601 with a time zone, or natural language
 *                        ("in 1 hour", "tomorrow at 9am", "Friday at 3pm ET"; when.ts) → epoch ms.
 *
 * ERRORS
 *   ApiError 422 validation_error for an unparsable or too distant `scheduled_at`, or one more than
 *   SCHEDULE_PAST_TOLERANCE_MS in the past (omit it, or say "now", to send at once).
 */
import { ApiError } from "../model/errors";
import { parseWhen } from "./when";
import { settingsOf } from "../settings/settings";

/** The accept path's limits. */
export interface Limits {
  /** Largest request body and composed message, bytes. Default 40 MiB. */
  maxMessageBytes: number;
  /** Most envelope recipients per message. Default 50. */
  maxRecipients: number;
  /** Outbox shard count. Default 8. */
  shards: number;
}

/** The latest a message may be scheduled: 30 days ahead (Resend's limit is 72 h; we allow more). */
export const MAX_SCHEDULE_AHEAD_MS = 30 * 86_400_000;

/** How far in the past a `scheduled_at` may be (clock skew between the caller and the relay). */
export const SCHEDULE_PAST_TOLERANCE_MS = 60_000;

/** Reads the limits from the environment. */
export function limitsOf(env: Env): Limits {
  return {
    maxMessageBytes: settingsOf(env).maxMessageBytes,
    maxRecipients: settingsOf(env).maxRecipients,
    shards: settingsOf(env).outboxShards,
  };
}

const ISO_RE = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/i;

/** Parses `scheduled_at` relative to `nowMs`; returns epoch ms. */
export function parseScheduledAt(value: string, nowMs: number, field = "scheduled_at"): number {
  let at: number;
  if (ISO_RE.test(value.trim())) at = Date.parse(value.trim());
  else at = parseWhen(value, nowMs) ?? Number.NaN;
  if (!Number.isFinite(at)) {
    throw new ApiError(
      422,
      "validation_error",
      `Invalid \`${field}\`: use ISO 8601 with a time zone (2026-08-05T11:52:01Z) ` +
        `or natural language ("in 10 minutes", "tomorrow at 9am", "Friday at 3pm ET"; UTC unless a zone is given).`,
    );
  }
  if (at > nowMs + MAX_SCHEDULE_AHEAD_MS)
    throw new ApiError(422, "validation_error", `Invalid \`${field}\`: at most 30 days ahead.`);
  if (at < nowMs - SCHEDULE_PAST_TOLERANCE_MS) {
    throw new ApiError(
      422,
      "validation_error",
      `Invalid \`${field}\`: ${new Date(at).toISOString()} is in the past; omit it (or say "now") to send at once.`,
    );
  }
  return at;
}
