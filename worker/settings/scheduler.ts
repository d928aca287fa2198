/**
 * The scheduler configuration of this deployment: SCHEDULER_CONFIG (Postfix's parameter names,
 * JSON) over the core's defaults. One relay default depends on the delivery agent: the learned
 * session ceiling (§12.7) reads a refusal's `busy` as the sessions open at the server, which only
 * the DeliveryAgent objects give (with the `deliver` queue, entries waiting in the queue count as
 * busy too, and it would learn nonsense), so with DELIVERY = "queue" it is off unless
 * SCHEDULER_CONFIG sets it.
 *
 * Another depends on SMARTHOST: when it is set, the default transport (DEFAULT_TRANSPORT, "smtp")
 * carries the mail to that one server, the user's own relay or provider, and its destination
 * window may grow to SMARTHOST_CONCURRENCY_LIMIT (200) sessions instead of Postfix's 20, and its
 * process_limit is as much (instead of 100), unless SCHEDULER_CONFIG sets
 * default_destination_concurrency_limit or that transport's destination_concurrency_limit (and
 * default_process_limit or its process_limit for the second). Each entry's time in flight
 * includes the relay's calls to its Outbox and Transport objects besides the SMTP transaction,
 * so a smaller window, not the server, is what bound delivery to one smarthost (docs/delivery.md
 * has the measurements). The window still starts at 5 and grows only with successful
 * deliveries; a refusal shrinks it as for any destination.
 *
 * replyRulesOf(env) the configuration's reply rules (core/reply-rules.ts), for the delivery stage's
 * defer and bounce rules; policyTagsOf(env) its policy_tags, the tags the Outbox hands the
 * Transport DOs with each admission; both parsed once per isolate and configuration.
 */
import { mustParseSchedulerConfig, type SchedulerConfig } from "../../durable-objects/core";
import type { ReplyRule } from "../../durable-objects/core/reply-rules";
import { settingsOf } from "./settings";

/** The default transport's window limit when SMARTHOST is set (see the header). */
export const SMARTHOST_CONCURRENCY_LIMIT = 200;

type ConfigEnv = Pick<Env, "SCHEDULER_CONFIG" | "DELIVERY"> & Partial<Pick<Env, "SMARTHOST" | "DEFAULT_TRANSPORT">>;

/**
 * The scheduler configuration of an env, parsed once per isolate and configuration (every
 * Transport and Destination DO of the isolate shares it: nothing mutates a configuration). A
 * parse per object constructed cost each new Destination DO a schema validation, a few ms of CPU
 * for every new domain of the many-domain bench.
 */
export function schedulerConfigOf(env: ConfigEnv): SchedulerConfig {
  return cachedConfig(env);
}

function parseConfig(env: ConfigEnv): SchedulerConfig {
  const input = (env.SCHEDULER_CONFIG ? JSON.parse(env.SCHEDULER_CONFIG) : {}) as Record<string, unknown>;
  if (!settingsOf(env).agents && !("default_destination_concurrency_ceiling_memory" in input))
    input.default_destination_concurrency_ceiling_memory = 0;
  if (settingsOf(env).smarthost && !("default_destination_concurrency_limit" in input)) {
    const name = settingsOf(env).defaultTransport;
    const transports = (input.transports ?? {}) as Record<string, Record<string, unknown> | undefined>;
    // A malformed `transports` is left for the parser to refuse with its own message.
    if (
      typeof transports === "object" &&
      !Array.isArray(transports) &&
      !("destination_concurrency_limit" in (transports[name] ?? {}))
    ) {
      // The transport's process_limit follows (it caps the window), unless set.
      const own = transports[name] ?? {};
      const processLimit =
        "process_limit" in own || "default_process_limit" in input
          ? {}
          : { process_limit: SMARTHOST_CONCURRENCY_LIMIT };
      input.transports = {
        ...transports,
        [name]: { ...own, destination_concurrency_limit: SMARTHOST_CONCURRENCY_LIMIT, ...processLimit },
      };
    }
  }
  return mustParseSchedulerConfig(input);
}

let cache: { key: string; config: SchedulerConfig } | null = null;

function cachedConfig(env: ConfigEnv): SchedulerConfig {
  const key = `${env.DELIVERY}\n${env.SMARTHOST ?? ""}\n${env.DEFAULT_TRANSPORT ?? ""}\n${env.SCHEDULER_CONFIG ?? ""}`;
  if (cache?.key !== key) cache = { key, config: parseConfig(env) };
  return cache.config;
}

/** The reply rules of this deployment's configuration (see the header). */
export function replyRulesOf(env: ConfigEnv): readonly ReplyRule[] {
  return cachedConfig(env).global.replyRules ?? [];
}

/** The tag names whose values are pickup-policy keys (see the header). */
export function policyTagsOf(env: ConfigEnv): readonly string[] {
  return cachedConfig(env).global.policyTags ?? [];
}
