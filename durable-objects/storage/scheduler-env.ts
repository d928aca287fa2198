/**
 * The scheduler configuration of this deployment: SCHEDULER_CONFIG (Postfix's parameter names,
 * JSON) over the core's defaults. One relay default depends on the delivery agent: the learned
 * session ceiling (§12.7) reads a refusal's `busy` as the sessions open at the server, which only
 * the DeliveryAgent objects give (with the `deliver` queue, entries waiting in the queue count as
 * busy too, and it would learn nonsense), so with DELIVERY = "queue" it is off unless
 * SCHEDULER_CONFIG sets it.
 */
import { mustParseSchedulerConfig, type SchedulerConfig } from "../core";

export function schedulerConfigOf(env: Pick<Env, "SCHEDULER_CONFIG" | "DELIVERY">): SchedulerConfig {
  const input = (env.SCHEDULER_CONFIG ? JSON.parse(env.SCHEDULER_CONFIG) : {}) as Record<string, unknown>;
  if (env.DELIVERY !== "agents" && !("default_destination_concurrency_ceiling_memory" in input)) input.default_destination_concurrency_ceiling_memory = 0;
  return mustParseSchedulerConfig(input);
}
