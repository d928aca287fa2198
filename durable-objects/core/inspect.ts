/*
 * NAME
 *   inspect - read-only views of the in-core queue for operators (qshape, destinations)
 * DESCRIPTION
 *   shapeOf() builds qshape rows from (destination, age, count) samples; the Transport DO uses it
 *   for recipients waiting outside the core too.
 *   queueShape() counts in-core recipients by destination and message age, in the manner of
 *   Postfix's qshape(1): one row per destination (plus a TOTAL row first), one column per
 *   age bucket (minutes, doubling: 5, 10, 20, … and an overflow bucket), largest rows first.
 *   destinationsView() lists each destination queue with its window, deliveries in flight,
 *   todo entries, state (ready, dead, suspended, idle), dead-until and the feedback
 *   accumulators. Neither changes the state.
 * INVARIANTS
 *   The TOTAL row's buckets are the column sums; every in-core recipient is counted once.
 * ERRORS
 *   None.
 */
import type { Qmgr, Queue } from "./model";

/** Postfix qshape's default bucket limits, in minutes (the last bucket is open-ended). */
export const QSHAPE_BUCKETS_MIN = [5, 10, 20, 40, 80, 160, 320, 640, 1280] as const;

/** One qshape row. */
export interface ShapeRow {
  destination: string;
  total: number;
  /** Counts per bucket: ≤ 5 min, ≤ 10 min, …, ≤ 1280 min, and > 1280 min. */
  buckets: number[];
}

function bucketOf(ageMin: number, limits: readonly number[]): number {
  for (let i = 0; i < limits.length; i++) if (ageMin <= limits[i]!) return i;
  return limits.length;
}

/** One count for qshape: `n` recipients for `destination`, of a message `ageSec` old. */
export interface ShapeSample {
  destination: string;
  ageSec: number;
  n: number;
}

/** qshape rows (TOTAL first, then largest first) from samples. */
export function shapeOf(samples: Iterable<ShapeSample>, limits: readonly number[] = QSHAPE_BUCKETS_MIN): ShapeRow[] {
  const rows = new Map<string, ShapeRow>();
  const total: ShapeRow = { destination: "TOTAL", total: 0, buckets: new Array<number>(limits.length + 1).fill(0) };
  for (const { destination, ageSec, n } of samples) {
    let row = rows.get(destination);
    if (!row)
      rows.set(destination, (row = { destination, total: 0, buckets: new Array<number>(limits.length + 1).fill(0) }));
    const b = bucketOf(ageSec / 60, limits);
    row.buckets[b]! += n;
    row.total += n;
    total.buckets[b]! += n;
    total.total += n;
  }
  return [total, ...[...rows.values()].sort((a, b) => b.total - a.total || (a.destination < b.destination ? -1 : 1))];
}

function* inCoreSamples(q: Qmgr, now: number): Generator<ShapeSample> {
  for (const m of q.messages.values()) {
    const ageSec = Math.max(0, now - (m.createTime ?? m.queuedTime));
    for (const j of m.jobs) {
      for (let p = j.peerHead; p; p = p.next) {
        for (let e = p.todoHead; e; e = e.pNext) yield { destination: p.queue.nexthop, ageSec, n: e.rcpts.length };
      }
    }
  }
  for (const e of q.busy.values()) {
    const m = e.peer.job.message;
    yield {
      destination: e.peer.queue.nexthop,
      ageSec: Math.max(0, now - (m.createTime ?? m.queuedTime)),
      n: e.rcpts.length,
    };
  }
}

/** In-core recipients by destination and message age (qshape). */
export function queueShape(q: Qmgr, now: number, limits: readonly number[] = QSHAPE_BUCKETS_MIN): ShapeRow[] {
  return shapeOf(inCoreSamples(q, now), limits);
}

/** One destination queue as an operator sees it. */
export interface DestinationView {
  transport: string;
  queue: string;
  nexthop: string;
  state: "ready" | "dead" | "suspended" | "idle";
  window: number;
  busy: number;
  todo: number;
  /** Dead: revival time; suspended: resume time; else null. */
  until: number | null;
  reason: string | null;
  success: number;
  failure: number;
  failCohorts: number;
  lastDone: number | null;
}

function stateOf(queue: Queue): DestinationView["state"] {
  if (queue.window === 0) return "dead";
  if (queue.window < 0) return "suspended";
  return queue.idleSince >= 0 ? "idle" : "ready";
}

/** Every destination queue in core, busiest first. */
export function destinationsView(q: Qmgr): DestinationView[] {
  const out: DestinationView[] = [];
  for (const t of q.transports.values()) {
    for (const queue of t.queues.values()) {
      out.push({
        transport: t.name,
        queue: queue.name,
        nexthop: queue.nexthop,
        state: stateOf(queue),
        window: queue.window,
        busy: queue.busyCount,
        todo: queue.todoCount,
        until: queue.timerAt > 0 ? queue.timerAt : null,
        reason: queue.dsn,
        success: queue.success,
        failure: queue.failure,
        failCohorts: queue.failCohorts,
        lastDone: queue.lastDone > 0 ? queue.lastDone : null,
      });
    }
  }
  return out.sort((a, b) => b.busy + b.todo - (a.busy + a.todo) || (a.queue < b.queue ? -1 : 1));
}
