/**
 * Outbox: the queue directory. One Durable Object per shard holds each message's authoritative
 * record (envelope, recipients and their states, idempotency records), like qmail's queue files.
 * The RPC methods load, call the modules beside this one, and persist.
 *
 * DESCRIPTION
 *   accept / admitted   the accept's write and the admission its answer waits for (intake.ts):
 *                     one transactionSync per request; the messages decided at accept go to the
 *                     next AdmissionBatch run; while recipients arrive faster than their outcomes
 *                     come back, the answer asks the route to wait (Postfix's in_flow_delay).
 *   reserve/release   an Idempotency-Key in flight (409 concurrent_idempotent_requests meanwhile).
 *   view              the message for GET /emails/:id (null for another tenant's message).
 *   beginClassify / classify(Many) / ackEventsMany   the classify consumer's side
 *                     (worker/classify/consumer.ts; admission in admit.ts).
 *   cancel/reschedule scheduled messages that are not yet due (scheduled.ts).
 *   envelope(s)       what the delivery stage sends: envelope sender, size, recipients and states.
 *   recordOutcome(s)  the delivery stage's reports (record-outcomes.ts): a message whose every
 *                     recipient is final is done; with DSN_NOTICES, bounce notices (dsn.ts);
 *                     delayNotices() are the core's delay warnings.
 *   holdMessage / releaseMessage / requeueMessage / cancelRecipients   operators' control
 *                     (postsuper -h/-H/-r/-d; operator.ts).
 *   afterDelivery     a complaint or late bounce of a delivered recipient, or what its next hop
 *                     (Email Service) said of it later (after-delivery.ts).
 *   metrics           outcomes recorded since the object started, by status and reply class.
 *   ensureSweep/alarm the sweeper (alarm.ts), only while there is work for it: classification of
 *                     lost messages, scheduled messages when due, orphan bodies, retention at the
 *                     cron's wake, and events that waited INDEX_LAG_SECONDS for their index write.
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
import { OutboxIntake } from "./intake";
import { recordOutcomesIn, type OutcomeSide } from "./record-outcomes";
import { migrateOutbox, releaseIdempotency, reserveIdempotency } from "./schema";
import { claimClassifyWork } from "./classify-state";
import { readEnvelope } from "./outcomes";
import { recordAfterDelivery, type AfterDelivery } from "./after-delivery";
import { readMessage, readView } from "./store";
import { cancelMessage, rescheduleMessage } from "./scheduled";
import { deleteEvents, readEvents } from "./events";
import { migrateControl, type ComplaintResult } from "./control";
import { cancelIn, holdIn, releaseIn, requeueIn } from "./operator";
import { migrateDsn, planDelayNotice } from "./dsn";
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
  /** The accept's and the classify consumer's side, with its admission runs (intake.ts). */
  private readonly intake: OutboxIntake;
  /** What recording outcomes uses (record-outcomes.ts). */
  private readonly outcomeSide: OutcomeSide;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    const syncState = (id: string, now: number) => this.syncState(id, now);
    this.intake = new OutboxIntake(ctx.storage, () => this.env, syncState);
    this.outcomeSide = { storage: ctx.storage, env: () => this.env, tally: this.tally, intake: this.intake, syncState };
    this.sweeper = new OutboxAlarm(
      this.sql,
      this.env,
      (ids) => enqueueForClassify(this.env.CLASSIFY, ids),
      (now) => sendNotices(this.ctx.storage, this.env, now),
      this.intake.unmarked,
    );
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
    if (r.kind === "replay") await this.intake.admitReplayed(r.response.body);
    return r;
  }

  /** Releases a reservation whose request failed before accept. */
  async release(tenant: string, key: string, token: string): Promise<void> {
    releaseIdempotency(this.sql, tenant, key, token);
  }

  /** Stores a request's messages and idempotency record atomically; those the API classified are admitted with the next AdmissionBatch (intake.ts). */
  async accept(req: AcceptRequest, token?: string): Promise<AcceptResult> {
    return this.intake.accept(req, token);
  }

  /**
   * Returns once the admission of these accepted messages has ended (the accept's answer waits for
   * it); admits those an Outbox restart since their accept left unadmitted (unadmitted.ts).
   */
  async admitted(ids: string[]): Promise<void> {
    return this.intake.admitted(ids);
  }

  /** The message for its tenant, or null (unknown, or another tenant's). */
  async view(id: string, tenant: string): Promise<MessageView | null> {
    const v = readView(this.sql, id, Date.now(), this.intake.unmarked.has(id));
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
    return this.intake.classifyMany(items, admit);
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
    return recordOutcomesIn(this.outcomeSide, items, indexedByCaller, acks);
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
    const view = readView(this.sql, id, now, this.intake.unmarked.has(id), false);
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
