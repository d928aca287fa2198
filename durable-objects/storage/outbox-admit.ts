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
 */
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
