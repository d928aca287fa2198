/**
 * TransportQueue: one Durable Object per transport, a thin shell over the scheduling core.
 * Each RPC reads the clock once, turns its input into a core command, runs it through the
 * journal (which appends the command to the DO's SQLite in the same synchronous step, and
 * snapshots now and then), re-arms the alarm, and returns the core's decisions. After an
 * eviction the state is the last snapshot plus the journal replayed.
 */
import { DurableObject } from "cloudflare:workers";
import {
  explainMessage,
  mustParseSchedulerConfig,
  nextWakeupAt,
  type Command,
  type DeliveryReport,
  type Effect,
  type Qmgr,
  type ResolvedRecipient,
  type SchedulerConfig,
} from "./core";
import { Journal } from "./storage/journal";
import { forgetFinished, migrateBacklog, noteFinished, recordAdmission, wasAdmitted, SqliteRecipientSource, storeRecipients, type StoredRecipient } from "./storage/sqlite-source";

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
  private journal!: Journal<StoredRecipient>;
  private readonly cfg: SchedulerConfig;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.cfg = mustParseSchedulerConfig({});
    ctx.blockConcurrencyWhile(async () => {
      const sql = ctx.storage.sql;
      migrateBacklog(sql);
      // Backlog rows of finished messages are dropped only once a snapshot no longer needs them.
      const every = Number(env.TRANSPORT_CHECKPOINT_EVERY) || 500;
      this.journal = new Journal<StoredRecipient>(sql, every, () => forgetFinished(sql));
      this.qmgr = this.journal.load(this.cfg, new SqliteRecipientSource(sql));
    });
  }

  /** Admits a message (idempotent by message and recipient, also after it left the core); returns the effects it caused. */
  async admit(req: AdmitRequest): Promise<{ admitted: boolean; effects: Effect[] }> {
    const sql = this.ctx.storage.sql;
    if (this.qmgr.messages.has(req.id) || wasAdmitted(sql, req.id, req.rcpts)) return { admitted: true, effects: [] };
    storeRecipients(sql, req.id, req.rcpts);
    const intake = { id: req.id, createTime: req.createTime, tenant: req.tenant ?? null, priority: req.priority ?? 0, rcptTotal: req.rcpts.length };
    const res = await this.run({ kind: "admit", now: nowSec(), intake });
    if (res.accepted) recordAdmission(sql, req.id, req.rcpts);
    return { admitted: res.accepted, effects: res.effects };
  }

  /** Selects up to `max` entries for delivery. */
  async dispatch(max = 100): Promise<{ entries: DispatchedEntry[]; effects: Effect[] }> {
    const res = await this.run({ kind: "dispatch", now: nowSec(), max });
    const entries = res.entries.map((e) => ({
      entryId: e.id,
      messageId: e.peer.job.message.id,
      transport: e.peer.queue.transport.name,
      nexthop: e.peer.queue.nexthop,
      rcpts: e.rcpts,
    }));
    return { entries, effects: res.effects };
  }

  /** Applies a delivery report (idempotent by entry id). */
  async report(entryId: number, report: DeliveryReport): Promise<{ applied: boolean; effects: Effect[] }> {
    const res = await this.run({ kind: "report", now: nowSec(), entryId, report });
    return { applied: res.accepted, effects: res.effects };
  }

  /** Why each in-core recipient of a message waits. */
  async explain(messageId: string) {
    return explainMessage(this.qmgr, messageId, nowSec());
  }

  override async alarm(): Promise<void> {
    await this.run({ kind: "tick", now: nowSec() });
  }

  /** Runs one command through the journal, notes finished messages, re-arms the alarm. */
  private async run(cmd: Command) {
    const res = this.journal.run(this.qmgr, cmd);
    for (const e of res.effects) if (e.kind === "message-done" || e.kind === "message-expired") noteFinished(this.ctx.storage.sql, e.messageId);
    const at = nextWakeupAt(this.qmgr);
    if (at !== null) await this.ctx.storage.setAlarm(at * 1000);
    return res;
  }
}

function nowSec(): number {
  return Math.floor(Date.now() / 1000);
}
