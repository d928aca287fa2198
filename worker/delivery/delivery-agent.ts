/**
 * DeliveryAgent: a delivery agent as a Durable Object (DELIVERY = "agents"), one of a pool of
 * agentPool(process_limit) per Transport DO, shared by its destinations as Postfix's smtp(8)
 * processes are (agentName). The Transport DO hands it entries it selected, and each starts its
 * SMTP session at once, reusing a cached connection to its host when one is idle; the work
 * itself is worker/delivery/agent-work.ts. Nothing is stored: an entry the agent loses (the
 * object restarted) is left to its lease in the Transport DO, which retries it.
 *
 * RPC
 *   deliver(jobs)   takes the entries and returns at once; their outcomes are reported to the
 *                   Transport DO, the Outbox, the Destination DO and the D1 index as the
 *                   `deliver` queue consumer reports them.
 *   holding(ids)    those of the entries it holds (AgentWork.holding): the Transport DO asks
 *                   about entries leased for long, and retries the ones no agent holds.
 *   idleSessions()  cached connections held now (tests).
 */
import { DurableObject } from "cloudflare:workers";
import { AgentWork } from "./agent-work";
import type { DeliverJob } from "../model/delivery";

export class DeliveryAgent extends DurableObject<Env> {
  private readonly work: AgentWork;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.work = new AgentWork(env, (p) => ctx.waitUntil(p));
  }

  async deliver(jobs: DeliverJob[]): Promise<void> {
    this.work.take(jobs);
  }

  async holding(entryIds: number[]): Promise<number[]> {
    return this.work.holding(entryIds);
  }

  async idleSessions(): Promise<number> {
    return this.work.idleSessions();
  }
}
