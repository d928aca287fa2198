/*
 * NAME
 *   queue - destination queues, peers and entries of a transport (after Postfix nqmgr
 *   qmgr_queue.c, qmgr_peer.c, qmgr_entry.c)
 * DESCRIPTION
 *   queueName() names the queue a recipient goes to: the nexthop, or with a recipient limit
 *   of 1 the recipient itself (localpart without extension @ nexthop, spec §3.3).
 *   obtainQueue() finds or creates it; an idle queue remembered for destination_idle_memory
 *   (spec §12.4) is reused with its learned window, or reset once that time has passed.
 *   queueIdle() forgets an empty ready queue (Postfix) or keeps it idle (relay).
 *   updateReady() keeps transport.readyTotal = Σ min(window - busy, todo) over ready queues,
 *   the "is there enough work" test of spec §4.1, in O(1) per change.
 *   blockerUpdate() releases the transport's blockers when a tagged queue gains room (§4.4).
 *   createEntry(), selectTodo() and unlinkTodo() maintain the entry lists; obtainPeer() and
 *   freePeer() the peer lists; rotatePeerToTail() is the round-robin step.
 *   addTimer() schedules a timer on the heap.
 * INVARIANTS
 *   An entry is on its peer's and its queue's todo lists iff it is todo. readyShare is the
 *   queue's current term of readyTotal.
 * ERRORS
 *   InvariantError on list corruption or an entry created for a dead queue.
 */
import { createWindowState } from "./destination-window";
import { invariant } from "./errors";
import { releaseBlockers } from "./job-list";
import type { Entry, Job, Peer, Qmgr, Queue, ResolvedRecipient, Timer, Transport } from "./model";
import { pushTimer } from "./timer-heap";

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

/** Finds or creates a queue; reuses a remembered idle queue (spec §12.4). */
export function obtainQueue(q: Qmgr, t: Transport, name: string, r: ResolvedRecipient, now: number): Queue {
  const found = t.queues.get(name);
  if (found) {
    if (found.idleSince >= 0) {
      if (now - found.idleSince >= q.cfg.global.destinationIdleMemory && found.window > 0) {
        Object.assign(found, createWindowState(t.p));
      }
      found.idleSince = -1;
    }
    return found;
  }
  const queue: Queue = {
    ...createWindowState(t.p),
    name,
    nexthop: r.nexthop,
    transport: t,
    todoHead: null,
    todoTail: null,
    todoCount: 0,
    busyCount: 0,
    readyShare: 0,
    dsn: null,
    timerAt: 0,
    blockerTag: 0,
    lastDone: 0,
    idleSince: -1,
    egress: r.egress ?? null,
    site: r.site ?? null,
  };
  t.queues.set(name, queue);
  q.queueCount += 1;
  return queue;
}

/** Deletes a queue object. */
export function deleteQueue(q: Qmgr, queue: Queue): void {
  invariant(queue.todoCount === 0 && queue.busyCount === 0, "deleteQueue", `queue ${queue.name} in use`);
  updateReady(queue);
  if (queue.transport.queues.get(queue.name) === queue) {
    queue.transport.queues.delete(queue.name);
    q.queueCount -= 1;
  }
}

/** An empty ready queue: forgotten (Postfix) or remembered while idle (spec §12.4). */
export function queueIdle(q: Qmgr, queue: Queue, now: number): void {
  const mem = q.cfg.global.destinationIdleMemory;
  if (mem <= 0) {
    deleteQueue(q, queue);
    return;
  }
  queue.idleSince = now;
  addTimer(q, now + mem, "idle", queue.transport.name, queue.name);
}

/** Releases the transport's blockers if this tagged queue has room and work (spec §4.4). */
export function blockerUpdate(queue: Queue): void {
  const t = queue.transport;
  if (queue.blockerTag !== t.blockerTag) return;
  if (queue.window > queue.busyCount && queue.todoCount > 0) releaseBlockers(t);
  if (queue.window > queue.busyCount || queue.window === 0) queue.blockerTag = 0;
}

/** Finds or creates the peer of (job, queue), appended to the job's peer list. */
export function obtainPeer(job: Job, queue: Queue): Peer {
  let peer = job.peerByQueue.get(queue);
  if (peer) return peer;
  peer = { job, queue, todoHead: null, todoTail: null, refcount: 0, prev: job.peerTail, next: null };
  if (job.peerTail) job.peerTail.next = peer;
  else job.peerHead = peer;
  job.peerTail = peer;
  job.peerByQueue.set(queue, peer);
  return peer;
}

/** Removes a peer that has no entries left. */
export function freePeer(peer: Peer): void {
  const job = peer.job;
  if (peer.prev) peer.prev.next = peer.next;
  else job.peerHead = peer.next;
  if (peer.next) peer.next.prev = peer.prev;
  else job.peerTail = peer.prev;
  peer.prev = peer.next = null;
  job.peerByQueue.delete(peer.queue);
}

/** Moves a chosen peer to the back of its job's peer list (round robin). */
export function rotatePeerToTail(peer: Peer): void {
  const job = peer.job;
  if (job.peerTail === peer) return;
  if (peer.prev) peer.prev.next = peer.next;
  else job.peerHead = peer.next;
  peer.next!.prev = peer.prev;
  peer.prev = job.peerTail;
  peer.next = null;
  job.peerTail!.next = peer;
  job.peerTail = peer;
}

/** Creates an empty todo entry at the tail of its peer's and queue's lists. */
export function createEntry(q: Qmgr, peer: Peer): Entry {
  const queue = peer.queue;
  invariant(queue.window !== 0, "createEntry", `dead queue ${queue.name}`);
  const e: Entry = { id: q.nextEntryId++, peer, rcpts: [], busy: false, pPrev: peer.todoTail, pNext: null, qPrev: queue.todoTail, qNext: null, charged: null };
  if (peer.todoTail) peer.todoTail.pNext = e;
  else peer.todoHead = e;
  peer.todoTail = e;
  if (queue.todoTail) queue.todoTail.qNext = e;
  else queue.todoHead = e;
  queue.todoTail = e;
  queue.todoCount += 1;
  peer.refcount += 1;
  peer.job.readEntries += 1;
  peer.job.message.refcount += 1;
  updateReady(queue);
  return e;
}

/** Takes a todo entry off its peer's and queue's todo lists. */
export function unlinkTodo(e: Entry): void {
  const peer = e.peer;
  const queue = peer.queue;
  invariant(!e.busy, "unlinkTodo", `entry ${e.id} is busy`);
  if (e.pPrev) e.pPrev.pNext = e.pNext;
  else peer.todoHead = e.pNext;
  if (e.pNext) e.pNext.pPrev = e.pPrev;
  else peer.todoTail = e.pPrev;
  if (e.qPrev) e.qPrev.qNext = e.qNext;
  else queue.todoHead = e.qNext;
  if (e.qNext) e.qNext.qPrev = e.qPrev;
  else queue.todoTail = e.qPrev;
  e.pPrev = e.pNext = e.qPrev = e.qNext = null;
  queue.todoCount -= 1;
}

/** Moves a todo entry to busy (handed to a delivery agent). */
export function selectTodo(q: Qmgr, e: Entry): void {
  unlinkTodo(e);
  const queue = e.peer.queue;
  e.busy = true;
  queue.busyCount += 1;
  queue.transport.busyCount += 1;
  q.busy.set(e.id, e);
  updateReady(queue);
}
