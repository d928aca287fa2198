/**
 * Outbox: the queue directory. One Durable Object per shard holds each message's authoritative
 * record (envelope, recipients and their states, idempotency records), like qmail's queue files.
 *
 * DESCRIPTION
 *   accept            one transactionSync stores every envelope of a request, its recipients
 *                     (`incoming`, decided when the API classified them: then admitted here
 *                     within ADMIT_BATCH_MS, with the shard's other accepts: AdmissionBatch) and
 *                     its idempotency record; the bodies are already in R2. While recipients
 *                     arrive here faster than their outcomes come back (core/flow.ts), the
 *                     answer asks the route to wait IN_FLOW_DELAY_MS (Postfix's in_flow_delay).
 *   reserve/release   an Idempotency-Key in flight (409 concurrent_idempotent_requests meanwhile).
 *   view              the message for GET /emails/:id (null for another tenant's message).
 *   beginClassify / classify(Many) / ackEventsMany   the classify consumer's side (see
 *                     worker/classify/consumer.ts): classify records its decisions and admits
 *                     them to the Transport DOs itself (storage/outbox-admit.ts); results only
 *                     ever move `incoming` recipients.
 *   cancel/reschedule scheduled messages that are not yet due.
 *   envelope(s)       what the delivery stage sends: envelope sender, size, recipients and states.
 *   recordOutcome(s)  the delivery stage's per-recipient reports; when every recipient is final
 *                     the message is done and its body is deleted from R2. With DSN_NOTICES on,
 *                     bounced/expired recipients get a bounce notice (storage/outbox-dsn.ts);
 *                     delayNotices() are the core's delay warnings.
 *   holdMessage / releaseMessage / requeueMessage / cancelRecipients   operators' control
 *                     (postsuper -h/-H/-r/-d), see storage/outbox-operator.ts.
 *   afterDelivery     a complaint (email.complained) or late bounce (email.bounced) of a delivered
 *                     recipient, or what its next hop (Email Service) said of it later.
 *   metrics           outcomes recorded since the object started, by status and reply class.
 *   ensureSweep/alarm the sweeper (storage/outbox-alarm.ts): after OUTBOX_GRACE_SECONDS it
 *                     re-triggers classification of lost messages, triggers scheduled messages
 *                     when due, deletes orphan bodies, forgets finished messages after
 *                     MESSAGE_RETENTION_DAYS (at the cron's wake, every 10 minutes, as D1's
 *                     rows); and it forwards events that waited
 *                     INDEX_LAG_SECONDS for the delivery stage's index write. It runs only
 *                     while there is work for it.
 *
 * INVARIANTS
 *   Every state change is written before anything is sent (queue, R2 delete: after-change.ts),
 *   and every message that changed reaches the D1 index: through the classify queue, or
 *   (admitted to an active queue) with the delivery stage's write, or the sweeper's after
 *   INDEX_LAG_SECONDS.
 */
import { OutcomeTally } from "./tally";
import { DurableObject } from "cloudflare:workers";
import { sqlRowCounts } from "../../worker/meter";
import { AdmissionBatch, admitAll } from "./admit";
import { UnmarkedAdmissions } from "./unmarked";
import { FlowMeter } from "../core";
import { migrateOutbox, releaseIdempotency, reserveIdempotency } from "./schema";
import { storeAccepted } from "./accept";
import { claimClassifyWork, keepWaiting, recordDecisions } from "./classify-state";
import { applyOutcomes, readEnvelope } from "./outcomes";
import { recordAfterDelivery, type AfterDelivery } from "./after-delivery";
import { readMessage, readView } from "./store";
import { cancelMessage, rescheduleMessage } from "./scheduled";
import { replayedUnadmitted, unadmittedAmong } from "./unadmitted";
import { deleteEvents, readEvents } from "./events";
import { migrateControl, type ComplaintResult } from "./control";
import { cancelIn, holdIn, releaseIn, requeueIn } from "./operator";
import { migrateDsn, planDelayNotice, planDsn } from "./dsn";
import { enqueueForClassify, markOrphansDue, rememberShard } from "./sweep";
import { OutboxAlarm } from "./alarm";
import { afterChange, armAt, armSweep, sendNotices } from "./after-change";
import type {
  AcceptRequest,
  AcceptResult,
  ChangeResult,
  ClassifyResult,
  ClassifyWork,
  ControlResult,
  DelayWarning,
  DeliveryEnvelope,
  EventAck,
  IdempotencyClaim,
  IdempotencyResult,
  MessageView,
  OutcomeReport,
  SyncState,
} from "../../worker/model/message";
import { settingsOf } from "../../worker/settings/settings";

export class Outbox extends DurableObject<Env> {
  /** Outcomes recorded since the object started (GET /metrics; tally.ts). */
  private readonly tally = new OutcomeTally();
  private readonly sql: SqlStorage;
  private readonly sweeper: OutboxAlarm;
  private readonly admission: AdmissionBatch;
  /** One-recipient messages admitted into an active queue and not marked ready (unmarked.ts). */
  private readonly unmarked = new UnmarkedAdmissions();
  /** Recipients accepted here and leaving a delivery attempt (in memory): Postfix's in_flow_delay rule, core/flow.ts. */
  private readonly flow = new FlowMeter();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sweeper = new OutboxAlarm(
      this.sql,
      this.env,
      (ids) => enqueueForClassify(this.env.CLASSIFY, ids),
      (now) => sendNotices(this.ctx.storage, this.env, now),
      this.unmarked,
    );
    this.admission = new AdmissionBatch(settingsOf(this.env).admitBatchMs, (ids) => this.admitAccepted(ids));
    ctx.blockConcurrencyWhile(async () => {
      migrateOutbox(this.sql);
      migrateDsn(this.sql);
      migrateControl(this.sql);
    });
  }

  /** Reserves an Idempotency-Key for a request about to write its bodies. */
  async reserve(tenant: string, claim: IdempotencyClaim, token: string): Promise<IdempotencyResult> {
    const r = this.ctx.storage.transactionSync(() => reserveIdempotency(this.sql, tenant, claim, token, Date.now()));
    await armSweep(this.ctx.storage, this.env, Date.now());
    if (r.kind === "replay") await this.admitReplayed(r.response.body);
    return r;
  }

  /** Releases a reservation whose request failed before accept. */
  async release(tenant: string, key: string, token: string): Promise<void> {
    releaseIdempotency(this.sql, tenant, key, token);
  }

  /** Stores a request's messages and idempotency record atomically; those the API classified are admitted with the next AdmissionBatch. */
  async accept(req: AcceptRequest, token?: string): Promise<AcceptResult> {
    const now = Date.now();
    const result = storeAccepted(this.ctx.storage, req, now, this.graceMs(), token);
    if (result.kind === "replay") await this.admitReplayed(result.response.body);
    if (result.kind !== "accepted") return result;
    // Decided at accept: admitted with the next batch, or (none left open) finished now and indexed through the queue.
    const decided = req.messages.filter((m) => m.decisions !== undefined && m.scheduledAt === null).map((m) => m.id);
    const finished = decided.filter((id) => readMessage(this.sql, id)?.state === "done");
    // Admitted with the next run; the worker waits for it with admitted(), out of its accept slot.
    const admitting = decided.filter((id) => !finished.includes(id));
    this.admission.add(admitting).catch(() => undefined); // a failed run is logged, its messages kept waiting
    await afterChange(this.ctx.storage, this.env, now, finished, finished);
    const sec = Math.floor(now / 1000);
    this.flow.arrive(
      req.messages.reduce((n, m) => n + (m.scheduledAt === null ? m.rcptTo.length : 0), 0),
      sec,
    ); // scheduled mail is not due
    return { kind: "accepted", pauseMs: this.flow.over(sec) ? settingsOf(this.env).inFlowDelayMs : 0, admitting };
  }

  /**
   * Returns once the admission of these accepted messages has ended (the accept's answer waits for
   * it); admits those an Outbox restart since their accept left unadmitted (unadmitted.ts).
   */
  async admitted(ids: string[]): Promise<void> {
    const inRun = ids.filter((id) => this.admission.has(id));
    const lost = unadmittedAmong(this.sql, ids, (id) => this.unmarked.has(id) || this.admission.has(id));
    await Promise.all([this.admission.whenDone(inRun), this.admission.add(lost)]);
  }

  /** Admits the messages of a replayed accept that its first try stored and did not admit (unadmitted.ts). */
  private async admitReplayed(body: unknown): Promise<void> {
    await this.admission.add(
      replayedUnadmitted(this.sql, body, (id) => this.unmarked.has(id) || this.admission.has(id)),
    );
  }

  /**
   * Admits accepted messages (AdmissionBatch); those not all in an active queue go to the classify
   * queue for their index. One whose admission failed joins the index of waiting messages (the
   * accept kept it out), so the sweeper classifies it again.
   */
  private async admitAccepted(ids: string[]): Promise<void> {
    const now = Date.now();
    const { active, unmarked, failed } = await admitAll(this.ctx.storage, this.env, ids, now, undefined, true).catch(
      (e: unknown) => {
        keepWaiting(this.sql, ids);
        throw e;
      },
    );
    keepWaiting(this.sql, failed);
    for (const u of unmarked) this.unmarked.add(u.id, u.idxs, now);
    await afterChange(
      this.ctx.storage,
      this.env,
      now,
      ids,
      ids.filter((id) => !active.has(id)),
      active.size > 0,
    );
  }

  /** The message for its tenant, or null (unknown, or another tenant's). */
  async view(id: string, tenant: string): Promise<MessageView | null> {
    const v = readView(this.sql, id, Date.now(), this.unmarked.has(id));
    return v && v.tenant === tenant ? v : null;
  }

  /** The classify consumer's first step: due work (if any) and the state to index. */
  async beginClassify(id: string): Promise<{ work: ClassifyWork | null; sync: SyncState | null }> {
    const now = Date.now();
    return { work: claimClassifyWork(this.sql, id, now), sync: this.syncState(id, now) };
  }

  /** classifyMany for one message; throws when its admission failed (classifying it again repairs that). */
  async classify(
    id: string,
    results: ClassifyResult[],
    admit = true,
  ): Promise<{ plan: ClassifyWork | null; sync: SyncState | null; indexLater: boolean }> {
    const [r] = await this.classifyMany([{ id, results }], admit);
    if (r!.failed) throw new Error(`admission of ${id} failed; classify it again`);
    return r!;
  }

  /**
   * The classify stage's second step for messages of this shard (a batch's): records each one's
   * decisions, then (with `admit`) admits all decided incoming recipients, one request per
   * transport, and marks them ready (admitAll). Returns for each the plan, the state to index (null
   * with `indexLater`: all in an active queue, the delivery stage indexes it) and `failed` (admission
   * failed). Calling it again repairs a stop anywhere: decisions are kept, admission is idempotent.
   */
  async classifyMany(
    items: { id: string; results: ClassifyResult[] }[],
    admit = true,
  ): Promise<{ plan: ClassifyWork | null; sync: SyncState | null; indexLater: boolean; failed: boolean }[]> {
    const now = Date.now();
    // Only a message that finished here (every recipient suppressed) has a body to delete.
    const finished = this.ctx.storage.transactionSync(() =>
      items.filter((x) => x.results.length > 0 && recordDecisions(this.sql, x.id, x.results, now)).map((x) => x.id),
    );
    const plans = items.map((x) => claimClassifyWork(this.sql, x.id, now));
    const ids = items.filter((_, i) => plans[i] !== null).map((x) => x.id);
    const claimed = new Map(plans.flatMap((p) => (p ? [[p.id, p] as const] : [])));
    const admitted = admit && ids.length > 0 ? await admitAll(this.ctx.storage, this.env, ids, now, claimed) : null;
    await afterChange(this.ctx.storage, this.env, now, finished, [], (admitted?.active.size ?? 0) > 0);
    // A message all in an active queue is indexed by the delivery stage: no state to read and send for it.
    return items.map((x, i) => {
      const indexLater = admitted?.active.has(x.id) ?? false;
      return {
        plan: plans[i] ?? null,
        sync: indexLater ? null : this.syncState(x.id, Date.now()),
        indexLater,
        failed: admitted?.failed.includes(x.id) ?? false,
      };
    });
  }

  /** Forgets events written to D1, of several messages of this shard in one request (a batch's). */
  async ackEventsMany(acks: EventAck[]): Promise<void> {
    deleteEvents(this.sql, acks);
  }

  /** Cancels a scheduled message that is not yet due. */
  async cancel(id: string, tenant: string): Promise<ChangeResult> {
    return this.changeScheduled(id, tenant, (now) => cancelMessage(this.sql, id, now));
  }

  /** Moves a scheduled message that is not yet due to `atMs` (now or past: send at once). */
  async reschedule(id: string, tenant: string, atMs: number): Promise<ChangeResult> {
    return this.changeScheduled(id, tenant, (now) => rescheduleMessage(this.sql, id, atMs, now));
  }

  private async changeScheduled(id: string, tenant: string, change: (now: number) => boolean): Promise<ChangeResult> {
    const now = Date.now();
    if (!(await this.view(id, tenant))) return "not_found";
    if (!this.ctx.storage.transactionSync(() => change(now))) return "not_scheduled";
    await afterChange(this.ctx.storage, this.env, now, [id]);
    return "ok";
  }

  /** Hold (postsuper -h), release (-H), requeue (-r): see storage/outbox-operator.ts; `tenant` null: an operator, any tenant. */
  async holdMessage(id: string, tenant: string | null): Promise<ControlResult> {
    return this.operate(id, tenant, (v, now) => holdIn(this.ctx.storage, this.env, v, now));
  }
  async releaseMessage(id: string, tenant: string | null): Promise<ControlResult> {
    return this.operate(id, tenant, (v, now) => releaseIn(this.ctx.storage, v, now));
  }
  async requeueMessage(id: string, tenant: string | null): Promise<ControlResult> {
    return this.operate(id, tenant, (v, now) => requeueIn(this.ctx.storage, this.env, v, now));
  }

  /**
   * What came back about a delivered recipient, once per recipient: a feedback-loop complaint
   * (email.complained, which suppresses the address for the tenant until removed) or a late
   * bounce (email.bounced, suppressing per the bounce rules). See storage/outbox-control.ts.
   */
  async afterDelivery(
    id: string,
    tenant: string | null,
    report: AfterDelivery,
  ): Promise<(ComplaintResult & { tenant: string }) | { result: "not_found" }> {
    const now = Date.now();
    const v = readMessage(this.sql, id);
    if (!v || (tenant !== null && v.tenant !== tenant)) return { result: "not_found" };
    const res = this.ctx.storage.transactionSync(() => recordAfterDelivery(this.sql, id, v.tenant, report, now));
    if (res.result === "ok") await afterChange(this.ctx.storage, this.env, now, [id]);
    return { ...res, tenant: v.tenant };
  }

  /** Cancels the message's recipients that are not final (only those at `domain` when given), scheduled or not, with events. */
  async cancelRecipients(id: string, tenant: string | null, domain: string | null = null): Promise<ControlResult> {
    return this.operate(id, tenant, (v, now) => cancelIn(this.ctx.storage, v, domain, now));
  }

  /** An operator call on a message of `tenant` (null: any): runs it on the message's view and re-indexes the message when it changed it. */
  private async operate(
    id: string,
    tenant: string | null,
    run: (v: MessageView, now: number) => ControlResult | Promise<ControlResult>,
  ): Promise<ControlResult> {
    const now = Date.now();
    const v = readView(this.sql, id, now);
    if (!v || (tenant !== null && v.tenant !== tenant)) return { result: "not_found", recipients: 0 };
    const r = await run(v, now);
    if (r.result === "ok") await afterChange(this.ctx.storage, this.env, now, [id]);
    return r;
  }

  /** The message's envelope for delivery, or null when unknown. */
  async envelope(id: string): Promise<DeliveryEnvelope | null> {
    return readEnvelope(this.sql, id);
  }

  /** envelope() for several messages of this shard in one request (a deliver batch's), in order; `acks` as ackEventsMany, riding along. */
  async envelopes(ids: string[], acks: EventAck[] = []): Promise<(DeliveryEnvelope | null)[]> {
    deleteEvents(this.sql, acks);
    return ids.map((id) => readEnvelope(this.sql, id));
  }

  /** recordOutcomes for one message. */
  async recordOutcome(
    id: string,
    reports: OutcomeReport[],
    indexedByCaller = false,
  ): Promise<{ applied: number; done: boolean; sync: SyncState | null }> {
    return (await this.recordOutcomes([{ id, reports }], indexedByCaller))[0]!;
  }

  /**
   * Records delivery outcomes of several messages of this shard (a delivery batch's) in one
   * transaction; returns how many applied to each. With `indexedByCaller` (the delivery stage,
   * which writes the D1 index and events of its batch itself) the messages are not also handed
   * to the classify queue for indexing, and each answer carries the state to index; should the
   * caller's write fail, the sweeper forwards the events after the grace period.
   */
  async recordOutcomes(
    items: { id: string; reports: OutcomeReport[] }[],
    indexedByCaller = false,
    acks: EventAck[] = [],
  ): Promise<{ applied: number; done: boolean; sync: SyncState | null }[]> {
    const now = Date.now();
    const dsn = settingsOf(this.env).dsnNotices;
    deleteEvents(this.sql, acks); // ackEventsMany, riding along
    const results = this.ctx.storage.transactionSync(() =>
      items.map(({ id, reports }) => {
        const r = applyOutcomes(this.sql, id, reports, now, dsn);
        if (dsn) planDsn(this.sql, id, r.applied, now);
        return r;
      }),
    );
    const applied = results.map((r) => r.applied.length);
    for (const r of results) this.tally.count(r.applied);
    const doneIds = new Set(items.filter((_, i) => results[i]!.done).map((x) => x.id)); // an id twice: done after both
    const done = items.map(({ id }) => doneIds.has(id));
    this.flow.leave(
      applied.reduce((n, a) => n + a, 0),
      Math.floor(now / 1000),
    );
    const touched = items.filter((_, i) => applied[i]! > 0).map((x) => x.id);
    for (const id of touched) this.unmarked.forget(id); // marked by its outcome's write
    // Only a message that just finished with its body in R2 or kept for a notice has a body to delete.
    const bodies = items.filter((_, i) => results[i]!.bodyLeft).map((x) => x.id);
    // A message that finished keeps its last events in its rows: the sweeper forwards them unless acknowledged in time.
    if (touched.length > 0)
      await afterChange(
        this.ctx.storage,
        this.env,
        now,
        bodies,
        indexedByCaller ? [] : touched,
        done.some((d, i) => d && applied[i]! > 0),
      );
    // The caller that indexes gets the state to index with the answer (no second call to read it).
    return items.map(({ id }, i) => ({
      applied: applied[i]!,
      done: done[i]!,
      sync: indexedByCaller && applied[i]! > 0 ? this.syncState(id, now) : null,
    }));
  }

  /** Outcomes recorded since the object started, by status and reply class (GET /metrics). */
  async metrics(): Promise<ReturnType<OutcomeTally["snapshot"]>> {
    return this.tally.snapshot();
  }

  /** The core's delay warnings for recipients still being retried, many messages per call: `delayed` notices when notices are on. */
  async delayNotices(items: DelayWarning[], reason: string): Promise<void> {
    if (!settingsOf(this.env).dsnNotices || items.length === 0) return;
    const now = Date.now();
    this.ctx.storage.transactionSync(() => {
      for (const w of items) planDelayNotice(this.sql, w.id, w.addresses, reason, w.retryUntilMs, now);
    });
    await afterChange(this.ctx.storage, this.env, now, [], []);
  }

  /** The cron's wake of every shard: a full run of the sweeper within a grace period, with a listing of R2 for orphan bodies. */
  async ensureSweep(shard: number): Promise<void> {
    rememberShard(this.sql, shard);
    markOrphansDue(this.sql);
    this.sweeper.fullRunNext();
    await armAt(this.ctx.storage, Date.now() + this.graceMs());
  }

  /** The sweeper (storage/outbox-alarm.ts). */
  override async alarm(): Promise<void> {
    const at = await this.sweeper.run(Date.now());
    if (at !== null) await this.ctx.storage.setAlarm(at);
  }

  private syncState(id: string, now: number): SyncState | null {
    const view = readView(this.sql, id, now, this.unmarked.has(id));
    return view ? { view, events: readEvents(this.sql, id) } : null;
  }

  private graceMs(): number {
    return settingsOf(this.env).graceMs;
  }

  /** Development and test only (GET /relay/dev/rows): rows held in each of this object's tables. */
  async devRowCounts(): Promise<Record<string, number>> {
    return sqlRowCounts(this.ctx.storage.sql);
  }
}
