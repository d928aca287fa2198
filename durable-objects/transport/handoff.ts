/**
 * How the Transport DO hands selected entries to a delivery agent (DELIVERY):
 *   "queue"   the `deliver` queue, one message per entry; its consumer runs a batch's sessions.
 *   "agents"  DeliveryAgent objects, a pool of agentPool(process_limit) per Transport DO, shared by
 *             its destinations (agentName): an entry goes to the first of its destination's
 *             slots whose agent holds fewer than AGENT_SESSIONS entries, preferring one whose
 *             connection to the destination was just left idle (assign), so each starts its
 *             session at once and the window counts sessions, not queued jobs. One RPC per agent
 *             per hand-off, however many entries it carries. A new domain needs no object of its
 *             own: the pool is the transport's process_limit in agents, as Postfix's is in smtp(8)
 *             processes.
 *
 * DESCRIPTION
 *   new Handoff(env, now?, scheduler?)   env() is read at each hand-off; now() in ms; scheduler:
 *                            this Transport DO's name, given to the jobs of a shard (schedulerName).
 *   send(entries, until, caller?)  hands the entries over; answers the ids that could not be
 *                          handed over and the error (the caller reports them as crashed), and
 *                          the jobs for `caller`, the agent whose report runs this hand-off: they
 *                          go back with its answer (TransportQueue.reportAndTake). An entry is
 *                          `pending` while its hand-off runs.
 *   pending(entryId)       whether the entry is being handed over now.
 *   release(entryId, leftIdle) the entry was reported (or crashed): its agent slot is free;
 *                          `leftIdle` when its session ended well, so its connection waits idle in the
 *                          agent's cache (not after a refusal, a lost connection or a crash).
 *   check(entries)         of entries leased for long (DELIVERY = "agents"), those no agent holds
 *                          (`lost`: the answer that carried them was lost, or their agent
 *                          restarted; the caller retries them) and those one holds (`held`). An
 *                          entry handed over before a restart has no known agent: every agent of
 *                          the pool is asked (once per restart, in one call each for all such
 *                          entries). An agent that does not answer within 10 s leaves its entries
 *                          undecided.
 *
 * INVARIANTS
 *   In memory only: after a restart the slots of entries still in flight are unknown (until
 *   check() finds them), so an agent may be given more than AGENT_SESSIONS entries for a while;
 *   it queues the extra ones. An entry is `lost` only when every agent that may hold it answered.
 */
import { AGENT_SESSIONS, SESSION_IDLE_MS, agentName, agentPool, type DeliverJob } from "../../worker/model/delivery";
import { toDispatched, toJob, type DispatchedEntry } from "./transport-types";
import type { Entry } from "../core";
import type { StoredRecipient } from "./sqlite-source";
import { settingsOf } from "../../worker/settings/settings";

/** How long check() waits for an agent's answer, ms. */
const CHECK_ANSWER_MS = 10_000;
/** Destinations in the warm map before those without an idle connection are dropped from it. */
export const WARM_PRUNE_AT = 1024;

export class Handoff {
  private readonly handing = new Set<number>();
  /** Entry → its agent and destination (DELIVERY = "agents"), and entries per agent. */
  private readonly agentOf = new Map<number, { name: string; dest: string }>();
  private readonly load = new Map<string, number>();
  /**
   * Per destination, the agents that finished an entry lately, most recent last, with the time
   * (ms): each likely holds an idle cached connection, which the next entry should take. Never
   * an empty list: assign drops the list whose last agent it takes (the prune reads the newest).
   */
  private readonly warm = new Map<string, { name: string; at: number }[]>();

  /**
   * `env` is read at each hand-off (the object's env, which tests may swap); `scheduler` is this
   * Transport DO's name, given to each job when it is a shard's (schedulerName), so that its
   * report comes back here.
   */
  constructor(
    private readonly env: () => Env,
    private readonly now: () => number = Date.now,
    private readonly scheduler?: string,
  ) {}

  /** The DeliveryAgent of an entry's destination's slot, in this Transport DO's pool. */
  private agentOfSlot(e: DispatchedEntry, slot: number): string {
    return agentName(this.scheduler ?? e.transport, e.nexthop, slot, agentPool(e.processLimit));
  }

  private job(e: DispatchedEntry, until: number): DeliverJob {
    const job = toJob(e, until);
    return this.scheduler !== undefined && this.scheduler !== e.transport ? { ...job, scheduler: this.scheduler } : job;
  }

  pending(entryId: number): boolean {
    return this.handing.has(entryId);
  }

  async send(
    entries: DispatchedEntry[],
    until: number,
    caller?: string,
  ): Promise<{ failed: number[]; error?: unknown; inline: DeliverJob[] }> {
    for (const e of entries) this.handing.add(e.entryId);
    const env = this.env();
    try {
      if (!settingsOf(env).agents) {
        try {
          await env.DELIVER.sendBatch(entries.map((e) => ({ body: this.job(e, until), contentType: "json" as const })));
          return { failed: [], inline: [] };
        } catch (error) {
          return { failed: entries.map((e) => e.entryId), error, inline: [] };
        }
      }
      const byAgent = new Map<string, DeliverJob[]>();
      for (const e of entries) {
        const name = this.assign(e);
        byAgent.set(name, [...(byAgent.get(name) ?? []), { ...this.job(e, until), agent: name }]);
      }
      // The calling agent's entries go back with its report's answer, not in a call of their own.
      const inline = caller !== undefined ? (byAgent.get(caller) ?? []) : [];
      if (caller !== undefined) byAgent.delete(caller);
      const failed: number[] = [];
      let error: unknown;
      await Promise.all(
        [...byAgent].map(async ([name, jobs]) => {
          try {
            await env.DELIVERY_AGENT.getByName(name).deliver(jobs);
          } catch (e) {
            error = e;
            for (const j of jobs) {
              failed.push(j.entryId);
              this.release(j.entryId, false);
            }
          }
        }),
      );
      return error === undefined ? { failed, inline } : { failed, error, inline };
    } finally {
      for (const e of entries) this.handing.delete(e.entryId);
    }
  }

  async check(entries: readonly Entry<StoredRecipient>[]): Promise<{ lost: number[]; held: number[] }> {
    const asked = new Map<number, { e: DispatchedEntry; names: string[] }>();
    const byAgent = new Map<string, number[]>();
    for (const entry of entries) {
      const e = toDispatched(entry);
      if (this.handing.has(e.entryId)) continue; // its hand-off runs now
      const known = this.agentOf.get(e.entryId)?.name;
      // Every agent an entry can have been handed to: the destination's slots cover the pool.
      const names =
        known !== undefined
          ? [known]
          : Array.from({ length: agentPool(e.processLimit) }, (_, s) => this.agentOfSlot(e, s));
      asked.set(e.entryId, { e, names });
      for (const n of names) byAgent.set(n, [...(byAgent.get(n) ?? []), e.entryId]);
    }
    const holder = new Map<number, string>();
    const silent = new Set<string>();
    await Promise.all(
      [...byAgent].map(async ([name, ids]) => {
        let timer: ReturnType<typeof setTimeout> | undefined;
        try {
          // An agent too busy to answer in time is asked again at the next check.
          const late = new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error("no answer")), CHECK_ANSWER_MS);
          });
          for (const id of await Promise.race([this.env().DELIVERY_AGENT.getByName(name).holding(ids), late]))
            holder.set(id, name);
        } catch {
          silent.add(name);
        } finally {
          clearTimeout(timer);
        }
      }),
    );
    const lost: number[] = [],
      held: number[] = [];
    for (const [id, { e, names }] of asked) {
      const name = holder.get(id);
      if (name !== undefined) {
        held.push(id);
        if (!this.agentOf.has(id)) this.take(e, name, `${e.transport}/${e.nexthop}`);
      } else if (!names.some((n) => silent.has(n))) lost.push(id);
    }
    return { lost, held };
  }

  release(entryId: number, leftIdle = true): void {
    const held = this.agentOf.get(entryId);
    if (held === undefined) return;
    this.agentOf.delete(entryId);
    const n = (this.load.get(held.name) ?? 1) - 1;
    if (n > 0) this.load.set(held.name, n);
    else this.load.delete(held.name);
    if (!leftIdle) return;
    const warm = (this.warm.get(held.dest) ?? []).filter((w) => this.now() - w.at < SESSION_IDLE_MS);
    warm.push({ name: held.name, at: this.now() });
    // A destination's list outlives its idle connections only until the map grows: then every
    // list whose newest connection has closed goes (one per destination ever seen, otherwise).
    if (this.warm.size >= WARM_PRUNE_AT)
      for (const [dest, list] of this.warm)
        if (this.now() - list[list.length - 1]!.at >= SESSION_IDLE_MS) this.warm.delete(dest);
    this.warm.set(held.dest, warm.slice(-4 * AGENT_SESSIONS));
  }

  /**
   * The agent for an entry: one that finished an entry of its destination within the last
   * SESSION_IDLE_MS and has room (most recent first), since its connection waits idle in its
   * cache; Postfix's smtp processes share one connection cache, and this gives agents the same
   * effect (a new connection to a server at its session limit is refused). Else the lowest slot
   * with room.
   */
  private assign(e: DispatchedEntry): string {
    const dest = `${e.transport}/${e.nexthop}`;
    const warm = this.warm.get(dest) ?? [];
    for (let i = warm.length - 1; i >= 0; i--) {
      const w = warm[i]!;
      if (this.now() - w.at >= SESSION_IDLE_MS) break;
      if ((this.load.get(w.name) ?? 0) < AGENT_SESSIONS) {
        warm.splice(i, 1);
        if (warm.length === 0) this.warm.delete(dest);
        return this.take(e, w.name, dest);
      }
    }
    // The pool has room for process_limit entries; after a restart loads are unknown until
    // check() finds them, and an agent given more than AGENT_SESSIONS queues the extra ones.
    let least = this.agentOfSlot(e, 0);
    for (let slot = 0; slot < agentPool(e.processLimit); slot++) {
      const name = this.agentOfSlot(e, slot);
      if ((this.load.get(name) ?? 0) < AGENT_SESSIONS) return this.take(e, name, dest);
      if ((this.load.get(name) ?? 0) < (this.load.get(least) ?? 0)) least = name;
    }
    return this.take(e, least, dest);
  }

  private take(e: DispatchedEntry, name: string, dest: string): string {
    this.load.set(name, (this.load.get(name) ?? 0) + 1);
    this.agentOf.set(e.entryId, { name, dest });
    return name;
  }
}
