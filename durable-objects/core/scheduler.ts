/*
 * NAME
 *   scheduler - the queue manager's public face: create, admit, dispatch, report, tick,
 *   explain
 * DESCRIPTION
 *   createQmgr() makes an empty in-core queue manager over a recipient source.
 *   admitMessage() brings a message into the active queue (null when the active queue is
 *   full: the shell keeps it in its backlog and tries again later). dispatchAll() runs the
 *   agent loop on every transport, round robin. reportDelivery() applies a delivery result.
 *   tick() handles due timers; nextWakeupAt() is when the shell's alarm must fire next.
 *   drainEffects() hands over what the shell must record. explainMessage() says why each
 *   in-core recipient of a message waits (the relay's "blocked_by").
 *
 *   The clock is the `now` argument (whole seconds) of every call; nothing here reads a
 *   clock, does I/O or uses randomness.
 * INVARIANTS
 *   All of the module invariants of job-list, select, complete and queue hold between calls.
 * ERRORS
 *   None for expected input; InvariantError for corrupt state.
 */
import { enqueueMessage, hasActiveRoom, type MessageIntake } from "./assign";
import type { SchedulerConfig } from "./config";
import type { Entry, Message, Qmgr, Transport } from "./model";
import type { Effect, RecipientSource, ResolvedRecipient } from "./ports";
import { policyBlock } from "./policy";
import { dispatch, peerPolicyKeys, selectTransport } from "./select";
import { runTimers } from "./timers";
import { peekTimerAt } from "./timer-heap";

/** An empty queue manager. */
export function createQmgr<R extends ResolvedRecipient>(cfg: SchedulerConfig, source: RecipientSource<R>): Qmgr<R> {
  return {
    cfg,
    source,
    messages: new Map(),
    transports: new Map(),
    transportOrder: [],
    rcptCount: 0,
    queueCount: 0,
    nextEntryId: 1,
    batchSeq: 0,
    busy: new Map(),
    timers: [],
    timerSeq: 0,
    idleHead: null,
    idleTail: null,
    idleTimerAt: 0,
    policies: new Map(),
    effects: [],
    candidateShortcut: true,
    now: 0,
  };
}

/** Admits a message to the active queue, or returns null when it is full. */
export function admitMessage(q: Qmgr, intake: MessageIntake, now: number): Message | null {
  q.now = now;
  if (!hasActiveRoom(q)) return null;
  return enqueueMessage(q, intake, now);
}

/**
 * Runs the agent loop: transports in round robin (spec §4.1), one selection per turn, until
 * none can start another delivery or `max` entries were selected.
 */
export function dispatchAll<R extends ResolvedRecipient>(q: Qmgr<R>, now: number, max = Infinity): Entry<R>[] {
  q.now = now;
  const out: Entry<R>[] = [];
  const idle = new Set<Transport>(); // ready work but nothing selectable: its blockers wait for a release
  while (out.length < max) {
    const t = selectTransport(q, now, idle);
    if (!t) break;
    const got = dispatch(q, t, now, 1);
    if (got.length === 0) idle.add(t);
    else out.push(got[0] as Entry<R>);
  }
  return out;
}

/** Handles due timers. */
export function tick(q: Qmgr, now: number): void {
  runTimers(q, now);
}

/** When the shell must call tick() next, or null if nothing is timed. */
export function nextWakeupAt(q: Qmgr): number | null {
  return peekTimerAt(q.timers);
}

/** Returns and clears the pending effects. */
export function drainEffects(q: Qmgr): Effect[] {
  const out = q.effects;
  q.effects = [];
  return out;
}

/** Why an in-core recipient waits. */
export type BlockedBy =
  | { kind: "in_flight" }
  | { kind: "destination_dead"; until: number; reason: string | null }
  | { kind: "rate_delay"; until: number }
  | { kind: "concurrency"; window: number; busy: number }
  | {
      kind: "policy";
      key: string;
      reason: "suspended" | "concurrency" | "rate" | "interval" | "cap";
      until: number | null;
      label?: string;
    }
  | { kind: "transport_dead"; until: number }
  | { kind: "process_limit"; limit: number }
  | { kind: "queued" };

/** Says why each in-core entry of a message waits (empty if the message is not in core). */
export function explainMessage(
  q: Qmgr,
  messageId: string,
  now: number,
): { entryId: number; rcpts: ResolvedRecipient[]; blockedBy: BlockedBy }[] {
  const m = q.messages.get(messageId);
  if (!m) return [];
  const out: { entryId: number; rcpts: ResolvedRecipient[]; blockedBy: BlockedBy }[] = [];
  for (const e of q.busy.values())
    if (e.peer.job.message === m) out.push({ entryId: e.id, rcpts: e.rcpts, blockedBy: { kind: "in_flight" } });
  for (const j of m.jobs) {
    for (let p = j.peerHead; p; p = p.next) {
      for (let e = p.todoHead; e; e = e.pNext)
        out.push({ entryId: e.id, rcpts: e.rcpts, blockedBy: explainTodo(q, e, now) });
    }
  }
  return out;
}

function explainTodo(q: Qmgr, e: Entry, now: number): BlockedBy {
  const queue = e.peer.queue;
  const t = queue.transport;
  if (t.dead) return { kind: "transport_dead", until: t.deadUntil };
  if (queue.window === 0) return { kind: "destination_dead", until: queue.timerAt, reason: queue.dsn };
  if (queue.window < 0) return { kind: "rate_delay", until: queue.timerAt };
  if (queue.busyCount >= queue.window) return { kind: "concurrency", window: queue.window, busy: queue.busyCount };
  if (q.policies.size > 0) {
    const b = policyBlock(q, peerPolicyKeys(q, e.peer), now);
    if (b)
      return { kind: "policy", key: b.key, reason: b.reason, until: b.until, ...(b.label ? { label: b.label } : {}) };
  }
  if (t.busyCount >= t.p.processLimit) return { kind: "process_limit", limit: t.p.processLimit };
  return { kind: "queued" };
}
