/*
 * NAME
 *   engine - discrete-event simulation of the relay's shell around the REAL scheduling core
 * DESCRIPTION
 *   runSimulation() plays a list of message arrivals against modelled destination servers
 *   (destination.ts) and returns what happened: every delivery attempt, the delivery time of
 *   every recipient, optional per-destination traces and the audit of invariant checks.
 *   The scheduling is entirely the core's (durable-objects/core): this file only does what
 *   a shell does — admit messages, hand dispatched entries to "delivery agents", report the
 *   agents' answers, honour timers, carry out effects.
 *
 *   Loop. Events (arrival, retry, session end, timer wake-up) are kept in time order;
 *   simulated time is fractional, the core always sees Math.floor(t). For each event, in
 *   order: tick(now) for due timers; the event itself (admitMessage / reportDelivery);
 *   dispatchAll(now), each entry becoming a session at its destination; drainEffects after
 *   every core call; then a wake-up is armed at nextWakeupAt(). The run ends when every
 *   recipient is delivered and no session is open (idle-queue timers left are irrelevant).
 *
 *   Retries. A recipient is undelivered until a session carrying it succeeds. When the core
 *   says `message-deferred` (the message left the active queue with recipients deferred:
 *   failed sessions, or todo entries of a destination that died), the message is re-admitted
 *   at `nextAttemptAt` as a new pass whose queue file holds exactly its undelivered
 *   recipients — Postfix re-reading the deferred queue file. Back-off is the core's (age
 *   based, minimal_backoff_time … maximal_backoff_time); scenarios shorten it via config.
 *   Messages that find the active queue full wait in a FIFO backlog.
 *
 *   Invariants checked: at each dispatch the destination's entries in flight ≤ the core's
 *   window, and the simulator's count equals the core's busy count; a transport never has
 *   more than process_limit in flight; no recipient is delivered twice; message-done comes
 *   only when all recipients are delivered; every report is applied; the run does not stall;
 *   a message admitted with nothing to deliver now (every recipient deferred at resolve
 *   time) leaves the active queue at once, as Postfix's qmgr_active_done() makes it; at the
 *   end the core's active queue is empty.
 * INVARIANTS
 *   Deterministic: the same setup and seed give the same result.
 * ERRORS
 *   Broken invariants are recorded in the audit, never thrown; the run continues when it can.
 */
import {
  admitMessage,
  createQmgr,
  dispatchAll,
  drainEffects,
  hasActiveRoom,
  mustParseSchedulerConfig,
  nextWakeupAt,
  reportDelivery,
  tick,
  type Entry,
  type Qmgr,
} from "../../durable-objects/core";
import { Audit } from "./audit";
import { DestinationServer, type SessionPlan } from "./destination";
import { EventQueue } from "./event-queue";
import { MailStore, type SimRcpt } from "./mail-store";
import { createRng, type Rng } from "./rng";
import type { AttemptRecord, DestinationTrace, SimResult, SimSetup } from "./run-types";
import { StepSeries } from "./stats";

export type { AttemptRecord, DestinationTrace, SimMessage, SimResult, SimSetup } from "./run-types";

type SimEvent =
  | { kind: "arrive"; id: string }
  | { kind: "retry"; id: string }
  | { kind: "finish"; entryId: number }
  | { kind: "wake"; at: number };

interface Session {
  entry: Entry<SimRcpt>;
  queueName: string;
  nexthop: string;
  plan: SessionPlan;
  startAt: number;
  pass: number;
}

const MAX_EVENTS = 5_000_000;

/** Runs one simulation; see the module header. */
export function runSimulation(setup: SimSetup): SimResult {
  return new Simulation(setup).run();
}

class Simulation {
  private readonly q: Qmgr<SimRcpt>;
  private readonly store = new MailStore();
  private readonly events = new EventQueue<SimEvent>();
  private readonly servers = new Map<string, DestinationServer>();
  private readonly sessions = new Map<number, Session>();
  private readonly inflight = new Map<string, number>();
  private readonly backlog: string[] = [];
  private readonly wakes = new Set<number>();
  private readonly traces = new Map<string, DestinationTrace>();
  private readonly attempts: AttemptRecord[] = [];
  private readonly audit = new Audit();
  private readonly rng: Rng;
  private now = 0;
  private eventCount = 0;

  constructor(private readonly setup: SimSetup) {
    this.q = createQmgr<SimRcpt>(mustParseSchedulerConfig(setup.config), this.store);
    this.rng = createRng(setup.seed);
    for (const n of setup.traceNexthops ?? [])
      this.traces.set(n, { inflight: new StepSeries(), window: new StepSeries() });
  }

  run(): SimResult {
    for (const m of this.setup.messages) {
      this.store.add(m.id, m.arriveAt, m.rcpts);
      this.events.push(m.arriveAt, { kind: "arrive", id: m.id });
    }
    const limit = this.setup.maxSimTimeSec ?? 30 * 86400;
    while (!this.finished()) {
      const ev = this.events.pop();
      if (!ev) {
        this.audit.violate(
          "stalled",
          `no events left at t=${this.now.toFixed(1)} with ${this.store.undeliveredTotal} recipients undelivered`,
        );
        break;
      }
      if (ev.at > limit || ++this.eventCount > MAX_EVENTS) {
        this.audit.violate("time limit", `gave up at t=${ev.at.toFixed(1)} after ${this.eventCount} events`);
        break;
      }
      this.step(ev.at, ev.event);
    }
    this.checkEnd();
    return {
      store: this.store,
      attempts: this.attempts,
      traces: this.traces,
      servers: this.servers,
      audit: this.audit,
      endAt: this.now,
      events: this.eventCount,
    };
  }

  private finished(): boolean {
    return this.store.undeliveredTotal === 0 && this.sessions.size === 0;
  }

  /** One event: timers, the event, dispatch, effects, next wake-up, traces. */
  private step(at: number, ev: SimEvent): void {
    this.now = at;
    const sec = Math.floor(at);
    tick(this.q, sec);
    this.applyEffects(sec);
    if (ev.kind === "arrive" || ev.kind === "retry") this.enqueue(ev.id, sec);
    else if (ev.kind === "finish") this.finishSession(ev.entryId, sec);
    else this.wakes.delete(ev.at);
    this.dispatch(sec);
    this.armWakeup(sec);
    this.recordTraces();
  }

  /** Admits the message (or queues it behind the backlog when the active queue is full). */
  private enqueue(id: string, sec: number): void {
    this.backlog.push(id);
    this.admitBacklog(sec);
  }

  private admitBacklog(sec: number): void {
    while (this.backlog.length > 0 && hasActiveRoom(this.q)) {
      const id = this.backlog.shift()!;
      const stored = this.store.get(id);
      if (this.q.messages.has(id)) {
        this.audit.violate("double admission", `${id} is still in the active queue`);
        continue;
      }
      const total = this.store.beginAttempt(id);
      const m = admitMessage(this.q, { id, createTime: Math.floor(stored.arriveAt), rcptTotal: total }, sec);
      if (!m) {
        this.audit.violate("admission refused", `${id} refused although the active queue had room`);
        continue;
      }
      this.applyEffects(sec);
      // A message with nothing to deliver now (all deferred at resolve) must leave at once (§8).
      if (m.refcount === 0 && this.q.messages.get(id) === m)
        this.audit.violate("stuck message", `${id} stays in the active queue with no entries`);
    }
  }

  /** Starts a session for every entry the core dispatches. */
  private dispatch(sec: number): void {
    const touched = new Set<Entry["peer"]["queue"]>();
    for (const e of dispatchAll(this.q, sec)) {
      this.startSession(e);
      touched.add(e.peer.queue);
    }
    for (const queue of touched) {
      const n = this.inflight.get(queue.name) ?? 0;
      if (n !== queue.busyCount)
        this.audit.violate("busy count", `${queue.name}: simulator has ${n} in flight, core ${queue.busyCount}`);
    }
    for (const t of this.q.transports.values()) {
      if (t.busyCount > t.p.processLimit)
        this.audit.violate("process limit", `${t.name}: ${t.busyCount} in flight > ${t.p.processLimit}`);
    }
    this.applyEffects(sec);
  }

  private startSession(e: Entry<SimRcpt>): void {
    const queue = e.peer.queue;
    const n = (this.inflight.get(queue.name) ?? 0) + 1;
    this.inflight.set(queue.name, n);
    if (n > queue.window)
      this.audit.violate(
        "window exceeded",
        `${queue.name}: ${n} in flight > window ${queue.window} at t=${this.now.toFixed(2)}`,
      );
    const server = this.serverFor(queue.nexthop);
    const plan = server.connect(this.now, e.rcpts.length, this.rng);
    const pass = this.store.get(e.peer.job.message.id).passes;
    this.sessions.set(e.id, { entry: e, queueName: queue.name, nexthop: queue.nexthop, plan, startAt: this.now, pass });
    this.events.push(plan.endAt, { kind: "finish", entryId: e.id });
  }

  private serverFor(nexthop: string): DestinationServer {
    let s = this.servers.get(nexthop);
    if (!s) {
      s = new DestinationServer(this.setup.destinationFor(nexthop));
      this.servers.set(nexthop, s);
    }
    return s;
  }

  /** A session ended: record deliveries, report to the core. */
  private finishSession(entryId: number, sec: number): void {
    const s = this.sessions.get(entryId);
    if (!s) {
      this.audit.violate("unknown session", `entry ${entryId}`);
      return;
    }
    this.sessions.delete(entryId);
    this.serverFor(s.nexthop).close(s.plan);
    this.inflight.set(s.queueName, (this.inflight.get(s.queueName) ?? 0) - 1);
    if (s.plan.outcome === "delivered") {
      for (const r of s.entry.rcpts) {
        if (!this.store.markDelivered(r, this.now))
          this.audit.violate("delivered twice", `${r.address} of ${r.messageId}`);
      }
    }
    const { entry, plan } = s;
    this.attempts.push({
      nexthop: s.nexthop,
      messageId: entry.peer.job.message.id,
      pass: s.pass,
      rcpts: entry.rcpts.length,
      startAt: s.startAt,
      endAt: this.now,
      outcome: plan.outcome,
    });
    const res = reportDelivery(this.q, entryId, plan.report, sec);
    if (res.kind !== "applied") this.audit.violate("report not applied", `entry ${entryId}: ${res.kind}`);
    this.applyEffects(sec);
  }

  /** Carries out the core's effects. */
  private applyEffects(sec: number): void {
    let left = false;
    for (const ef of drainEffects(this.q)) {
      this.audit.count(`effect:${ef.kind}`);
      if (ef.kind === "deferred") this.audit.count("deferred recipients", ef.rcpts.length);
      else if (ef.kind === "destination" || ef.kind === "transport") this.audit.count(`${ef.kind}:${ef.event}`);
      else if (ef.kind === "message-expired") this.audit.violate("expired", `${ef.messageId} expired undelivered`);
      else {
        left = true;
        this.onMessageLeft(ef.messageId, ef.kind === "message-deferred" ? ef.nextAttemptAt : null);
      }
    }
    if (left) this.admitBacklog(sec);
  }

  private onMessageLeft(id: string, nextAttemptAt: number | null): void {
    const m = this.store.get(id);
    if (nextAttemptAt === null) {
      if (m.undelivered > 0)
        this.audit.violate("done but undelivered", `${id}: message-done with ${m.undelivered} recipients undelivered`);
      return;
    }
    if (m.undelivered === 0)
      this.audit.violate("deferred but delivered", `${id}: message-deferred with every recipient delivered`);
    else this.events.push(Math.max(nextAttemptAt, this.now), { kind: "retry", id });
  }

  /** Arms one wake-up event at the core's next timer. */
  private armWakeup(sec: number): void {
    const w = nextWakeupAt(this.q);
    if (w === null) return;
    const at = w <= sec ? this.now : w;
    if (this.wakes.has(at)) return;
    this.wakes.add(at);
    this.events.push(at, { kind: "wake", at });
  }

  private recordTraces(): void {
    if (this.traces.size === 0) return;
    const t = this.q.transports.get("smtp");
    for (const [name, tr] of this.traces) {
      tr.inflight.record(this.now, this.inflight.get(name) ?? 0);
      const queue = t?.queues.get(name);
      if (queue) tr.window.record(this.now, queue.window);
    }
  }

  private checkEnd(): void {
    if (this.store.undeliveredTotal > 0)
      this.audit.violate("undelivered", `${this.store.undeliveredTotal} recipients never delivered`);
    if (this.q.messages.size > 0)
      this.audit.violate("active queue not empty", `${this.q.messages.size} messages left in core`);
    if (this.q.busy.size > 0 || this.sessions.size > 0)
      this.audit.violate("in flight at end", `${this.q.busy.size} busy in core, ${this.sessions.size} sessions`);
  }
}
