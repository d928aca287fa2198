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
import { sqlRowCounts } from "../../worker/meter";
import {
  destinationsView,
  type DeliveryReport,
  type DestinationVerdict,
  type Effect,
  type PolicyRule,
  type ResolvedRecipient,
} from "../core";
import { leaseUntil, nowSec } from "./delivery-state";
import { dueRetries, dropWaiting, flushRetries } from "./retries";
import { retryAttempt } from "./attempts";
import { settleRing } from "./wakeup";
import { type DispatchedEntry } from "./transport-types";
import {
  destinationName,
  parseCoreId,
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
import { explainWaits, inspectTransport, metricsOf } from "./views";
import { settingsOf } from "../../worker/settings/settings";
import { TransportCore } from "./transport-core";

export class TransportQueue extends TransportCore {
  /** Admits a message (idempotent by message and recipient, also after it left the core). */
  async admit(req: AdmitRequest): Promise<AdmitAnswer> {
    return (await this.admitMany([req]))[0]!;
  }

  /** admit() for several messages in one request (a classify batch's), then one pump; answers in order. */
  async admitMany(reqs: AdmitRequest[]): Promise<AdmitAnswer[]> {
    const auto = settingsOf(this.env).autoDispatch;
    this.noteAdmission(Date.now());
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
    const messages = reports.map((r) => this.qmgr.busy.get(r.entryId)?.peer.job.message.id ?? null);
    const answers = reports.map((r) => this.reportCore(r.entryId, r.report, r.finalIdx));
    // Each report ended its message (every recipient final in the Outbox): its write may wait (arm).
    const ended = answers.every(
      (a, i) =>
        reports[i]!.report.status === "ok" &&
        a.effects.some((x) => x.kind === "message-done" && x.messageId === messages[i]),
    );
    return { answers, jobs: await this.pump(agent, ended) };
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
    for (const coreId of dueRetries(sql, Date.now()))
      retryAttempt(sql, coreId, (...a) => this.admitCore(...a), this.done);
    settleRing(this.qmgr, this.journal, sql, this.env, this.done); // finished messages' records, the ring (wakeup.ts)
    await this.pump();
  }

  /** Development and test only (GET /relay/dev/rows): rows held in each of this object's tables. */
  async devRowCounts(): Promise<Record<string, number>> {
    return sqlRowCounts(this.ctx.storage.sql);
  }
}
