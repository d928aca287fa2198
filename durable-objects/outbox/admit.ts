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
 *                         AdmissionBatch), a one-recipient message that went into an active queue
 *                         is left unmarked and returned: its outcome marks it in the write it
 *                         makes anyway, or its index lag does (unmarked.ts).
 *   inFlowDelayMsOf       IN_FLOW_DELAY_MS, the pause of an accept's answer while the Outbox's
 *                         inflow is over (Postfix's in_flow_delay; see Outbox.accept).
 *   AdmissionBatch        admission of accepted messages, coalesced only under load, by Nagle's
 *                         rule: the Outbox answers an accept once the run that admits its
 *                         messages has ended (add resolves then, failed or not), and an idle shard (no run in flight, none started within ADMIT_BATCH_MS)
 *                         admits them at once, with no timer. While a run is in flight, or one
 *                         started less than ADMIT_BATCH_MS ago, what arrives waits and goes in the
 *                         next run, one gap after the last began and not before it ended: one
 *                         admitAll (one Transport.admitMany per transport) for all of it. So an
 *                         idle relay adds no delay, and a busy shard makes at most one run per
 *                         gap, whose size grows with the load (group commit). A run takes at
 *                         most ADMIT_BATCH_MAX messages, the rest go in the next. A request that
 *                         brings ADMIT_AT_ONCE messages or more is a batch already: its run
 *                         starts at once (after one in flight). ADMIT_BATCH_MS "0": each accept
 *                         admits its own messages before it answers.
 *
 * INVARIANTS
 *   The wait only ever delays work that is already durable: a message waiting in it is stored
 *   `incoming` with its decisions. The accept stores it out of the index of waiting messages (it
 *   answers only after the admission, which the Transport DO then holds: an entry there would
 *   be a row written for nothing); a failed run puts its messages in that index (keepWaiting),
 *   and the sweeper hands them to the classify queue after OUTBOX_GRACE_SECONDS, whose consumer
 *   admits the recorded decisions. An Outbox that stops before the run ended gave no answer; the
 *   messages it stored are found by the cron's scan (unadmitted.ts) and classified likewise.
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

/** Most messages one coalesced admission takes (the rest wait for the next run). */
export const ADMIT_BATCH_MAX = 500;

/** A request bringing this many messages or more starts a run at once (see the header). */
export const ADMIT_AT_ONCE = 10;

/** Coalesced admission of accepted messages (see the header). */
export class AdmissionBatch {
  private readonly pending = new Set<string>();
  /** Per message given to add(), the callers waiting for the run that takes it to end. */
  private readonly waiters = new Map<string, (() => void)[]>();
  private timer: ReturnType<typeof setTimeout> | null = null;
  private timerAt = 0;
  private running: Promise<void> = Promise.resolve();
  private busy = false;
  private lastStart = -Infinity;

  /** `admit` admits and indexes the given messages; it runs for one batch at a time. */
  constructor(
    private readonly gapMs: number,
    private readonly admit: (ids: string[]) => Promise<void>,
    private readonly now: () => number = Date.now,
  ) {}

  /** Messages waiting for the next run. */
  get waiting(): number {
    return this.pending.size;
  }

  /** Whether a message waits for a run or is in the one under way. */
  has(id: string): boolean {
    return this.waiters.has(id);
  }

  /** Resolves once the runs that take `ids` have ended: only for messages has() holds, or that add() takes. */
  whenDone(ids: readonly string[]): Promise<unknown> {
    return Promise.all(
      ids.map((id) => new Promise<void>((r) => this.waiters.set(id, [...(this.waiters.get(id) ?? []), r]))),
    );
  }

  /** Adds accepted messages and returns once the run that takes them has ended (see the header). */
  async add(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    if (this.gapMs === 0) {
      // Each accept's own run, before it returns; has() holds until it ends, as for a coalesced run.
      void this.whenDone(ids);
      const run = this.serially([...ids]);
      run.then(
        () => this.settle(ids),
        () => this.settle(ids),
      );
      return run;
    }
    const done = this.whenDone(ids);
    for (const id of ids) this.pending.add(id);
    const wait = ids.length >= ADMIT_AT_ONCE ? 0 : Math.max(0, this.lastStart + this.gapMs - this.now());
    // Idle (no run in flight, none started within the gap): at once, no timer.
    if (wait === 0 && !this.busy) void this.flush();
    else this.arm(wait);
    await done;
  }

  /** The run that took `ids` ended: their waiters go on. */
  private settle(ids: readonly string[]): void {
    for (const id of ids) {
      for (const r of this.waiters.get(id) ?? []) r();
      this.waiters.delete(id);
    }
  }

  /** Runs a flush `ms` from now, unless one is due sooner. */
  private arm(ms: number): void {
    const at = this.now() + ms;
    if (this.timer !== null && this.timerAt <= at) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, ms);
  }

  private async flush(): Promise<void> {
    // While a run is under way, what arrives waits and joins the next run whole (group commit): a
    // slow Transport DO makes the runs larger, not more numerous.
    await this.running;
    if (this.pending.size === 0 || this.busy) return;
    const ids = [...this.pending].slice(0, ADMIT_BATCH_MAX);
    for (const id of ids) this.pending.delete(id);
    // What was waiting goes now: a timer armed for it has no more work (what comes is re-armed from this run).
    if (this.timer !== null && this.pending.size === 0) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.busy = true;
    this.lastStart = this.now();
    try {
      await this.serially(ids);
    } catch (e) {
      console.error(
        JSON.stringify({
          error: "outbox: coalesced admission failed (the sweeper classifies them again)",
          messages: ids.length,
          detail: e instanceof Error ? e.message : String(e),
        }),
      );
    } finally {
      this.busy = false;
      this.settle(ids);
    }
    // What arrived during the run (or a full run left behind) goes one gap after this run began.
    if (this.pending.size > 0)
      this.arm(this.pending.size >= ADMIT_AT_ONCE ? 0 : Math.max(0, this.lastStart + this.gapMs - this.now()));
  }

  private serially(ids: string[]): Promise<void> {
    const run = this.running.then(() => this.admit(ids));
    this.running = run.catch(() => undefined);
    return run;
  }
}
