/**
 * Admission of a message's decided recipients to their Transport DOs, from the Outbox itself
 * (Outbox.classify): one RPC per transport, idempotent by core message id there.
 *
 * DESCRIPTION
 *   admitPlan(env, plan)  admits the plan's decided recipients, one call per Transport DO (a
 *                         transport's, or with TRANSPORT_SHARDS its destination's shard's), under
 *                         the plan's admission id (`<id>`, or `<id>#<n>` after a release or
 *                         requeue); returns the indexes admitted, and `active`: every one of
 *                         them went into the active queue of a self-dispatching transport, so
 *                         the delivery stage will report on them soon (and its index write will
 *                         carry this stage's events too). A Transport DO always takes
 *                         the message (into its incoming queue when its active queue is full);
 *                         should one ever refuse, this throws and the recipients stay `incoming`.
 *   admitPlans(env, plans)  admitPlan for several messages: one Transport.admitMany request per
 *                         transport for all of them (a classify batch's), settled per plan.
 *   admitAll(storage, env, ids, nowMs, claimed?, lazy?)  for each of `ids` whose decided
 *                         recipients are due (claimClassifyWork), admitPlans, then one transaction
 *                         marks the admitted recipients ready (markReady). Returns the messages
 *                         whose recipients all went into an active queue, and those whose
 *                         admission failed (still `incoming` with their decisions: classifying
 *                         them again admits the same recipients). With `lazy` (the accept's
 *                         AdmissionBatch, admission-batch.ts), a one-recipient message that went
 *                         into an active queue is left unmarked and returned: its outcome marks it
 *                         in the write it makes anyway, or its index lag does (unmarked.ts).
 */
import { claimClassifyWork, markReady } from "./classify-state";
import type { ClassifyWork } from "../../worker/model/message";
import type { AdmitAnswer, AdmitRequest } from "../../worker/model/transport";
import { policyTagsOf } from "../../worker/settings/scheduler";
import { settingsOf } from "../../worker/settings/settings";
import { schedulerName } from "../../worker/model/delivery";

/** One admission request of a plan per Transport DO it uses (its decided recipients there; schedulerName). */
function requestsOf(plan: ClassifyWork, policyTags: readonly string[], shards: number): Map<string, AdmitRequest> {
  const byTransport = new Map<string, AdmitRequest>();
  const tags = policyTags.length === 0 ? [] : (plan.tags ?? []).filter((t) => policyTags.includes(t.name));
  for (const r of plan.rcpts) {
    if (r.transport === null || r.nexthop === null) continue;
    const fields = {
      ...(plan.campaign !== undefined ? { jobid: plan.campaign } : {}),
      ...(plan.bulk ? { bulk: true } : {}),
      ...(tags.length > 0 ? { tags: Object.fromEntries(tags.map((t) => [t.name, t.value])) } : {}),
    };
    const scheduler = schedulerName(r.transport, r.nexthop, shards);
    const fresh = (): AdmitRequest => ({
      id: plan.admitId ?? plan.id,
      createTime: Math.floor(plan.createdAt / 1000),
      tenant: plan.tenant,
      ...(Object.keys(fields).length > 0 ? { fields } : {}),
      rcpts: [],
    });
    const req = byTransport.get(scheduler) ?? fresh();
    req.rcpts.push({ address: r.address, transport: r.transport, nexthop: r.nexthop });
    byTransport.set(scheduler, req);
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
export async function admitPlans(
  env: Env,
  plans: ClassifyWork[],
): Promise<PromiseSettledResult<{ idxs: number[]; active: boolean }>[]> {
  const policyTags = policyTagsOf(env);
  const requests = plans.map((p) => requestsOf(p, policyTags, settingsOf(env).transportShards));
  const transports = [...new Set(requests.flatMap((m) => [...m.keys()]))];
  const answers = new Map(
    await Promise.all(
      transports.map(async (t): Promise<[string, PromiseSettledResult<AdmitAnswer[]>]> => {
        const mine = requests.filter((m) => m.has(t)).map((m) => m.get(t)!);
        try {
          return [t, { status: "fulfilled", value: await env.TRANSPORT_QUEUE.getByName(t).admitMany(mine) }];
        } catch (reason) {
          return [t, { status: "rejected", reason }];
        }
      }),
    ),
  );
  // Where each plan's request sits in its transport's admitMany call (request order).
  const counts = new Map<string, number>();
  const positions = requests.map(
    (m) =>
      new Map(
        [...m.keys()].map((t) => {
          const k = counts.get(t) ?? 0;
          counts.set(t, k + 1);
          return [t, k];
        }),
      ),
  );
  return plans.map((plan, i) => {
    let active = requests[i]!.size > 0;
    for (const [t, k] of positions[i]!) {
      const res = answers.get(t)!;
      if (res.status === "rejected") return { status: "rejected", reason: res.reason } as const;
      const a = res.value[k]!;
      if (!a.admitted)
        return { status: "rejected", reason: new Error(`transport ${t} has no room for message ${plan.id}`) } as const;
      active &&= a.active === true;
    }
    return {
      status: "fulfilled",
      value: { idxs: plan.rcpts.filter((r) => r.transport !== null && r.nexthop !== null).map((r) => r.idx), active },
    } as const;
  });
}

/**
 * Admits the due decided recipients of `ids` and marks them ready (`claimed`: their work, already
 * read in this turn); see the header. With `lazy`, a message of one recipient that went into an
 * active queue is not marked: it is returned in `unmarked` (unmarked.ts).
 */
export async function admitAll(
  storage: DurableObjectStorage,
  env: Env,
  ids: string[],
  nowMs: number,
  claimed?: ReadonlyMap<string, ClassifyWork>,
  lazy = false,
): Promise<{ active: Set<string>; failed: string[]; unmarked: { id: string; idxs: number[] }[] }> {
  const plans = ids
    .map((id) => claimed?.get(id) ?? claimClassifyWork(storage.sql, id, nowMs))
    .filter((p): p is ClassifyWork => p !== null);
  const settled = await admitPlans(env, plans);
  const active = new Set<string>();
  const failed: string[] = [];
  const unmarked: { id: string; idxs: number[] }[] = [];
  storage.transactionSync(() =>
    settled.forEach((s, i) => {
      const id = plans[i]!.id;
      if (s.status === "rejected") {
        failed.push(id);
        console.error(
          JSON.stringify({
            error: "outbox: admission failed (classified again)",
            id,
            detail: s.reason instanceof Error ? s.reason.message : String(s.reason),
          }),
        );
        return;
      }
      if (s.value.active) active.add(id);
      if (lazy && s.value.active && plans[i]!.rcpts.length === 1) unmarked.push({ id, idxs: s.value.idxs });
      else markReady(storage.sql, id, s.value.idxs, Date.now());
    }),
  );
  return { active, failed, unmarked };
}
