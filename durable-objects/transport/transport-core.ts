/**
 * The Transport DO's state and the steps its RPCs share (transport-queue.ts is the object): the
 * core restored from its journal, the leases and hand-offs, the records of finished attempts;
 * and run a command through the journal keeping the delivery bookkeeping in step (run), admit,
 * report, dispatch what the core selects (pump), and re-arm the alarm (arm).
 */
import { DurableObject } from "cloudflare:workers";
import {
  hasActiveRoom,
  type Command,
  type DeliveryReport,
  type Effect,
  type MessageFields,
  type Qmgr,
  type ResolvedRecipient,
  type SchedulerConfig,
} from "../core";
import {
  leaseUntil,
  nowSec,
  migrateDelivery,
  restoreLeases,
  addIncoming,
  drainIncoming,
  hasIncoming,
  intakeOf,
} from "./delivery-state";
import { noteFinalRecipients, settleAttempts } from "./attempts";
import { nextAlarmAt } from "./wakeup";
import { Journal } from "./journal";
import type { Leases } from "./leases";
import { OutboxNotes } from "./outbox-notes";
import { toDispatched, type DispatchedEntry } from "./transport-types";
import { type DeliverJob, type ReportAnswer } from "../../worker/model/delivery";
import {
  admissionTtlSec,
  forgetFinished,
  migrateBacklog,
  recordAdmission,
  SqliteRecipientSource,
  type StoredRecipient,
} from "./sqlite-source";
import { Handoff } from "./handoff";
import { FeedbackGate } from "./feedback-gate";
import { DoneRecords, DONE_GRACE_SEC } from "./done-records";
import { admissionsOf } from "./admissions";
import { schedulerConfigOf } from "../../worker/settings/scheduler";
import { settingsOf } from "../../worker/settings/settings";

/** How long a report that ended its message waits for the next row while mail flows (arm), ms. */
export const REPORT_WAIT_MS = 250;

export abstract class TransportCore extends DurableObject<Env> {
  protected qmgr!: Qmgr<StoredRecipient>;
  protected journal!: Journal<StoredRecipient>;
  /** Dispatched entries the deliver consumer may still report (in memory, storage/leases.ts). */
  protected leases!: Leases;
  protected readonly cfg: SchedulerConfig;
  /** Outcomes and delay warnings the core decided on its own, still to be handed to their Outbox. */
  protected readonly notes = new OutboxNotes();
  /** Hands selected entries to the delivery agent (the deliver queue or DeliveryAgent objects). */
  protected readonly handoff: Handoff;
  /** Which reports the Destination DOs need (feedback-gate.ts). */
  protected readonly gate: FeedbackGate;
  /** The alarm time last set (ms), so an unchanged one is not written again; null when unknown or fired. */
  protected alarmAt: number | null = null;
  /** The incoming queue is known empty (this object is its only writer): no probe of it per admission or pump. */
  protected incomingEmpty = false;
  /** Backlog rows of messages finished since this time (s) go at the next checkpoint; 0 after a start. */
  protected forgottenUpTo = 0;
  /** Attempts that ended done, whose records go at a checkpoint after a grace (done-records.ts). */
  protected readonly done: DoneRecords;
  /** When the last two admissions came (ms): mail flows when both are recent (flowing). */
  private admittedAt: [number, number] = [0, 0];
  /** The write a waiting report's row gets if no other row comes first (writeSoon). */
  private lateWrite: ReturnType<typeof setTimeout> | null = null;

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
      admissionsOf(sql).enabled = settingsOf(env).tinySnapshotChars > 0; // kept with a tiny core's snapshot
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
      if (this.qmgr.busy.size > 0 || this.done.size > 0) await this.arm(); // entries in flight, records found again
    });
  }
  /**
   * Takes a message: into the active queue (the core) when it has room and nobody waits before
   * it, else into the incoming queue, from which pump() moves messages in arrival order as room
   * frees (Postfix's incoming → active). Either way it is durably taken.
   */
  protected admitCore(
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
    admissionsOf(sql).materialize(sql, id); // the incoming queue reads it from its row
    addIncoming(sql, m);
    this.incomingEmpty = false;
    return { admitted: true, effects: [], active: false };
  }

  protected dispatchCore(max: number): { entries: DispatchedEntry[]; effects: Effect[] } {
    const res = this.run({ kind: "dispatch", now: nowSec(), max });
    return { entries: res.entries.map(toDispatched), effects: res.effects };
  }

  protected reportCore(entryId: number, report: DeliveryReport, finalIdx: number[]): ReportAnswer {
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
  protected async checkAgents(): Promise<void> {
    const due = this.leases.unconfirmed(Date.now(), settingsOf(this.env).agentCheckMs);
    const lost = new Set((await this.handoff.check(due.flatMap((id) => this.qmgr.busy.get(id) ?? []))).lost);
    this.leases.confirm(
      due.filter((id) => !lost.has(id)),
      Date.now(),
    ); // else the alarm would come back at once
    this.crash([...lost].filter((id) => this.leases.has(id)));
  }

  /** Reports entries whose delivery agent is gone (lease out, or job never sent) as crashed: deferred, retried. */
  protected crash(entryIds: readonly number[]): void {
    for (const entryId of entryIds) this.reportCore(entryId, { status: "crash" }, []);
  }

  /**
   * In auto mode: dispatches everything selectable (`agent`'s jobs are returned); then re-arms the
   * alarm. `ended`: the call only brought reports that each ended their message (see arm).
   */
  protected async pump(agent?: string, ended = false): Promise<DeliverJob[]> {
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
    await this.arm(ended);
    return inline;
  }

  /** The transport this DO schedules (its core holds one). */
  protected transportName(): string | null {
    return this.qmgr.transports.keys().next().value ?? null;
  }

  /** Runs one command through the journal and keeps the delivery bookkeeping in step. */
  protected run(cmd: Command, finalNow: { coreId: string; idxs: number[] } | null = null) {
    const sql = this.ctx.storage.sql;
    const res = this.journal.run(this.qmgr, cmd);
    this.notes.collect(sql, res.effects, this.cfg.global.maximalQueueLifetime, finalNow);
    settleAttempts(sql, res.effects, cmd.now, this.done);
    return res;
  }

  /** An admission came now (ms): flowing() looks at the last two. */
  protected noteAdmission(nowMs: number): void {
    this.admittedAt = [this.admittedAt[1], nowMs];
  }

  /** Mail flows: the last two admissions came within REPORT_WAIT_MS of each other and of now. */
  private flowing(nowMs: number): boolean {
    const [before, last] = this.admittedAt;
    return nowMs - last < REPORT_WAIT_MS && last - before < REPORT_WAIT_MS;
  }

  /**
   * Writes what waits REPORT_WAIT_MS from now unless a row came first (a flush with nothing
   * buffered writes nothing). The pending timer keeps the object active that long, at most.
   */
  private writeSoon(): void {
    if (this.lateWrite !== null) return;
    this.lateWrite = setTimeout(() => {
      this.lateWrite = null;
      try {
        this.journal.flush(this.qmgr);
      } catch (e) {
        // Lost like a stop's (see arm): the entries come back in flight and find their outcome.
        console.error(JSON.stringify({ error: "transport: a waiting report's row failed", detail: String(e) }));
      }
    }, REPORT_WAIT_MS);
  }

  /**
   * Arms the alarm at the earliest core wake-up, lease deadline or retry (wakeup.ts nextAlarmAt),
   * after writing what the call changed. A call whose reports each ended their message (`ended`:
   * every recipient final) writes nothing more while a later row is near: the Outbox holds each
   * outcome already (the agent records it there first), such a report writes no row of its own
   * (no retry, no final-recipient note), and the next row written carries it. Near means: other
   * entries are leased (the report of the last one in flight writes at the latest, or the alarm
   * that crashes a lost one), or, with none, mail flows (flowing()): the next admission's row, or
   * this object's own write REPORT_WAIT_MS later if none came (writeSoon). A lone message's report
   * writes at once: the object falls idle, and an eviction would lose the report. A stop before
   * the row loses only these reports: their entries come back in flight, leased, are crashed at the
   * agent check or their lease, and the retry finds every recipient final in the Outbox, so
   * nothing is sent twice.
   */
  protected async arm(ended = false): Promise<void> {
    const lazy = ended && this.journal.onlyReports();
    if (lazy && this.leases.size === 0 && this.flowing(Date.now())) this.writeSoon();
    else if (!(lazy && this.leases.size > 0)) this.journal.flush(this.qmgr);
    const at = nextAlarmAt(
      this.qmgr,
      this.journal,
      this.leases,
      this.ctx.storage.sql,
      this.env,
      this.done,
      this.alarmAt,
    );
    if (at === null || at === this.alarmAt) return; // a setAlarm is a billed write
    this.alarmAt = at;
    await this.ctx.storage.setAlarm(at);
  }
}
