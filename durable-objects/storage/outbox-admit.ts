/**
 * Admission of a message's decided recipients to their Transport DOs, from the Outbox itself
 * (Outbox.classify): one RPC per transport, idempotent by core message id there.
 *
 * DESCRIPTION
 *   admitPlan(env, plan)  admits the plan's decided recipients, one call per transport, under
 *                         the plan's admission id (`<id>`, or `<id>#<n>` after a release or
 *                         requeue); returns the indexes admitted, and `active`: every one of
 *                         them went into the active queue of a self-dispatching transport, so
 *                         the delivery stage will report on them soon (and its index write will
 *                         carry this stage's events too). A Transport DO always takes
 *                         the message (into its incoming queue when its active queue is full);
 *                         should one ever refuse, this throws and the recipients stay `incoming`.
 *   admitAll(storage, env, ids, nowMs)  for each of `ids` whose decided recipients are due
 *                         (claimClassifyWork), admitPlan concurrently, then one transaction
 *                         marks the admitted recipients ready (markReady). Returns the messages
 *                         whose recipients all went into an active queue, and those whose
 *                         admission failed (still `incoming` with their decisions: classifying
 *                         them again admits the same recipients).
 */
import { claimClassifyWork, markReady } from "./outbox-store";
import type { ClassifyWork } from "./outbox-types";

/** Admits the plan's decided recipients; returns their indexes, and whether all went into an active queue. */
export async function admitPlan(env: Env, plan: ClassifyWork): Promise<{ idxs: number[]; active: boolean }> {
  const byTransport = new Map<string, { idx: number; address: string; nexthop: string }[]>();
  for (const r of plan.rcpts) {
    if (r.transport === null || r.nexthop === null) continue;
    const group = byTransport.get(r.transport) ?? [];
    group.push({ idx: r.idx, address: r.address, nexthop: r.nexthop });
    byTransport.set(r.transport, group);
  }
  const answers = await Promise.all([...byTransport].map(async ([transport, rcpts]) => {
    const r = await env.TRANSPORT_QUEUE.getByName(transport).admit({
      id: plan.admitId ?? plan.id, createTime: Math.floor(plan.createdAt / 1000), tenant: plan.tenant,
      rcpts: rcpts.map(({ address, nexthop }) => ({ address, transport, nexthop })),
    });
    if (!r.admitted) throw new Error(`transport ${transport} has no room for message ${plan.id}`);
    return r.active === true;
  }));
  return { idxs: [...byTransport.values()].flat().map((r) => r.idx), active: answers.length > 0 && answers.every(Boolean) };
}

/** Admits the due decided recipients of `ids` and marks them ready; see the header. */
export async function admitAll(storage: DurableObjectStorage, env: Env, ids: string[], nowMs: number): Promise<{ active: Set<string>; failed: string[] }> {
  const plans = ids.map((id) => claimClassifyWork(storage.sql, id, nowMs)).filter((p): p is ClassifyWork => p !== null);
  const settled = await Promise.allSettled(plans.map((p) => admitPlan(env, p)));
  const active = new Set<string>();
  const failed: string[] = [];
  storage.transactionSync(() => settled.forEach((s, i) => {
    const id = plans[i]!.id;
    if (s.status === "rejected") {
      failed.push(id);
      console.error(JSON.stringify({ error: "outbox: admission failed (classified again)", id, detail: s.reason instanceof Error ? s.reason.message : String(s.reason) }));
      return;
    }
    markReady(storage.sql, id, s.value.idxs, Date.now());
    if (s.value.active) active.add(id);
  }));
  return { active, failed };
}
