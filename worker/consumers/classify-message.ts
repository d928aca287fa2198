/**
 * Classification of one message, in three restartable steps (qmail-send's todo processing).
 *
 * DESCRIPTION
 *   decideMessage(env, id, lookups)  reads the message's incoming recipients from its Outbox;
 *                                    for those without a recorded decision: rewrite, resolve,
 *                                    check suppressions, and record the decisions in the Outbox
 *                                    (suppressed recipients end `suppressed` there). Returns the
 *                                    admission plan, or null when nothing is due.
 *   admitPlan(env, plan)             admits the plan's recipients to their Transport DOs, one
 *                                    call per transport (the RPC is idempotent by message and
 *                                    recipient). A Transport DO always takes the message (into its
 *                                    incoming queue when the active queue is full); should one
 *                                    ever refuse, this throws, the message is retried and its
 *                                    recipients stay `incoming`.
 *   classifyMessage(env, id, lookups) all steps, then marks the admitted recipients `ready`;
 *                                    returns the state the index must reflect.
 *
 * INVARIANTS
 *   A stop between any two steps is repaired by running classifyMessage again: decisions are
 *   read back rather than remade, admission is idempotent, and only `incoming` recipients move.
 */
import { outboxName, shardOf } from "../../durable-objects/storage/outbox-ids";
import type { ClassifyResult, ClassifyWork, SyncState } from "../../durable-objects/storage/outbox-types";
import type { Lookups } from "./lookups";
import { resolveRecipient, rewriteAddress, type RouteDefaults } from "./resolve";

/** The Outbox stub of a message. */
export function outboxOf(env: Env, id: string) {
  return env.OUTBOX.getByName(outboxName(shardOf(id)));
}

function defaultsOf(env: Env): RouteDefaults {
  return { transport: env.DEFAULT_TRANSPORT || "smtp", smarthost: env.SMARTHOST ?? "" };
}

function rewriteOrKeep(address: string): string {
  try {
    return rewriteAddress(address);
  } catch {
    return address; // validated at accept; a domain the rewrite rejects still goes to its own nexthop
  }
}

async function decide(env: Env, work: ClassifyWork, lookups: Lookups): Promise<ClassifyResult[]> {
  const undecided = work.rcpts.filter((r) => r.transport === null).map((r) => ({ idx: r.idx, address: rewriteOrKeep(r.address) }));
  const [suppressed, routing] = await Promise.all([lookups.suppressed(work.tenant, undecided.map((r) => r.address)), lookups.routing()]);
  return undecided.map((r): ClassifyResult => {
    if (suppressed.has(r.address.toLowerCase())) return { ...r, status: "suppressed", reason: "on the suppression list" };
    return { ...r, status: "ready", ...resolveRecipient(r.address, work.tenant, routing, defaultsOf(env)) };
  });
}

/** Steps 1–2: the due work, with decisions recorded for every recipient; null when none is due. */
export async function decideMessage(env: Env, id: string, lookups: Lookups): Promise<{ plan: ClassifyWork | null; sync: SyncState | null; stale: boolean }> {
  const outbox = outboxOf(env, id);
  const { work, sync } = await outbox.beginClassify(id);
  if (!work) return { plan: null, sync, stale: false };
  if (work.rcpts.every((r) => r.transport !== null)) return { plan: work, sync, stale: true };
  const plan = await outbox.decide(id, await decide(env, work, lookups));
  return { plan, sync, stale: true };
}

/** Step 3: admits the plan's decided recipients, one RPC per transport; returns their indexes. */
export async function admitPlan(env: Env, plan: ClassifyWork): Promise<number[]> {
  const byTransport = new Map<string, { idx: number; address: string; transport: string; nexthop: string }[]>();
  for (const r of plan.rcpts) {
    if (r.transport === null || r.nexthop === null) continue;
    const group = byTransport.get(r.transport) ?? [];
    group.push({ idx: r.idx, address: r.address, transport: r.transport, nexthop: r.nexthop });
    byTransport.set(r.transport, group);
  }
  await Promise.all([...byTransport].map(async ([transport, rcpts]) => {
    const r = await env.TRANSPORT_QUEUE.getByName(transport).admit({
      id: plan.admitId ?? plan.id, createTime: Math.floor(plan.createdAt / 1000), tenant: plan.tenant,
      rcpts: rcpts.map(({ address, nexthop }) => ({ address, transport, nexthop })),
    });
    // No room in the transport's active queue: the recipients stay `incoming` and the queue retries.
    if (!r.admitted) throw new Error(`transport ${transport} has no room for message ${plan.id}`);
  }));
  return [...byTransport.values()].flat().map((r) => r.idx);
}

/** Classifies a message completely; returns the state for the index (null if the message is unknown). */
export async function classifyMessage(env: Env, id: string, lookups: Lookups): Promise<SyncState | null> {
  const { plan, sync, stale } = await decideMessage(env, id, lookups);
  if (!plan) return stale ? (await outboxOf(env, id).beginClassify(id)).sync : sync;
  const admitted = await admitPlan(env, plan);
  return outboxOf(env, id).markAdmitted(id, admitted);
}
