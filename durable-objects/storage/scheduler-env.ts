/**
 * The scheduler configuration of this deployment: SCHEDULER_CONFIG (Postfix's parameter names,
 * JSON) over the core's defaults. One relay default depends on the delivery agent: the learned
 * session ceiling (§12.7) reads a refusal's `busy` as the sessions open at the server, which only
 * the DeliveryAgent objects give (with the `deliver` queue, entries waiting in the queue count as
 * busy too, and it would learn nonsense), so with DELIVERY = "queue" it is off unless
 * SCHEDULER_CONFIG sets it.
 *
 * replyRulesOf(env) the configuration's reply rules (core/reply-rules.ts), for the delivery stage's
 * defer and bounce rules; policyTagsOf(env) its policy_tags, the tags the Outbox hands the
 * Transport DOs with each admission; both parsed once per isolate and configuration.
 */
import { mustParseSchedulerConfig, type SchedulerConfig } from "../core";
import type { ReplyRule } from "../core/reply-rules";

export function schedulerConfigOf(env: Pick<Env, "SCHEDULER_CONFIG" | "DELIVERY">): SchedulerConfig {
  const input = (env.SCHEDULER_CONFIG ? JSON.parse(env.SCHEDULER_CONFIG) : {}) as Record<string, unknown>;
  if (env.DELIVERY !== "agents" && !("default_destination_concurrency_ceiling_memory" in input)) input.default_destination_concurrency_ceiling_memory = 0;
  return mustParseSchedulerConfig(input);
}

let cache: { key: string; config: SchedulerConfig } | null = null;

function cachedConfig(env: Pick<Env, "SCHEDULER_CONFIG" | "DELIVERY">): SchedulerConfig {
  const key = `${env.DELIVERY}\n${env.SCHEDULER_CONFIG ?? ""}`;
  if (cache?.key !== key) cache = { key, config: schedulerConfigOf(env) };
  return cache.config;
}

/** The reply rules of this deployment's configuration (see the header). */
export function replyRulesOf(env: Pick<Env, "SCHEDULER_CONFIG" | "DELIVERY">): readonly ReplyRule[] {
  return cachedConfig(env).global.replyRules ?? [];
}

/** The tag names whose values are pickup-policy keys (see the header). */
export function policyTagsOf(env: Pick<Env, "SCHEDULER_CONFIG" | "DELIVERY">): readonly string[] {
  return cachedConfig(env).global.policyTags ?? [];
}
