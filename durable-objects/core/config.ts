/*
 * NAME
 *   config - scheduler parameters with Postfix's names, defaults and bounds (spec §1)
 * DESCRIPTION
 *   parseSchedulerConfig() validates a configuration object strictly and resolves it into a
 *   SchedulerConfig: global (main.cf-level) parameters plus per-transport values, where each
 *   transport's value is its override if given, else the global default_* value. The input's
 *   parameter names, units and bounds are config-schema.ts's; DEFAULTS gives Postfix's defaults.
 *
 *   Relay-only parameters (spec §12): `destination_idle_memory` (default 600 s; 0 behaves
 *   like Postfix), per-transport `process_limit` (default 100), and the learned session ceiling
 *   (§12.7, destination-window.ts): `destination_concurrency_ceiling_memory` (default 3600 s;
 *   0 behaves like Postfix) and `destination_concurrency_probe_delay` (default 1 s).
 * INVARIANTS
 *   Every numeric value is an integer within its bounds; qmgr_message_recipient_limit is
 *   raised to qmgr_message_active_limit if smaller, as Postfix does at start-up;
 *   initial concurrency is clipped to a non-zero concurrency limit; a non-zero
 *   destination_rate_delay forces the concurrency limit to 1.
 * ERRORS
 *   Returns { ok: false, errors } with one "path: problem" line per bad value; unknown keys
 *   are errors (no silent typos).
 */
import { DEFAULT_REPLY_RULES, parseReplyRules, type ReplyRule } from "./reply-rules";
import type { PolicyField } from "./policy";
import { z } from "zod";
import type { Feedback } from "./feedback";
import { initialWindow } from "./destination-window";
import type { RetryParams } from "./retry-policy";
import { globalSchema, transportSchema } from "./config-schema";

/** Resolved per-transport parameters (seconds, counts; Postfix names in comments). */
export interface TransportParams {
  name: string;
  /** initial_destination_concurrency clipped to the limit; default 5. */
  initialConcurrency: number;
  /** destination_concurrency_limit; 0 = unlimited; default 20; forced to 1 by a rate delay. */
  concurrencyLimit: number;
  /** destination_recipient_limit; 0 = unlimited; 1 = per-recipient queues; default 50. */
  recipientLimit: number;
  /** destination_concurrency_positive_feedback; default "1". */
  positiveFeedback: Feedback;
  /** destination_concurrency_negative_feedback; default "1". */
  negativeFeedback: Feedback;
  /** destination_concurrency_failed_cohort_limit; 0 disables dead detection; default 1. */
  failedCohortLimit: number;
  /** destination_rate_delay, seconds; default 0. */
  destinationRateDelay: number;
  /** transport_rate_delay, seconds; default 0. */
  transportRateDelay: number;
  /** delivery_slot_cost k; preemption off when < 2; default 5. */
  slotCost: number;
  /** delivery_slot_loan; default 3. */
  slotLoan: number;
  /** delivery_slot_discount, percent; default 50. */
  slotDiscount: number;
  /** minimum_delivery_slots; default 3. */
  minSlots: number;
  /** recipient_limit: the transport's recipient slot pool; default 20000. */
  rcptPool: number;
  /** extra_recipient_limit: extra pool for preempting jobs; default 1000. */
  extraRcptPool: number;
  /** recipient_refill_limit; default 100. */
  refillLimit: number;
  /** recipient_refill_delay, seconds; default 5. */
  refillDelay: number;
  /** process_limit: entries in flight at most (relay, spec §12.2); default 100. */
  processLimit: number;
  /** destination_concurrency_ceiling_memory, s (relay, §12.7): how long a learned session ceiling is kept; default 3600; 0 = Postfix. */
  ceilingMemory: number;
  /** destination_concurrency_probe_delay, s (relay, §12.7): the least time between two probes past a ceiling. */
  probeDelay: number;
}

/** Resolved global parameters. */
export interface GlobalParams extends RetryParams {
  /** qmgr_message_active_limit; default 20000. */
  messageActiveLimit: number;
  /** qmgr_message_recipient_limit (raised to the active limit); default 20000. */
  messageRecipientLimit: number;
  /** qmgr_message_recipient_minimum; default 10. */
  messageRecipientMinimum: number;
  /** queue_run_delay, seconds; default 300 (Postfix timing tables only). */
  queueRunDelay: number;
  /** transport_retry_time, seconds; default 60. */
  transportRetryTime: number;
  /** destination_idle_memory, seconds (relay, spec §12.4); default 600; 0 = Postfix. */
  destinationIdleMemory: number;
  /** recipient_delimiter; default "" (none). */
  recipientDelimiter: string;
  /** defer_transports; default none. */
  deferTransports: string[];
  /** reply_rules (relay, reply-rules.ts); DEFAULT_REPLY_RULES unless configured; none when absent. */
  replyRules?: readonly ReplyRule[];
  /** policy_combinations (relay, policy.ts): fields whose combination is a pickup-policy key of its own, e.g. ["egress", "site"]; none by default. */
  policyCombinations?: readonly (readonly PolicyField[])[];
  /** policy_tags (relay, policy.ts): tag names whose values are pickup-policy keys (custom fields); none by default. */
  policyTags?: readonly string[];
}

/** A fully resolved configuration. */
export interface SchedulerConfig {
  global: GlobalParams;
  /** Resolved parameters for transports named in the input. */
  transports: Record<string, TransportParams>;
  /** The defaults every other transport gets (name filled in on use). */
  transportDefaults: Omit<TransportParams, "name">;
}

/** Postfix's defaults, in input form. */
export const DEFAULTS = {
  initial_destination_concurrency: 5,
  default_destination_concurrency_limit: 20,
  default_destination_recipient_limit: 50,
  default_destination_concurrency_positive_feedback: "1",
  default_destination_concurrency_negative_feedback: "1",
  default_destination_concurrency_failed_cohort_limit: 1,
  default_destination_rate_delay: 0,
  default_transport_rate_delay: 0,
  default_delivery_slot_cost: 5,
  default_delivery_slot_loan: 3,
  default_delivery_slot_discount: 50,
  default_minimum_delivery_slots: 3,
  default_recipient_limit: 20000,
  default_extra_recipient_limit: 1000,
  default_recipient_refill_limit: 100,
  default_recipient_refill_delay: 5,
  default_process_limit: 100,
  default_destination_concurrency_ceiling_memory: 3600,
  default_destination_concurrency_probe_delay: 1,
  qmgr_message_active_limit: 20000,
  qmgr_message_recipient_limit: 20000,
  qmgr_message_recipient_minimum: 10,
  queue_run_delay: 300,
  minimal_backoff_time: 300,
  maximal_backoff_time: 4000,
  maximal_queue_lifetime: 432000,
  bounce_queue_lifetime: 432000,
  delay_warning_time: 0,
  transport_retry_time: 60,
  destination_idle_memory: 600,
  recipient_delimiter: "",
  defer_transports: [] as string[],
} as const;

/** Result of parsing a configuration. */
export type ConfigResult = { ok: true; config: SchedulerConfig } | { ok: false; errors: string[] };

/** Validates and resolves a configuration (see the module header). */
export function parseSchedulerConfig(input: unknown): ConfigResult {
  const parsed = globalSchema.safeParse(input ?? {});
  if (!parsed.success) {
    return { ok: false, errors: parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`) };
  }
  const defaults = globalSchema.parse(DEFAULTS);
  const g = { ...defaults, ...parsed.data } as Required<z.output<typeof globalSchema>>;
  const replyRules =
    parsed.data.reply_rules === undefined
      ? { ok: true as const, rules: [...DEFAULT_REPLY_RULES] }
      : parseReplyRules(parsed.data.reply_rules);
  if (!replyRules.ok) return { ok: false, errors: replyRules.errors };
  const global: GlobalParams = {
    messageActiveLimit: g.qmgr_message_active_limit,
    messageRecipientLimit: Math.max(g.qmgr_message_recipient_limit, g.qmgr_message_active_limit),
    messageRecipientMinimum: g.qmgr_message_recipient_minimum,
    queueRunDelay: g.queue_run_delay,
    minimalBackoffTime: g.minimal_backoff_time,
    maximalBackoffTime: g.maximal_backoff_time,
    maximalQueueLifetime: g.maximal_queue_lifetime,
    bounceQueueLifetime: g.bounce_queue_lifetime,
    delayWarningTime: g.delay_warning_time,
    transportRetryTime: g.transport_retry_time,
    destinationIdleMemory: g.destination_idle_memory,
    recipientDelimiter: g.recipient_delimiter,
    deferTransports: g.defer_transports,
    replyRules: replyRules.rules,
    policyCombinations: (parsed.data.policy_combinations ?? []).map((c) => c.split("+") as PolicyField[]),
    policyTags: parsed.data.policy_tags ?? [],
  };
  const base: z.output<typeof transportSchema> = {
    initial_destination_concurrency: g.initial_destination_concurrency,
    destination_concurrency_limit: g.default_destination_concurrency_limit,
    destination_recipient_limit: g.default_destination_recipient_limit,
    destination_concurrency_positive_feedback: g.default_destination_concurrency_positive_feedback,
    destination_concurrency_negative_feedback: g.default_destination_concurrency_negative_feedback,
    destination_concurrency_failed_cohort_limit: g.default_destination_concurrency_failed_cohort_limit,
    destination_rate_delay: g.default_destination_rate_delay,
    transport_rate_delay: g.default_transport_rate_delay,
    delivery_slot_cost: g.default_delivery_slot_cost,
    delivery_slot_loan: g.default_delivery_slot_loan,
    delivery_slot_discount: g.default_delivery_slot_discount,
    minimum_delivery_slots: g.default_minimum_delivery_slots,
    recipient_limit: g.default_recipient_limit,
    extra_recipient_limit: g.default_extra_recipient_limit,
    recipient_refill_limit: g.default_recipient_refill_limit,
    recipient_refill_delay: g.default_recipient_refill_delay,
    process_limit: g.default_process_limit,
    destination_concurrency_ceiling_memory: g.default_destination_concurrency_ceiling_memory,
    destination_concurrency_probe_delay: g.default_destination_concurrency_probe_delay,
  };
  const transports: Record<string, TransportParams> = {};
  for (const [name, over] of Object.entries(g.transports ?? {})) {
    transports[name] = { name, ...resolveTransport({ ...base, ...over }) };
  }
  return { ok: true, config: { global, transports, transportDefaults: resolveTransport(base) } };
}

function resolveTransport(t: z.output<typeof transportSchema>): Omit<TransportParams, "name"> {
  const rateDelay = t.destination_rate_delay!;
  const limit = rateDelay > 0 ? 1 : t.destination_concurrency_limit!;
  return {
    initialConcurrency: initialWindow(t.initial_destination_concurrency!, limit),
    concurrencyLimit: limit,
    recipientLimit: t.destination_recipient_limit!,
    positiveFeedback: t.destination_concurrency_positive_feedback!,
    negativeFeedback: t.destination_concurrency_negative_feedback!,
    failedCohortLimit: t.destination_concurrency_failed_cohort_limit!,
    destinationRateDelay: rateDelay,
    transportRateDelay: t.transport_rate_delay!,
    slotCost: t.delivery_slot_cost!,
    slotLoan: t.delivery_slot_loan!,
    slotDiscount: t.delivery_slot_discount!,
    minSlots: t.minimum_delivery_slots!,
    rcptPool: t.recipient_limit!,
    extraRcptPool: t.extra_recipient_limit!,
    refillLimit: t.recipient_refill_limit!,
    refillDelay: t.recipient_refill_delay!,
    processLimit: t.process_limit!,
    ceilingMemory: t.destination_concurrency_ceiling_memory!,
    probeDelay: t.destination_concurrency_probe_delay!,
  };
}

/** The parameters of a transport: its own if configured, else the defaults. */
export function transportParams(cfg: SchedulerConfig, name: string): TransportParams {
  return cfg.transports[name] ?? { name, ...cfg.transportDefaults };
}

/** Parses a configuration that must be valid (tests, defaults); throws with every error otherwise. */
export function mustParseSchedulerConfig(input: unknown): SchedulerConfig {
  const r = parseSchedulerConfig(input);
  if (!r.ok) throw new Error(`invalid scheduler configuration:\n${r.errors.join("\n")}`);
  return r.config;
}
