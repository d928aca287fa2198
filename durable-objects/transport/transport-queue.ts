/**
 * TransportQueue: one Durable Object per transport, a thin shell over the scheduling core.
 * Each RPC reads the clock once, turns its input into core commands, runs them through the
 * journal (one row per call, written before the call's first await; commands that change
 * nothing are not journaled; a snapshot now and then), re-arms the alarm, and returns the
 * core's decisions. After an eviction the state is the last snapshot plus the journal replayed.
 * Records of finished messages go at a checkpoint: the alarm takes one (wakeup.ts) when they expire
 * (a done attempt's after a minute, done-records.ts; others after sqlite-source.ts admissionTtlSec),
 * and then empties the journal ring if the queue is idle.
 *
 * ADMISSION
 *   admit() always takes a message durably: into the core when the active queue has room
 *   (qmgr_message_active_limit), else into the incoming queue in its SQLite, from which every
 *   pump moves messages in arrival order as room frees (Postfix's incoming → active). A burst
 *   therefore never bounces back to the classify stage as "no room".
 *
 * DELIVERY LOOP (DISPATCH = "auto")
 *   After every admit, report and alarm the shell dispatches what the core selects, hands the
 *   entries to the delivery agent (storage/handoff.ts) and leases each (storage/leases.ts). The
 *   alarm fires at the earliest core wake-up, lease deadline, retry or agent check: an expired
 *   lease, or one no agent holds (handoff.check), is a crash (deferred, no feedback); a deferred
 *   message's open recipients come back as `<id>#<attempt>`. With DISPATCH = "manual" only the
 *   dispatch RPC selects. SCHEDULER_CONFIG: storage/scheduler-env.ts.
 *   Outcomes the core decides on its own go to the message's Outbox (storage/outbox-notes.ts):
 *   expired attempts end `expired`, recipients deferred without an attempt (their destination
 *   died) `deferred` with blocked_by "destination_dead", delay warnings delay notices.
 *
 * AUTHORITY AND OPERATORS
 *   verdict() applies a Destination DO's answer (window, dead until) to the core's queue.
 *   inspect() (qshape, deferred shape, destinations, policies), metrics() (GET /metrics), flush() (postqueue -f),
 *   setPolicy() (caps, rates, suspensions with an expiry) and remove() (a message out of the
 *   queue, for hold and requeue) serve the admin API.
 */
import { DurableObject } from "cloudflare:workers";
import { sqlRowCounts } from "../../worker/meter";
import {
  hasActiveRoom,
  destinationsView,
  type Command,
  type DeliveryReport,
  type DestinationVerdict,
  type Effect,
  type MessageFields,
  type PolicyRule,
  type Qmgr,
  type ResolvedRecipient,
  type SchedulerConfig,
} from "../core";
import {
  leaseUntil,
  nowSec,
  dueRetries,
  migrateDelivery,
  restoreLeases,
  addIncoming,
  drainIncoming,
  dropWaiting,
  hasIncoming,
  intakeOf,
  flushRetries,
} from "./delivery-state";
import { noteFinalRecipients, retryAttempt, settleAttempts } from "./attempts";
import { nextAlarmAt, settleRing } from "./wakeup";
import { Journal } from "./journal";
import type { Leases } from "./leases";
import { OutboxNotes } from "./outbox-notes";
import { toDispatched, type DispatchedEntry } from "./transport-types";
import {
  destinationName,
  parseCoreId,
  type DeliverJob,
  type EntryReport,
  type ReportAnswer,
  type TakeAnswer,
} from "../../worker/model/delivery";
import type {
  AdmitAnswer,
  AdmitRequest,
  TransportInspect,
  TransportMetrics,
  WaitReason,
} from "../../worker/model/transport";
import {
  admissionTtlSec,
  forgetFinished,
  migrateBacklog,
  recordAdmission,
  SqliteRecipientSource,
  type StoredRecipient,
} from "./sqlite-source";
import { explainWaits, inspectTransport, metricsOf } from "./views";
import { Handoff } from "./handoff";
import { FeedbackGate } from "./feedback-gate";
import { DoneRecords, DONE_GRACE_SEC } from "./done-records";
import { schedulerConfigOf } from "../../worker/settings/scheduler";
import { settingsOf } from "../../worker/settings/settings";

export class TransportQueue extends DurableObject<Env> {
  private qmgr!: Qmgr<StoredRecipient>;
  private journal!: Journal<StoredRecipient>;
  /** Dispatched entries the deliver consumer may still report (in memory, storage/leases.ts). */
  private leases!: Leases;
  private readonly cfg: SchedulerConfig;
  /** Outcomes and delay warnings the core decided on its own, still to be handed to their Outbox. */
  private readonly notes = new OutboxNotes();
  /** Hands selected entries to the delivery agent (the deliver queue or DeliveryAgent objects). */
  private readonly handoff: Handoff;
  /** Which reports the Destination DOs need (feedback-gate.ts). */
  private readonly gate: FeedbackGate;
  /** The alarm time last set (ms), so an unchanged one is not written again; null when unknown or fired. */
  private alarmAt: number | null = null;
  /** The incoming queue is known empty (this object is its only writer): no probe of it per admission or pump. */
  private incomingEmpty = false;
  /** Backlog rows of messages finished since this time (s) go at the next checkpoint; 0 after a start. */
  private forgottenUpTo = 0;
  /** Attempts that ended done, whose records go at a checkpoint after a grace (done-records.ts). */
  private readonly done: DoneRecords;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.cfg = schedulerConfigOf(env);
    this.handoff = new Handoff(() => this.env, Date.now, ctx.id.name);
    this.gate = new FeedbackGate(this.cfg.global.destinationIdleMemory);
    this.done = new DoneRecords(Math.min(DONE_GRACE_SEC, admissionTtlSec(env)));
    ctx.blockConcurrencyWhile(async () => {
      const sql = ctx.storage.sql;
      migrateBacklog(sql);
      migrateDelivery(sql);
      // Backlog rows of finished messages are dropped only once a snapshot no longer needs them.
      const { checkpointEvery: every, journalRing: ring, tinySnapshotChars: tiny } = settingsOf(env);
      this.journal = new Journal<StoredRecipient>(
        sql,
        every,
        () => {
          this.forgottenUpTo = forgetFinished(sql, this.forgottenUpTo, nowSec(), admissionTtlSec(env));
          this.done.forget(sql, nowSec());
        },
        ring,
        tiny,
      );
      this.qmgr = this.journal.load(this.cfg, new SqliteRecipientSource(sql));
      this.done.recover(sql, (id) => this.qmgr.messages.has(id), nowSec());
      this.alarmAt = await ctx.storage.getAlarm();
      this.leases = restoreLeases(sql, env, this.qmgr.busy, this.journal.unconfirmed); // every entry in flight, leased anew
      if (this.qmgr.busy.size > 0) await this.arm();
    });
  }

  /** Admits a message (idempotent by message and recipient, also after it left the core). */
  async admit(req: AdmitRequest): Promise<AdmitAnswer> {
    return (await this.admitMany([req]))[0]!;
  }

  /** admit() for several messages in one request (a classify batch's), then one pump; answers in order. */
  async admitMany(reqs: AdmitRequest[]): Promise<AdmitAnswer[]> {
    const auto = settingsOf(this.env).autoDispatch;
    const answers = reqs.map((req) =>
      this.qmgr.messages.has(req.id)
        ? { admitted: true, effects: [], active: false }
        : this.admitCore(req.id, req.createTime, req.tenant ?? null, req.priority ?? 0, req.rcpts, req.fields ?? null),
    );
    await this.pump();
    return answers.map((a) => ({ ...a, active: a.active && auto }));
  }

  /** Selects up to `max` entries for delivery; they are leased to the caller. */
  async dispatch(max = 100): Promise<{ entries: DispatchedEntry[]; effects: Effect[] }> {
    const res = this.dispatchCore(max);
    this.leases.add(res.entries, leaseUntil(this.env, nowSec()), Date.now());
    await this.arm();
    return res;
  }

  /** One delivery report (idempotent by entry id); `finalIdx`: its recipients (backlog index) now final. */
  async report(entryId: number, report: DeliveryReport, finalIdx: number[] = []): Promise<ReportAnswer> {
    return (await this.reportMany([{ entryId, report, finalIdx }]))[0]!;
  }

  /** Several reports, each as report() would apply it, then one dispatch: a session's entries. */
  async reportMany(reports: EntryReport[]): Promise<ReportAnswer[]> {
    return (await this.reportAndTake(reports)).answers;
  }

  /** reportMany for DeliveryAgent `agent`: the entries the pump then gives it come back here, not in a call of their own. */
  async reportAndTake(reports: EntryReport[], agent?: string): Promise<TakeAnswer> {
    const answers = reports.map((r) => this.reportCore(r.entryId, r.report, r.finalIdx));
    return { answers, jobs: await this.pump(agent) };
  }

  /** The entry ids among `entryIds` that are still leased (dispatched and not yet reported). */
  async leased(entryIds: number[]): Promise<number[]> {
    const live = entryIds.filter((id) => this.handoff.pending(id) || this.leases.has(id));
    this.journal.handedOver(this.leases.pickedUp(live)); // the deliver consumer asks before its session: the job reached it
    return live;
  }

  /** Why each recipient of a message here waits: in core (every attempt of it), or in the incoming queue. */
  async explain(messageId: string): Promise<{ entryId: number; rcpts: ResolvedRecipient[]; blockedBy: WaitReason }[]> {
    return explainWaits(this.qmgr, this.ctx.storage.sql, messageId, nowSec());
  }

  /** Aligns a destination queue with its Destination DO's verdict (the authority); true if it changed anything. */
  async verdict(queue: string, v: DestinationVerdict): Promise<boolean> {
    const transport = this.transportName();
    if (transport === null) return false;
    const changed = this.run({ kind: "destination", now: nowSec(), transport, queue, verdict: v }).accepted;
    if (changed) await this.pump();
    else this.journal.flush(this.qmgr);
    return changed;
  }

  /** The operator's view: qshape, deferred recipients, destinations and policies. */
  async inspect(): Promise<TransportInspect> {
    return {
      ...inspectTransport(this.qmgr, this.ctx.storage.sql, nowSec()),
      inFlightTimes: this.leases.inFlightTimes(),
    };
  }

  /** GET /metrics' view: queues by state and the topN busiest destinations (views.ts metricsOf). */
  async metrics(topN: number): Promise<TransportMetrics> {
    return metricsOf(this.qmgr, this.ctx.storage.sql, topN);
  }

  /** postqueue -f: every deferred message is retried now and dead destinations (here and in their Destination DOs) revive. */
  async flush(): Promise<void> {
    const dead = destinationsView(this.qmgr).filter((d) => d.state === "dead");
    await Promise.all(
      dead.map((d) => this.env.DESTINATION_QUEUE.getByName(destinationName(d.transport, d.queue)).flush()),
    );
    this.run({ kind: "flush", now: nowSec() });
    flushRetries(this.ctx.storage.sql, Date.now());
    await this.alarm();
  }

  /** Sets (or with null clears) a pickup policy: caps, rate, suspension until a time (unix seconds). */
  async setPolicy(key: string, rule: PolicyRule | null): Promise<void> {
    this.run({ kind: "set-policy", now: nowSec(), key, rule });
    await this.pump();
  }

  /**
   * Takes a message out (hold, requeue): every attempt of it leaves the core, entries in flight
   * finish and report as usual, nothing is retried. Returns the addresses that were waiting (not
   * in flight) and the highest attempt number used, so a readmission can use a higher one.
   */
  async remove(messageId: string): Promise<{ waiting: string[]; attempt: number }> {
    const sql = this.ctx.storage.sql;
    const waiting: string[] = [];
    let attempt = 0;
    for (const coreId of [...this.qmgr.messages.keys()].filter((id) => parseCoreId(id).messageId === messageId)) {
      attempt = Math.max(attempt, parseCoreId(coreId).attempt);
      const res = this.run({ kind: "remove", now: nowSec(), messageId: coreId });
      waiting.push(...(res.removed ?? []).map((r) => r.address));
    }
    // Outside the core: waiting for room (incoming) or for a retry.
    const outside = dropWaiting(sql, messageId, nowSec());
    await this.pump();
    return { waiting: [...new Set([...waiting, ...outside.waiting])], attempt: Math.max(attempt, outside.attempt) };
  }

  override async alarm(): Promise<void> {
    this.alarmAt = null;
    const sql = this.ctx.storage.sql;
    this.run({ kind: "tick", now: nowSec() });
    this.crash(this.leases.expired(nowSec()));
    if (settingsOf(this.env).agents) await this.checkAgents();
    for (const coreId of dueRetries(sql, Date.now())) retryAttempt(sql, coreId, (...a) => this.admitCore(...a));
    settleRing(this.qmgr, this.journal, sql, this.env, this.done); // finished messages' records, the ring (wakeup.ts)
    await this.pump();
  }

  /**
   * Takes a message: into the active queue (the core) when it has room and nobody waits before
   * it, else into the incoming queue, from which pump() moves messages in arrival order as room
   * frees (Postfix's incoming → active). Either way it is durably taken.
   */
  private admitCore(
    id: string,
    createTime: number,
    tenant: string | null,
    priority: number,
    rcpts: ResolvedRecipient[],
    fields: MessageFields | null,
  ): { admitted: boolean; effects: Effect[]; active: boolean } {
    const sql = this.ctx.storage.sql;
    // Admitted here before (a repeated RPC, also after it left the core): nothing to do.
    if (!recordAdmission(sql, id, { createTime, tenant, priority, fields }, rcpts))
      return { admitted: true, effects: [], active: false };
    const m = { coreId: id, createTime, tenant, priority, rcptTotal: rcpts.length, fields };
    if (hasActiveRoom(this.qmgr) && (this.incomingEmpty ||= !hasIncoming(sql))) {
      const res = this.run({ kind: "admit", now: nowSec(), intake: intakeOf(m) });
      if (res.accepted) return { admitted: true, effects: res.effects, active: true };
    }
    addIncoming(sql, m);
    this.incomingEmpty = false;
    return { admitted: true, effects: [], active: false };
  }

  private dispatchCore(max: number): { entries: DispatchedEntry[]; effects: Effect[] } {
    const res = this.run({ kind: "dispatch", now: nowSec(), max });
    return { entries: res.entries.map(toDispatched), effects: res.effects };
  }

  private reportCore(entryId: number, report: DeliveryReport, finalIdx: number[]): ReportAnswer {
    const sql = this.ctx.storage.sql;
    const coreId = this.leases.take(entryId, Date.now());
    this.handoff.release(entryId, report.status !== "crash" && !report.siteFailure); // else no connection was left idle
    const e = this.qmgr.busy.get(entryId);
    const queue = e?.peer.queue;
    const [busy, conc] = [queue?.busyCount ?? 0, e?.conc ?? queue?.busyCount ?? 0];
    const prior = queue ? { window: queue.window, failCohorts: queue.failCohorts } : null;
    const res = this.run(
      { kind: "report", now: nowSec(), entryId, report },
      coreId !== null ? { coreId, idxs: finalIdx } : null,
    );
    noteFinalRecipients(sql, coreId, finalIdx, res.effects);
    if (!res.accepted || !queue || !prior) return { applied: res.accepted, effects: res.effects, destination: null };
    const feed = this.gate.feed(queue.name, (report.siteFailure ?? null) !== null, nowSec());
    const destination = { queue: queue.name, busy, conc, window: queue.window, prior, feed };
    return { applied: true, effects: res.effects, destination };
  }

  /** Asks the agents about entries leased for AGENT_CHECK_SECONDS: the lost crash; the rest (held, or undecided) wait another period. */
  private async checkAgents(): Promise<void> {
    const due = this.leases.unconfirmed(Date.now(), settingsOf(this.env).agentCheckMs);
    const lost = new Set((await this.handoff.check(due.flatMap((id) => this.qmgr.busy.get(id) ?? []))).lost);
    this.leases.confirm(
      due.filter((id) => !lost.has(id)),
      Date.now(),
    ); // else the alarm would come back at once
    this.crash([...lost].filter((id) => this.leases.has(id)));
  }

  /** Reports entries whose delivery agent is gone (lease out, or job never sent) as crashed: deferred, retried. */
  private crash(entryIds: readonly number[]): void {
    for (const entryId of entryIds) this.reportCore(entryId, { status: "crash" }, []);
  }

  /** In auto mode: dispatches everything selectable (`agent`'s jobs are returned); then re-arms the alarm. */
  private async pump(agent?: string): Promise<DeliverJob[]> {
    const inline: DeliverJob[] = [];
    if (!this.incomingEmpty)
      this.incomingEmpty = drainIncoming(
        this.ctx.storage.sql,
        this.qmgr,
        (intake) => this.run({ kind: "admit", now: nowSec(), intake }).accepted,
      );
    if (this.notes.waiting) {
      this.journal.flush(this.qmgr);
      await this.notes.deliver(this.env);
    } // else one row below: this call's commands and its dispatch
    if (settingsOf(this.env).autoDispatch) {
      for (let round = 0; round < 10; round++) {
        const { entries } = this.dispatchCore(100);
        if (entries.length === 0) break;
        const until = leaseUntil(this.env, nowSec()),
          ids = entries.map((e) => e.entryId);
        this.leases.cover(until); // before the jobs can reach an agent: a stop inside send leases them till then
        this.journal.flush(this.qmgr, ids); // on record before they leave, marked as being handed over
        const { failed, error, inline: mine } = await this.handoff.send(entries, until, agent);
        this.journal.handedOver(ids);
        inline.push(...mine);
        const lost = new Set(failed); // not handed over: crashed (deferred, retried) now, not leased for nothing
        this.leases.add(
          entries.filter((e) => !lost.has(e.entryId)),
          until,
          Date.now(),
        );
        if (lost.size > 0) {
          this.crash(failed);
          await this.arm();
          if (!settingsOf(this.env).agents) throw error;
        }
      }
    }
    await this.arm();
    return inline;
  }

  /** The transport this DO schedules (its core holds one). */
  private transportName(): string | null {
    return this.qmgr.transports.keys().next().value ?? null;
  }

  /** Runs one command through the journal and keeps the delivery bookkeeping in step. */
  private run(cmd: Command, finalNow: { coreId: string; idxs: number[] } | null = null) {
    const sql = this.ctx.storage.sql;
    const res = this.journal.run(this.qmgr, cmd);
    this.notes.collect(sql, res.effects, this.cfg.global.maximalQueueLifetime, finalNow);
    settleAttempts(sql, res.effects, cmd.now, this.done);
    return res;
  }

  /** Arms the alarm at the earliest core wake-up, lease deadline or retry (wakeup.ts nextAlarmAt). */
  private async arm(): Promise<void> {
    this.journal.flush(this.qmgr);
    const at = nextAlarmAt(this.qmgr, this.journal, this.leases, this.ctx.storage.sql, this.env, this.done);
    if (at === null || at === this.alarmAt) return; // a setAlarm is a billed write
    this.alarmAt = at;
    await this.ctx.storage.setAlarm(at);
  }

  /** Development and test only (GET /relay/dev/rows): rows held in each of this object's tables. */
  async devRowCounts(): Promise<Record<string, number>> {
    return sqlRowCounts(this.ctx.storage.sql);
  }
}
