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
 *   admitPlans(env, plans)  admitPlan for several messages: one Transport.admitMany request per
 *                         transport for all of them (a classify batch's), settled per plan.
 *   admitAll(storage, env, ids, nowMs)  for each of `ids` whose decided recipients are due
 *                         (claimClassifyWork), admitPlans, then one transaction
 *                         marks the admitted recipients ready (markReady). Returns the messages
 *                         whose recipients all went into an active queue, and those whose
 *                         admission failed (still `incoming` with their decisions: classifying
 *                         them again admits the same recipients).
 */
import { claimClassifyWork, markReady } from "./outbox-store";
import type { ClassifyWork } from "./outbox-types";
import type { AdmitRequest } from "../transport-types";

/** One admission request of a plan per transport it uses (its decided recipients there). */
function requestsOf(plan: ClassifyWork): Map<string, AdmitRequest> {
  const byTransport = new Map<string, AdmitRequest>();
  for (const r of plan.rcpts) {
    if (r.transport === null || r.nexthop === null) continue;
    const req = byTransport.get(r.transport) ?? { id: plan.admitId ?? plan.id, createTime: Math.floor(plan.createdAt / 1000), tenant: plan.tenant, rcpts: [] };
    req.rcpts.push({ address: r.address, transport: r.transport, nexthop: r.nexthop });
    byTransport.set(r.transport, req);
  }
  return byTransport;
}

/** Admits the plan's decided recipients; returns their indexes, and whether all went into an active queue. */
export async function admitPlan(env: Env, plan: ClassifyWork): Promise<{ idxs: number[]; active: boolean }> {
  const [answer] = await admitPlans(env, [plan]);
  if (answer!.status === "rejected") throw answer!.reason;
  return answer!.value;
}

/**
 * admitPlan for several plans with one Transport.admitMany request per transport for all of
 * them; settled in order (a plan fails when a transport it uses failed or refused it).
 */
export async function admitPlans(env: Env, plans: ClassifyWork[]): Promise<PromiseSettledResult<{ idxs: number[]; active: boolean }>[]> {
  const requests = plans.map(requestsOf);
  const transports = [...new Set(requests.flatMap((m) => [...m.keys()]))];
  const answers = new Map(await Promise.all(transports.map(async (t): Promise<[string, PromiseSettledResult<{ admitted: boolean; active: boolean }[]>]> => {
    const mine = requests.filter((m) => m.has(t)).map((m) => m.get(t)!);
    try {
      return [t, { status: "fulfilled", value: await env.TRANSPORT_QUEUE.getByName(t).admitMany(mine) }];
    } catch (reason) {
      return [t, { status: "rejected", reason }];
    }
  })));
  // Where each plan's request sits in its transport's admitMany call (request order).
  const counts = new Map<string, number>();
  const positions = requests.map((m) => new Map([...m.keys()].map((t) => { const k = counts.get(t) ?? 0; counts.set(t, k + 1); return [t, k]; })));
  return plans.map((plan, i) => {
    let active = requests[i]!.size > 0;
    for (const [t, k] of positions[i]!) {
      const res = answers.get(t)!;
      if (res.status === "rejected") return { status: "rejected", reason: res.reason } as const;
      const a = res.value[k]!;
      if (!a.admitted) return { status: "rejected", reason: new Error(`transport ${t} has no room for message ${plan.id}`) } as const;
      active &&= a.active === true;
    }
    return { status: "fulfilled", value: { idxs: plan.rcpts.filter((r) => r.transport !== null && r.nexthop !== null).map((r) => r.idx), active } } as const;
  });
}

/** Admits the due decided recipients of `ids` and marks them ready; see the header. */
export async function admitAll(storage: DurableObjectStorage, env: Env, ids: string[], nowMs: number): Promise<{ active: Set<string>; failed: string[] }> {
  const plans = ids.map((id) => claimClassifyWork(storage.sql, id, nowMs)).filter((p): p is ClassifyWork => p !== null);
  const settled = await admitPlans(env, plans);
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
