/**
 * Random scenarios for the property tests: a configuration, messages, and a sequence of
 * operations (admit, dispatch, report, advance the clock) applied to a queue manager, with
 * a trace of everything observable: dispatched entries, reports and effects.
 */
import fc from "fast-check";
import {
  admitMessage,
  applyDestinationState,
  createQmgr,
  dispatchAll,
  drainEffects,
  mustParseSchedulerConfig,
  nextWakeupAt,
  removeMessage,
  reportDelivery,
  tick,
  type Effect,
  type Entry,
  type Qmgr,
  type SchedulerConfigInput,
} from "../../../durable-objects/core";
import { ArraySource, type TestRcpt } from "./harness";

export interface MessageSpec {
  rcpts: { dest: number; transport: number }[];
  tenant: number;
  priority: number;
  singleRcpt: boolean;
}

export type Op =
  | { kind: "admit" }
  | { kind: "dispatch"; max: number }
  | { kind: "report"; pick: number; outcome: "ok" | "defer" | "site" | "refusal" | "crash" }
  | { kind: "advance"; sec: number }
  | { kind: "remove"; pick: number }
  | { kind: "verdict"; pick: number; dead: boolean; window: number };

export interface Scenario {
  config: SchedulerConfigInput;
  messages: MessageSpec[];
  ops: Op[];
}

const DESTS = ["a.example", "b.example", "c.example", "d.example", "e.example", "f.example"];
const TRANSPORTS = ["smtp", "relay"];

/** A small but adversarial configuration: tight pools and limits exercise refills and blockers. */
export const configArb = (opts: { failures: boolean }) =>
  fc.record({
    qmgr_message_active_limit: fc.integer({ min: 1, max: 6 }),
    qmgr_message_recipient_limit: fc.integer({ min: 1, max: 40 }),
    qmgr_message_recipient_minimum: fc.integer({ min: 1, max: 5 }),
    initial_destination_concurrency: fc.integer({ min: 1, max: 5 }),
    default_destination_concurrency_limit: fc.constantFrom(0, 1, 3, 20),
    default_destination_recipient_limit: fc.constantFrom(0, 1, 2, 5, 50),
    default_destination_concurrency_positive_feedback: fc.constantFrom(
      "1",
      "1/concurrency",
      "1/sqrt_concurrency",
      "0.3",
    ),
    default_destination_concurrency_negative_feedback: fc.constantFrom("1", "1/concurrency", "1/4"),
    default_destination_concurrency_failed_cohort_limit: opts.failures ? fc.constantFrom(0, 1, 3) : fc.constant(1),
    default_delivery_slot_cost: fc.constantFrom(0, 2, 3, 5),
    default_delivery_slot_loan: fc.integer({ min: 0, max: 3 }),
    default_delivery_slot_discount: fc.constantFrom(0, 50, 100),
    default_minimum_delivery_slots: fc.integer({ min: 0, max: 3 }),
    default_recipient_limit: fc.integer({ min: 0, max: 60 }),
    default_extra_recipient_limit: fc.integer({ min: 0, max: 20 }),
    default_recipient_refill_limit: fc.integer({ min: 1, max: 10 }),
    default_recipient_refill_delay: fc.integer({ min: 1, max: 10 }),
    default_process_limit: fc.integer({ min: 1, max: 30 }),
    destination_idle_memory: fc.constantFrom(0, 600),
    minimal_backoff_time: fc.constantFrom(10, 300),
    // The learned ceiling (relay §12.7): off, as Postfix, or the relay's default.
    default_destination_concurrency_ceiling_memory: fc.constantFrom(0, 3600),
  });

export const messageArb = fc.record({
  rcpts: fc.array(
    fc.record({ dest: fc.integer({ min: 0, max: DESTS.length - 1 }), transport: fc.integer({ min: 0, max: 1 }) }),
    { minLength: 1, maxLength: 40 },
  ),
  tenant: fc.integer({ min: 0, max: 2 }),
  priority: fc.constantFrom(0, 0, 0, 1),
  singleRcpt: fc.boolean(),
});

/** A concurrency refusal (relay §12.7): with a ceiling memory (the core's default) it teaches the learned ceiling. */
export const REFUSAL = {
  dsnStatus: "4.7.0",
  reason: "host mx.test[192.0.2.1] refused to talk to me: 421 4.7.0 Too many connections",
};

export const opArb = (opts: { failures: boolean; control?: boolean }) =>
  fc.oneof(
    ...(opts.control
      ? [
          { arbitrary: fc.record({ kind: fc.constant("remove" as const), pick: fc.nat() }), weight: 1 },
          {
            arbitrary: fc.record({
              kind: fc.constant("verdict" as const),
              pick: fc.nat(),
              dead: fc.boolean(),
              window: fc.integer({ min: 1, max: 8 }),
            }),
            weight: 1,
          },
        ]
      : []),
    { arbitrary: fc.constant({ kind: "admit" as const }), weight: 2 },
    {
      arbitrary: fc.record({ kind: fc.constant("dispatch" as const), max: fc.integer({ min: 1, max: 20 }) }),
      weight: 4,
    },
    {
      arbitrary: fc.record({
        kind: fc.constant("report" as const),
        pick: fc.nat(),
        outcome: opts.failures
          ? fc.constantFrom(
              "ok" as const,
              "ok" as const,
              "defer" as const,
              "site" as const,
              "refusal" as const,
              "crash" as const,
            )
          : fc.constant("ok" as const),
      }),
      weight: 5,
    },
    {
      arbitrary: fc.record({ kind: fc.constant("advance" as const), sec: fc.integer({ min: 0, max: 400 }) }),
      weight: 1,
    },
  );

export const scenarioArb = (opts: { failures: boolean; control?: boolean }) =>
  fc.record({
    config: configArb(opts),
    messages: fc.array(messageArb, { minLength: 1, maxLength: 8 }),
    ops: fc.array(opArb(opts), { minLength: 1, maxLength: 120 }),
  });

/** What a run observed, in order. */
export interface Trace {
  events: string[];
  dispatched: Entry<TestRcpt>[];
  effects: Effect[];
}

/** A running scenario: the queue manager plus the harness bookkeeping. */
export class Runner {
  now = 0;
  admitted = 0;
  inflight: Entry<TestRcpt>[] = [];
  readonly trace: Trace = { events: [], dispatched: [], effects: [] };
  /** Messages taken out (remove ops), with the waiting recipients each removal returned. */
  readonly removed = new Map<string, TestRcpt[]>();

  constructor(
    readonly s: Scenario,
    readonly q: Qmgr<TestRcpt>,
    readonly src: ArraySource,
  ) {}

  /** A fresh run of a scenario: recipients numbered 0.. in message order. */
  static fresh(s: Scenario): Runner {
    const src = new ArraySource();
    let n = 0;
    s.messages.forEach((m, i) =>
      src.files.set(
        `m${i}`,
        m.rcpts.map((r) => {
          const nexthop = DESTS[r.dest]!;
          const k = n++;
          return { n: k, address: `r${k % 5}+x${k}@${nexthop}`, transport: TRANSPORTS[r.transport]!, nexthop };
        }),
      ),
    );
    return new Runner(s, createQmgr(mustParseSchedulerConfig(s.config), src), src);
  }

  /** The total number of recipients in the scenario. */
  get totalRcpts(): number {
    return this.s.messages.reduce((n, m) => n + m.rcpts.length, 0);
  }

  /** Applies one operation and records what happened. */
  apply(op: Op): void {
    if (op.kind === "admit") {
      if (this.admitted >= this.s.messages.length) return;
      const i = this.admitted;
      const spec = this.s.messages[i]!;
      const m = admitMessage(
        this.q,
        {
          id: `m${i}`,
          createTime: this.now,
          rcptTotal: spec.rcpts.length,
          tenant: `t${spec.tenant}`,
          priority: spec.priority,
          singleRcpt: spec.singleRcpt,
        },
        this.now,
      );
      if (m) this.admitted += 1;
      this.trace.events.push(`admit m${i} ${m ? "ok" : "full"}`);
    } else if (op.kind === "dispatch") {
      const got = dispatchAll(this.q, this.now, op.max);
      for (const e of got) {
        this.inflight.push(e);
        this.trace.dispatched.push(e);
      }
      this.trace.events.push(`dispatch ${got.map((e) => `${e.id}:${e.rcpts.map((r) => r.n).join(",")}`).join(" ")}`);
    } else if (op.kind === "report") {
      if (this.inflight.length === 0) return;
      const [e] = this.inflight.splice(op.pick % this.inflight.length, 1);
      const report =
        op.outcome === "ok"
          ? { status: "ok" as const }
          : op.outcome === "defer"
            ? { status: "defer" as const }
            : op.outcome === "crash"
              ? { status: "crash" as const }
              : op.outcome === "refusal"
                ? { status: "defer" as const, siteFailure: REFUSAL }
                : { status: "defer" as const, siteFailure: { dsnStatus: "4.4.1", reason: "refused" } };
      const r = reportDelivery(this.q, e!.id, report, this.now);
      this.trace.events.push(`report ${e!.id} ${op.outcome} ${r.kind}`);
    } else if (op.kind === "remove") {
      const ids = [...this.q.messages.keys()];
      if (ids.length === 0) return;
      const id = ids[op.pick % ids.length]!;
      const waiting = removeMessage(this.q, id, this.now);
      this.removed.set(id, [...(this.removed.get(id) ?? []), ...waiting]);
      this.trace.events.push(`remove ${id} ${waiting.map((r) => r.n).join(",")}`);
    } else if (op.kind === "verdict") {
      const queues = [...this.q.transports.values()].flatMap((t) => [...t.queues.values()]);
      if (queues.length === 0) return;
      const queue = queues[op.pick % queues.length]!;
      const v = { window: op.window, deadUntil: op.dead ? this.now + 30 : 0, reason: "verdict" };
      const changed = applyDestinationState(this.q, queue.transport.name, queue.name, v, this.now);
      this.trace.events.push(`verdict ${queue.name} ${JSON.stringify(v)} ${changed}`);
    } else {
      this.now += op.sec;
      const at = nextWakeupAt(this.q);
      tick(this.q, this.now);
      this.trace.events.push(`advance ${this.now} wake ${at}`);
    }
    const effects = drainEffects(this.q);
    this.trace.effects.push(...effects);
    if (effects.length) this.trace.events.push(`effects ${JSON.stringify(effects)}`);
  }

  /** Drives everything to the end: admits all, delivers all in flight successfully. */
  drain(maxRounds = 100000): void {
    for (let i = 0; i < maxRounds; i++) {
      if (this.admitted < this.s.messages.length) this.apply({ kind: "admit" });
      this.apply({ kind: "dispatch", max: 1000 });
      if (this.inflight.length > 0) this.apply({ kind: "report", pick: 0, outcome: "ok" });
      else if (this.q.messages.size === 0 && this.admitted >= this.s.messages.length) return;
      else this.apply({ kind: "advance", sec: Math.max(1, (nextWakeupAt(this.q) ?? this.now + 1) - this.now) });
    }
    throw new Error("scenario did not drain");
  }
}
