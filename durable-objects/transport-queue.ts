/**
 * TransportQueue: one Durable Object per transport, a thin shell over the scheduling core.
 * Each RPC reads the clock once, loads nothing (state is in memory, restored from SQLite at
 * start-up), calls the core, persists the core's snapshot, and returns the core's decisions.
 */
import { DurableObject } from "cloudflare:workers";
import {
  admitMessage,
  createQmgr,
  dispatchAll,
  drainEffects,
  explainMessage,
  mustParseSchedulerConfig,
  nextWakeupAt,
  reportDelivery,
  restoreQmgr,
  snapshotQmgr,
  tick,
  type DeliveryReport,
  type Effect,
  type Qmgr,
  type QmgrSnapshot,
  type ResolvedRecipient,
  type SchedulerConfig,
} from "./core";
import { loadSnapshot, migrateBacklog, recordAdmission, saveSnapshot, wasAdmitted, SqliteRecipientSource, storeRecipients, type StoredRecipient } from "./storage/sqlite-source";

/** A message handed to the transport: its id, arrival time and resolved recipients. */
export interface AdmitRequest {
  id: string;
  createTime: number;
  tenant?: string | null;
  priority?: number;
  rcpts: ResolvedRecipient[];
}

/** A selected delivery request, as handed to the delivery stage. */
export interface DispatchedEntry {
  entryId: number;
  messageId: string;
  transport: string;
  nexthop: string;
  rcpts: StoredRecipient[];
}

export class TransportQueue extends DurableObject<Env> {
  private qmgr!: Qmgr<StoredRecipient>;
  private readonly cfg: SchedulerConfig;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.cfg = mustParseSchedulerConfig({});
    ctx.blockConcurrencyWhile(async () => {
      migrateBacklog(ctx.storage.sql);
      const source = new SqliteRecipientSource(ctx.storage.sql);
      const snap = loadSnapshot<QmgrSnapshot<StoredRecipient>>(ctx.storage.sql);
      this.qmgr = snap ? restoreQmgr(snap, this.cfg, source) : createQmgr(this.cfg, source);
    });
  }

  /** Admits a message (idempotent by message and recipient, also after it left the core); returns the effects it caused. */
  async admit(req: AdmitRequest): Promise<{ admitted: boolean; effects: Effect[] }> {
    const now = nowSec();
    if (this.qmgr.messages.has(req.id) || wasAdmitted(this.ctx.storage.sql, req.id, req.rcpts)) return { admitted: true, effects: [] };
    storeRecipients(this.ctx.storage.sql, req.id, req.rcpts);
    const m = admitMessage(this.qmgr, { id: req.id, createTime: req.createTime, tenant: req.tenant ?? null, priority: req.priority ?? 0, rcptTotal: req.rcpts.length }, now);
    if (m !== null) recordAdmission(this.ctx.storage.sql, req.id, req.rcpts);
    return { admitted: m !== null, effects: await this.persist() };
  }

  /** Selects up to `max` entries for delivery. */
  async dispatch(max = 100): Promise<{ entries: DispatchedEntry[]; effects: Effect[] }> {
    const entries = dispatchAll(this.qmgr, nowSec(), max).map((e) => ({
      entryId: e.id,
      messageId: e.peer.job.message.id,
      transport: e.peer.queue.transport.name,
      nexthop: e.peer.queue.nexthop,
      rcpts: e.rcpts,
    }));
    return { entries, effects: await this.persist() };
  }

  /** Applies a delivery report (idempotent by entry id). */
  async report(entryId: number, report: DeliveryReport): Promise<{ applied: boolean; effects: Effect[] }> {
    const r = reportDelivery(this.qmgr, entryId, report, nowSec());
    return { applied: r.kind === "applied", effects: await this.persist() };
  }

  /** Why each in-core recipient of a message waits. */
  async explain(messageId: string) {
    return explainMessage(this.qmgr, messageId, nowSec());
  }

  override async alarm(): Promise<void> {
    tick(this.qmgr, nowSec());
    await this.persist();
  }

  /** Persists the core state, re-arms the alarm, and returns the drained effects. */
  private async persist(): Promise<Effect[]> {
    saveSnapshot(this.ctx.storage.sql, snapshotQmgr(this.qmgr));
    const at = nextWakeupAt(this.qmgr);
    if (at !== null) await this.ctx.storage.setAlarm(at * 1000);
    return drainEffects(this.qmgr);
  }
}

function nowSec(): number {
  return Math.floor(Date.now() / 1000);
}
