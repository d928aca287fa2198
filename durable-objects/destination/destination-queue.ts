/**
 * DestinationQueue: one Durable Object per (transport, nexthop), or per MX site. A thin shell
 * over core/destination.ts: it reads the clock once per call, applies the report, stores the
 * record and the history line, arms the revival alarm when the destination dies, and answers
 * with the window and the dead-until time, which the Transport DO mirrors. It keeps the last
 * 500 feedback events for the dashboard.
 *
 * The record and its history are one row (`dest`: state and history as JSON), written once per
 * call: rows are billed one by one, and a report is one delivery. (The history had a table of
 * its own, a row per event, before; it is carried over once.)
 */
import { DurableObject } from "cloudflare:workers";
import { addMissingColumns } from "../../worker/lib/sql-columns";
import { schedulerConfigOf } from "../../worker/settings/scheduler";
import { sqlRowCounts } from "../../worker/meter";
import {
  applyDestinationReport,
  createDestination,
  reviveDestination,
  transportParams,
  type DestinationEvent,
  type DestinationParams,
  type DestinationRecord,
  type DestinationReport,
  type SchedulerConfig,
} from "../core";

/** How many feedback events a destination keeps. */
export const HISTORY_LIMIT = 500;

export type { DestinationRecord, DestinationReport };

export class DestinationQueue extends DurableObject<Env> {
  private record: DestinationRecord | null = null;
  private history: DestinationEvent[] = [];
  private readonly cfg: SchedulerConfig;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    // The same parameters as the Transport DOs' cores, so both agree on every report.
    this.cfg = schedulerConfigOf(env);
    ctx.blockConcurrencyWhile(async () => {
      const sql = ctx.storage.sql;
      // A new object's table has every column (an ALTER TABLE rewrites the schema: costly per object).
      sql.exec(
        "CREATE TABLE IF NOT EXISTS dest (id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL, history TEXT NOT NULL DEFAULT '[]')",
      );
      addMissingColumns(sql, "dest", { history: "TEXT NOT NULL DEFAULT '[]'" });
      const row = sql
        .exec<{ state: string; history: string }>("SELECT state, history FROM dest WHERE id = 1")
        .toArray()[0];
      this.record = row ? (JSON.parse(row.state) as DestinationRecord) : null;
      this.history = row ? (JSON.parse(row.history) as DestinationEvent[]) : [];
      if (sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'history'").toArray().length > 0) {
        const old = sql
          .exec<{ event: string }>("SELECT event FROM history ORDER BY seq")
          .toArray()
          .map((r) => JSON.parse(r.event) as DestinationEvent);
        this.history = [...old, ...this.history].slice(-HISTORY_LIMIT);
        if (this.record) this.store();
        sql.exec("DROP TABLE history");
      }
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
  async reportMany(
    reports: (DestinationReport & { transport: string })[],
  ): Promise<{ window: number; deadUntil: number }> {
    const now = Math.floor(Date.now() / 1000);
    let answer = this.record
      ? { window: this.record.window, deadUntil: this.record.deadUntil }
      : { window: 0, deadUntil: 0 };
    let alarmAt: number | null = null;
    for (const r of reports) {
      const p = this.params(r.transport);
      const step = applyDestinationReport(this.record ?? createDestination(r.transport, p), r, now, p);
      this.apply(step.record, step.event);
      if (step.alarmAt !== null) alarmAt = step.alarmAt;
      answer = step.answer;
    }
    if (reports.length > 0) this.store();
    if (alarmAt !== null) await this.ctx.storage.setAlarm(alarmAt * 1000);
    return answer;
  }

  /** The record (null if never reported) and the history, oldest first. */
  async get(): Promise<{ record: DestinationRecord | null; history: DestinationEvent[] }> {
    return { record: this.record, history: this.history };
  }

  /** Revives a dead destination now (postqueue -f). */
  async flush(): Promise<{ window: number; deadUntil: number } | null> {
    if (!this.record) return null;
    this.apply(reviveDestination(this.record, this.params(this.record.transport)), null);
    this.store();
    await this.ctx.storage.deleteAlarm();
    return { window: this.record.window, deadUntil: this.record.deadUntil };
  }

  override async alarm(): Promise<void> {
    if (!this.record) return;
    this.apply(reviveDestination(this.record, this.params(this.record.transport)), null);
    this.store();
  }

  private params(transport: string): DestinationParams {
    const t = transportParams(this.cfg, transport);
    return {
      ...t,
      deadTimeSec: this.cfg.global.minimalBackoffTime,
      idleMemorySec: this.cfg.global.destinationIdleMemory,
    };
  }

  /** Takes the record and a history line, keeping the last HISTORY_LIMIT lines (in memory). */
  private apply(rec: DestinationRecord, event: DestinationEvent | null): void {
    this.record = rec;
    if (!event) return;
    this.history.push(event);
    if (this.history.length > HISTORY_LIMIT) this.history.splice(0, this.history.length - HISTORY_LIMIT);
  }

  /** Writes the record and its history: one row. */
  private store(): void {
    this.ctx.storage.sql.exec(
      "INSERT INTO dest (id, state, history) VALUES (1, ?1, ?2) ON CONFLICT (id) DO UPDATE SET state = ?1, history = ?2",
      JSON.stringify(this.record),
      JSON.stringify(this.history),
    );
  }

  /** Development and test only (GET /relay/dev/rows): rows held in each of this object's tables. */
  async devRowCounts(): Promise<Record<string, number>> {
    return sqlRowCounts(this.ctx.storage.sql);
  }
}
