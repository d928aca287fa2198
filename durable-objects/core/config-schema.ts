/*
 * NAME
 *   config-schema - the scheduler configuration's input: Postfix's parameter names, units and
 *   bounds (spec §1)
 * DESCRIPTION
 *   globalSchema is the strict zod schema of a whole configuration object, transportSchema
 *   that of one `transports.<name>` entry; config.ts's parseSchedulerConfig() parses with them
 *   and resolves the result. SchedulerConfigInput is the input's type. parseDurationSec()
 *   reads a time into whole seconds.
 *
 *   Input uses Postfix's parameter names. Globals: `default_destination_concurrency_limit`,
 *   `qmgr_message_active_limit`, `minimal_backoff_time`, … Per transport, under
 *   `transports.<name>`, the override suffix without the leading underscore:
 *   `destination_concurrency_limit`, `delivery_slot_cost`, … (Postfix writes these as
 *   `<name>_destination_concurrency_limit` in main.cf.) Times accept seconds as a number or
 *   a string with a unit: "300s", "5m", "4h", "5d", "1w". Feedback accepts "x", "x/y",
 *   "x/concurrency" and "x/sqrt_concurrency" (the last is the relay's, spec §12.1).
 * INVARIANTS
 *   A parsed count is an integer within its bounds, a parsed time whole seconds within its
 *   bounds, a parsed feedback a Feedback.
 * ERRORS
 *   A bad value is an issue at its path, as is an unknown key (strict objects, no silent typos).
 */
import { z } from "zod";
import { parseFeedback } from "./feedback";

const UNIT_SEC: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };
const DURATION = /^(\d+)\s*([smhdw]?)$/;

/** Parses "300s", "5d", 300 … into whole seconds, or null. */
export function parseDurationSec(v: number | string): number | null {
  if (typeof v === "number") return Number.isInteger(v) && v >= 0 ? v : null;
  const m = DURATION.exec(v.trim());
  if (!m) return null;
  return Number(m[1]) * (UNIT_SEC[m[2] || "s"] ?? 1);
}

const int = (min: number, max = 2 ** 31 - 1) => z.number().int().min(min).max(max);
const duration = (minSec: number, maxSec = 100 * 86400) =>
  z.union([z.number(), z.string()]).transform((v, ctx) => {
    const sec = parseDurationSec(v);
    if (sec === null) {
      ctx.addIssue({ code: "custom", message: `"${v}" is not a duration (e.g. 300, "300s", "5m", "4h", "5d")` });
      return z.NEVER;
    }
    if (sec < minSec || sec > maxSec) {
      ctx.addIssue({ code: "custom", message: `${sec}s is outside [${minSec}s, ${maxSec}s]` });
      return z.NEVER;
    }
    return sec;
  });
const feedback = z.string().transform((v, ctx) => {
  const r = parseFeedback(v, "relay");
  if (!r.ok) {
    ctx.addIssue({ code: "custom", message: r.error });
    return z.NEVER;
  }
  return r.feedback;
});

/** Per-transport parameter schemas (suffix names), shared by the global defaults. */
const transportFields = {
  initial_destination_concurrency: int(1),
  destination_concurrency_limit: int(0),
  destination_recipient_limit: int(0),
  destination_concurrency_positive_feedback: feedback,
  destination_concurrency_negative_feedback: feedback,
  destination_concurrency_failed_cohort_limit: int(0),
  destination_rate_delay: duration(0),
  transport_rate_delay: duration(0),
  delivery_slot_cost: int(0),
  delivery_slot_loan: int(0),
  delivery_slot_discount: int(0, 100),
  minimum_delivery_slots: int(0),
  recipient_limit: int(0),
  extra_recipient_limit: int(0),
  recipient_refill_limit: int(1),
  recipient_refill_delay: duration(1),
  process_limit: int(1),
  destination_concurrency_ceiling_memory: duration(0),
  destination_concurrency_probe_delay: duration(1),
};

export const transportSchema = z.strictObject(transportFields).partial();

export const globalSchema = z
  .strictObject({
    initial_destination_concurrency: int(1),
    default_destination_concurrency_limit: int(0),
    default_destination_recipient_limit: int(0),
    default_destination_concurrency_positive_feedback: feedback,
    default_destination_concurrency_negative_feedback: feedback,
    default_destination_concurrency_failed_cohort_limit: int(0),
    default_destination_rate_delay: duration(0),
    default_transport_rate_delay: duration(0),
    default_delivery_slot_cost: int(0),
    default_delivery_slot_loan: int(0),
    default_delivery_slot_discount: int(0, 100),
    default_minimum_delivery_slots: int(0),
    default_recipient_limit: int(0),
    default_extra_recipient_limit: int(0),
    default_recipient_refill_limit: int(1),
    default_recipient_refill_delay: duration(1),
    default_process_limit: int(1),
    default_destination_concurrency_ceiling_memory: duration(0),
    default_destination_concurrency_probe_delay: duration(1),
    qmgr_message_active_limit: int(1),
    qmgr_message_recipient_limit: int(1),
    qmgr_message_recipient_minimum: int(1),
    queue_run_delay: duration(1),
    minimal_backoff_time: duration(1),
    maximal_backoff_time: duration(1),
    maximal_queue_lifetime: duration(0),
    bounce_queue_lifetime: duration(0),
    delay_warning_time: duration(0),
    transport_retry_time: duration(1),
    destination_idle_memory: duration(0),
    recipient_delimiter: z
      .string()
      .max(8)
      .regex(/^[^@\s]*$/, "must not contain @ or spaces"),
    defer_transports: z.array(z.string().min(1)),
    reply_rules: z.array(z.unknown()),
    policy_tags: z.array(z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "a tag name")).max(8),
    policy_combinations: z.array(
      z
        .string()
        .regex(
          /^(tenant|jobid|bulk|egress|site|transport|dest)(\+(tenant|jobid|bulk|egress|site|transport|dest))+$/,
          'e.g. "egress+site": two or more of tenant, jobid, bulk, egress, site, transport, dest joined by +',
        ),
    ),
    transports: z.record(z.string().regex(/^[a-z0-9][a-z0-9_.-]*$/i, "bad transport name"), transportSchema),
  })
  .partial();

/** Raw configuration input (Postfix parameter names). */
export type SchedulerConfigInput = z.input<typeof globalSchema>;
