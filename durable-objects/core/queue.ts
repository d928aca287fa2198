/*
 * NAME
 *   queue - destination queues, entries and the peers' todo lists of a transport (after Postfix
 *   nqmgr qmgr_queue.c, qmgr_peer.c, qmgr_entry.c; the jobs' peers are peer.ts)
 * DESCRIPTION
 *   queueName() names the queue a recipient goes to: the nexthop, or with a recipient limit
 *   of 1 the recipient itself (localpart without extension @ nexthop, spec §3.3).
 *   obtainQueue() finds or creates it; an idle queue remembered for destination_idle_memory
 *   (spec §12.4) is reused with its learned window, or reset once that time has passed.
 *   queueIdle() forgets an empty ready queue (Postfix) or puts it on the idle list (relay);
 *   expireIdle() forgets idle queues whose memory ran out. The idle list is ordered by idle
 *   time, which only grows, so one timer at its head serves it in O(1) per queue.
 *   updateReady() keeps transport.readyTotal = Σ min(window - busy, todo) over ready queues,
 *   the "is there enough work" test of spec §4.1, in O(1) per change.
 *   blockerUpdate() releases the transport's blockers when a tagged queue gains room (§4.4).
 *   createEntry(), selectTodo() and unlinkTodo() maintain the peers' todo lists (the jobs' peer
 *   lists are peer.ts's).
 *   todoEntriesOf() lists a queue's todo entries (rare: a destination's death), by job.
 *   addTimer() schedules a timer on the heap.
 * INVARIANTS
 *   An entry is on its peer's todo list iff it is todo; queue.todoCount counts them.
 *   readyShare is the queue's current term of readyTotal. A queue is on the idle list iff
 *   idleSince ≥ 0.
 * ERRORS
 *   InvariantError on an entry created for a dead queue or a busy entry unlinked as todo.
 */
import { createWindowState } from "./destination-window";
import { InvariantError } from "./errors";
import { releaseWindowBlockers } from "./job-list";
import type { Entry, Peer, PolicyCounter, Qmgr, Queue, ResolvedRecipient, Timer, Transport } from "./model";
import { pushTimer } from "./timer-heap";
import { windowParamsOf } from "./site-shape";
import { findPeer } from "./peer";

/** The queue name of a recipient on a transport (spec §3.3). */
export function queueName(t: Transport, r: ResolvedRecipient, delimiter: string): string {
  if (t.p.recipientLimit !== 1) return r.nexthop.toLowerCase();
  const at = r.address.lastIndexOf("@");
  let local = at >= 0 ? r.address.slice(0, at) : r.address;
  if (delimiter !== "") {
    let cut = -1;
    for (const d of delimiter) {
      const i = local.indexOf(d);
      if (i > 0 && (cut < 0 || i < cut)) cut = i;
    }
    if (cut > 0) local = local.slice(0, cut);
  }
  return `${local}@${r.nexthop}`.toLowerCase();
}

/** Schedules a timer. */
export function addTimer(q: Qmgr, at: number, kind: Timer["kind"], transport: string, ref: string): void {
  pushTimer(q.timers, { at, seq: q.timerSeq++, kind, transport, ref });
}

/** Recomputes the queue's share of transport.readyTotal. */
export function updateReady(queue: Queue): void {
  const share = queue.window > 0 ? Math.max(0, Math.min(queue.window - queue.busyCount, queue.todoCount)) : 0;
  if (share !== queue.readyShare) {
    queue.transport.readyTotal += share - queue.readyShare;
    queue.readyShare = share;
  }
}

/**
 * The fields every new queue starts with at the same value (newQueue): a snapshot leaves out each
 * field still at it, and restore puts it back (snapshot.ts). Not the window: a new queue's
 * depends on the configuration, which may change between a snapshot and its restore.
 */
export const QUEUE_DEFAULTS = {
  success: 0,
  failure: 0,
  failCohorts: 0,
  todoCount: 0,
  busyCount: 0,
  dsn: null,
  timerAt: 0,
  blockerTag: 0,
  lastDone: 0,
  idleSince: -1,
  egress: null,
  site: null,
} as const satisfies Partial<Queue>;

/** A new queue object (not linked into its transport). Its fields' order is every queue's, a restored one's too. */
export function newQueue(
  t: Transport,
  name: string,
  nexthop: string,
  egress: string | null,
  site: string | null,
): Queue {
  return {
    window: t.p.initialConcurrency,
    success: 0,
    failure: 0,
    failCohorts: 0,
    name,
    nexthop,
    transport: t,
    todoCount: 0,
    busyCount: 0,
    readyShare: 0,
    dsn: null,
    timerAt: 0,
    blockerTag: 0,
    lastDone: 0,
    idleSince: -1,
    idlePrev: null,
    idleNext: null,
    egress,
    site,
  };
}

/** Finds or creates a queue; reuses a remembered idle queue (spec §12.4). */
export function obtainQueue(q: Qmgr, t: Transport, name: string, r: ResolvedRecipient, now: number): Queue {
  const found = t.queues.get(name);
  if (found) {
    if (found.idleSince >= 0) {
      if (now - found.idleSince >= q.cfg.global.destinationIdleMemory && found.window > 0)
        Object.assign(found, createWindowState(windowParamsOf(found)));
      idleUnlink(q, found);
    }
    return found;
  }
  const queue = newQueue(t, name, r.nexthop, r.egress ?? null, r.site ?? null);
  t.queues.set(name, queue);
  q.queueCount += 1;
  return queue;
}

/** Deletes a queue object. */
export function deleteQueue(q: Qmgr, queue: Queue): void {
  if (queue.todoCount !== 0 || queue.busyCount !== 0)
    throw new InvariantError("deleteQueue", `queue ${queue.name} in use`);
  if (queue.idleSince >= 0) idleUnlink(q, queue);
  updateReady(queue);
  if (queue.transport.queues.get(queue.name) === queue) {
    queue.transport.queues.delete(queue.name);
    q.queueCount -= 1;
  }
}

function idleUnlink(q: Qmgr, queue: Queue): void {
  if (queue.idlePrev) queue.idlePrev.idleNext = queue.idleNext;
  else q.idleHead = queue.idleNext;
  if (queue.idleNext) queue.idleNext.idlePrev = queue.idlePrev;
  else q.idleTail = queue.idlePrev;
  queue.idlePrev = queue.idleNext = null;
  queue.idleSince = -1;
}

/** Arms the idle-list timer for the head if none is pending. */
function armIdleTimer(q: Qmgr): void {
  const head = q.idleHead;
  if (!head || q.idleTimerAt !== 0) return;
  q.idleTimerAt = head.idleSince + q.cfg.global.destinationIdleMemory;
  addTimer(q, q.idleTimerAt, "idle", "", "");
}

/** An empty ready queue: forgotten (Postfix) or remembered while idle (spec §12.4). */
export function queueIdle(q: Qmgr, queue: Queue, now: number): void {
  if (q.cfg.global.destinationIdleMemory <= 0) {
    deleteQueue(q, queue);
    return;
  }
  if (queue.idleSince >= 0) idleUnlink(q, queue);
  queue.idleSince = now;
  queue.idlePrev = q.idleTail;
  if (q.idleTail) q.idleTail.idleNext = queue;
  else q.idleHead = queue;
  q.idleTail = queue;
  armIdleTimer(q);
}

/** Forgets idle queues whose memory ran out by `now`; re-arms for the next one. */
export function expireIdle(q: Qmgr, now: number): void {
  q.idleTimerAt = 0;
  const mem = q.cfg.global.destinationIdleMemory;
  for (let head = q.idleHead; head && head.idleSince + mem <= now; head = q.idleHead) deleteQueue(q, head);
  armIdleTimer(q);
}

/** Releases the transport's blockers if this tagged queue has room and work (spec §4.4). */
export function blockerUpdate(queue: Queue): void {
  const t = queue.transport;
  if (queue.blockerTag !== t.blockerTag) return;
  if (queue.window > queue.busyCount && queue.todoCount > 0) releaseWindowBlockers(t);
  if (queue.window > queue.busyCount || queue.window === 0) queue.blockerTag = 0;
}

/** The shared "busy, holding no policy counters" marker. */
export const NO_CHARGES: readonly PolicyCounter[] = Object.freeze([]);

/** True while the entry is handed to a delivery agent. */
export function isBusy(e: Entry): boolean {
  return e.flight !== null;
}

/**
 * Creates a todo entry holding its first recipient, at the tail of its peer's list. (The
 * one-element array literal is sized exactly; an empty array grown by push would reserve 17
 * slots, which at a million entries is most of the scheduler's memory.)
 */
export function createEntry(q: Qmgr, peer: Peer, first: ResolvedRecipient): Entry {
  const queue = peer.queue;
  if (queue.window === 0) throw new InvariantError("createEntry", `dead queue ${queue.name}`);
  const e: Entry = { id: q.nextEntryId++, peer, rcpts: [first], pPrev: peer.todoTail, pNext: null, flight: null };
  if (peer.todoTail) peer.todoTail.pNext = e;
  else peer.todoHead = e;
  peer.todoTail = e;
  queue.todoCount += 1;
  peer.refcount += 1;
  peer.job.readEntries += 1;
  peer.job.message.refcount += 1;
  updateReady(queue);
  return e;
}

/** Takes a todo entry off its peer's todo list. */
export function unlinkTodo(e: Entry): void {
  const peer = e.peer;
  if (e.flight !== null) throw new InvariantError("unlinkTodo", `entry ${e.id} is busy`);
  if (e.pPrev) e.pPrev.pNext = e.pNext;
  else peer.todoHead = e.pNext;
  if (e.pNext) e.pNext.pPrev = e.pPrev;
  else peer.todoTail = e.pPrev;
  e.pPrev = e.pNext = null;
  peer.queue.todoCount -= 1;
}

/** Moves a todo entry to busy (handed to a delivery agent). */
export function selectTodo(q: Qmgr, e: Entry): void {
  unlinkTodo(e);
  const queue = e.peer.queue;
  e.flight = NO_CHARGES;
  queue.busyCount += 1;
  e.conc = queue.busyCount;
  queue.transport.busyCount += 1;
  q.busy.set(e.id, e);
  updateReady(queue);
}

/** The todo entries of a queue, job by job (for a destination's death: rare, O(jobs)). */
export function todoEntriesOf(queue: Queue): Entry[] {
  const out: Entry[] = [];
  if (queue.todoCount === 0) return out;
  for (const job of queue.transport.jobsByMessage.values()) {
    const peer = findPeer(job, queue);
    for (let e = peer ? peer.todoHead : null; e; e = e.pNext) out.push(e);
  }
  return out;
}
