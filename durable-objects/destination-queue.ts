/**
 * DestinationQueue: one Durable Object per (transport, nexthop), or per MX site. A thin shell
 * over core/destination.ts: it reads the clock once per call, applies the report, stores the
 * record and the history line, arms the revival alarm when the destination dies, and answers
 * with the window and the dead-until time, which the Transport DO mirrors. It keeps the last
 * 500 feedback events for the dashboard.
 */
import { DurableObject } from "cloudflare:workers";
import { meterAlarm, meterObject, sqlRowCounts } from "../worker/lib/meter";
import {
  applyDestinationReport,
  createDestination,
  mustParseSchedulerConfig,
  reviveDestination,
  transportParams,
  type DestinationEvent,
  type DestinationParams,
  type DestinationRecord,
  type DestinationReport,
  type SchedulerConfig,
} from "./core";

/** How many feedback events a destination keeps. */
export const HISTORY_LIMIT = 500;

export type { DestinationRecord, DestinationReport };

export class DestinationQueue extends DurableObject<Env> {
  private record: DestinationRecord | null = null;
  private readonly cfg: SchedulerConfig;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ({ ctx, env } = meterObject(this, "DestinationQueue"));
    // The same parameters as the Transport DOs' cores, so both agree on every report.
    this.cfg = mustParseSchedulerConfig(env.SCHEDULER_CONFIG ? JSON.parse(env.SCHEDULER_CONFIG) : {});
    ctx.blockConcurrencyWhile(async () => {
      const sql = ctx.storage.sql;
      sql.exec("CREATE TABLE IF NOT EXISTS dest (id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL)");
      sql.exec("CREATE TABLE IF NOT EXISTS history (seq INTEGER PRIMARY KEY AUTOINCREMENT, event TEXT NOT NULL)");
      const row = sql.exec<{ state: string }>("SELECT state FROM dest WHERE id = 1").toArray()[0];
      this.record = row ? (JSON.parse(row.state) as DestinationRecord) : null;
    });
  }

  /** Applies a delivery report; answers the window and, if dead, when it comes back. */
  async report(r: DestinationReport & { transport: string }): Promise<{ window: number; deadUntil: number }> {
    return this.reportMany([r]);
  }

  /**
   * Applies several delivery reports in order (as many report() calls would) and answers the
   * state after the last; one storage alarm, the last one asked for.
   */
  async reportMany(reports: (DestinationReport & { transport: string })[]): Promise<{ window: number; deadUntil: number }> {
    const now = Math.floor(Date.now() / 1000);
    let answer = this.record ? { window: this.record.window, deadUntil: this.record.deadUntil } : { window: 0, deadUntil: 0 };
    let alarmAt: number | null = null;
    for (const r of reports) {
      const p = this.params(r.transport);
      const step = applyDestinationReport(this.record ?? createDestination(r.transport, p), r, now, p);
      this.save(step.record, step.event);
      if (step.alarmAt !== null) alarmAt = step.alarmAt;
      answer = step.answer;
    }
    if (alarmAt !== null) await this.ctx.storage.setAlarm(alarmAt * 1000);
    return answer;
  }

  /** The record (null if never reported) and the history, oldest first. */
  async get(): Promise<{ record: DestinationRecord | null; history: DestinationEvent[] }> {
    const rows = this.ctx.storage.sql.exec<{ event: string }>("SELECT event FROM history ORDER BY seq").toArray();
    return { record: this.record, history: rows.map((r) => JSON.parse(r.event) as DestinationEvent) };
  }

  /** Revives a dead destination now (postqueue -f). */
  async flush(): Promise<{ window: number; deadUntil: number } | null> {
    if (!this.record) return null;
    this.save(reviveDestination(this.record, this.params(this.record.transport)), null);
    await this.ctx.storage.deleteAlarm();
    return { window: this.record.window, deadUntil: this.record.deadUntil };
  }

  override async alarm(): Promise<void> {
    meterAlarm("DestinationQueue");
    if (this.record) this.save(reviveDestination(this.record, this.params(this.record.transport)), null);
  }

  private params(transport: string): DestinationParams {
    const t = transportParams(this.cfg, transport);
    return { ...t, deadTimeSec: this.cfg.global.minimalBackoffTime, idleMemorySec: this.cfg.global.destinationIdleMemory };
  }

  /** Stores the record and a history line, keeping the last HISTORY_LIMIT lines. */
  private save(rec: DestinationRecord, event: DestinationEvent | null): void {
    const sql = this.ctx.storage.sql;
    this.record = rec;
    sql.exec("INSERT OR REPLACE INTO dest (id, state) VALUES (1, ?)", JSON.stringify(rec));
    if (!event) return;
    const seq = sql.exec<{ seq: number }>("INSERT INTO history (event) VALUES (?) RETURNING seq", JSON.stringify(event)).one().seq;
    sql.exec("DELETE FROM history WHERE seq <= ?", seq - HISTORY_LIMIT);
  }

  /** Development and test only (GET /relay/dev/rows): rows held in each of this object's tables. */
  async devRowCounts(): Promise<Record<string, number>> {
    return sqlRowCounts(this.ctx.storage.sql);
  }
}
