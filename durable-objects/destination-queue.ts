/**
 * DestinationQueue: one Durable Object per (transport, nexthop). It runs the core's Postfix
 * 2.5 feedback and dead detection on every delivery report and answers with the window and
 * dead-until time, which the Transport DO mirrors. An alarm revives a dead destination.
 */
import { DurableObject } from "cloudflare:workers";
import {
  createWindowState,
  mustParseSchedulerConfig,
  onNegativeFeedback,
  onPositiveFeedback,
  reviveWindow,
  transportParams,
  type TransportParams,
  type WindowState,
} from "./core";

/** The stored state of a destination (version 1). */
export interface DestinationRecord extends WindowState {
  v: 1;
  transport: string;
  deadUntil: number;
  reason: string | null;
}

/** One delivery report as the destination sees it. */
export interface DestinationReport {
  transport: string;
  /** Deliveries in flight, counting the one reported. */
  busy: number;
  siteFailure: { dsnStatus: string; reason: string } | null;
}

export class DestinationQueue extends DurableObject<Env> {
  private state: DestinationRecord | null = null;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.blockConcurrencyWhile(async () => {
      ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS dest (id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL)");
      const row = ctx.storage.sql.exec<{ state: string }>("SELECT state FROM dest WHERE id = 1").toArray()[0];
      this.state = row ? (JSON.parse(row.state) as DestinationRecord) : null;
    });
  }

  /** Applies a report; returns the window and when the destination comes back if dead. */
  async report(r: DestinationReport): Promise<{ window: number; deadUntil: number }> {
    const now = Math.floor(Date.now() / 1000);
    const p = this.params(r.transport);
    const s = this.state ?? { v: 1 as const, transport: r.transport, ...createWindowState(p), deadUntil: 0, reason: null };
    if (r.siteFailure) {
      if (s.window > 0 && onNegativeFeedback(s, p) === "died") {
        s.deadUntil = now + mustParseSchedulerConfig({}).global.minimalBackoffTime;
        s.reason = r.siteFailure.reason;
        await this.ctx.storage.setAlarm(s.deadUntil * 1000);
      }
    } else if (onPositiveFeedback(s, r.busy, p) === "revived") {
      s.deadUntil = 0;
      s.reason = null;
    }
    this.save(s);
    return { window: s.window, deadUntil: s.deadUntil };
  }

  /** The current record, or null if this destination has no history. */
  async get(): Promise<DestinationRecord | null> {
    return this.state;
  }

  override async alarm(): Promise<void> {
    const s = this.state;
    if (!s || s.window !== 0) return;
    reviveWindow(s, 0, this.params(s.transport));
    s.deadUntil = 0;
    s.reason = null;
    this.save(s);
  }

  private params(transport: string): TransportParams {
    return transportParams(mustParseSchedulerConfig({}), transport);
  }

  private save(s: DestinationRecord): void {
    this.state = s;
    this.ctx.storage.sql.exec("INSERT OR REPLACE INTO dest (id, state) VALUES (1, ?)", JSON.stringify(s));
  }
}
