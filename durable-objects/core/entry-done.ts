/*
 * NAME
 *   entry-done - disposing of an entry and finishing its message (after Postfix nqmgr
 *   qmgr_entry.c, qmgr_active.c; spec §6.6, §7.2, §8); the reports are complete.ts
 * DESCRIPTION
 *   entryDone() disposes of an entry (busy or todo): counters, slot hand-back (§7.2), the
 *   rate-delay suspension (§6.6), blocker release, peer and queue clean-up, and finishing the
 *   message when its last entry is gone (§8): read more, or decide expiry / warning /
 *   back-off, or done.
 *
 *   queueRevived() says a destination is alive again (an effect); complete.ts and timers.ts
 *   share it with entryDone's rate-delay suspension and empty-queue handling.
 * INVARIANTS
 *   A message leaves the core exactly once, with exactly one of the effects message-done,
 *   message-deferred or message-expired.
 * ERRORS
 *   None for expected input; InvariantError on corrupt state.
 */
import { refillMessage } from "./assign";
import { reviveWindow } from "./destination-window";
import { bumpCandidates, freeJob, moveLimits, releaseBlockers } from "./job-list";
import type { Entry, Message, Qmgr, Queue } from "./model";
import { releasePolicies } from "./policy";
import { boundWindow, windowParamsOf } from "./site-shape";
import { addTimer, blockerUpdate, queueIdle, unlinkTodo, updateReady } from "./queue";
import { freePeer } from "./peer";
import { decideAfterAttempt } from "./retry-policy";

export function queueRevived(q: Qmgr, queue: Queue): void {
  queue.timerAt = 0;
  queue.dsn = null;
  q.effects.push({ kind: "destination", transport: queue.transport.name, queue: queue.name, event: "revived" });
}

/** Disposes of an entry, busy or todo, and of whatever it leaves empty. */
export function entryDone(q: Qmgr, e: Entry, now: number): void {
  const peer = e.peer;
  const job = peer.job;
  const queue = peer.queue;
  const t = queue.transport;
  const m = job.message;
  const charged = e.flight;
  const wasBusy = charged !== null;
  if (wasBusy) {
    e.flight = null;
    queue.busyCount -= 1;
    t.busyCount -= 1;
    q.busy.delete(e.id);
    queue.lastDone = now;
    if (charged.length > 0 && releasePolicies(charged))
      for (const other of q.transports.values()) releaseBlockers(other);
  } else {
    unlinkTodo(e);
    job.selectedEntries += 1; // disposed of while todo: counts as handed out
    bumpCandidates(t);
  }
  const n = e.rcpts.length;
  job.rcptCount -= n;
  m.rcptCount -= n;
  q.rcptCount -= n;
  returnSlots(job, m);
  if (wasBusy && t.p.destinationRateDelay > 0) suspendQueue(q, queue, now);
  if (queue.window !== -1) blockerUpdate(queue);
  updateReady(queue);
  peer.refcount -= 1;
  if (peer.refcount === 0) freePeer(peer);
  if (queue.todoCount === 0 && queue.busyCount === 0) queueEmpty(q, queue, now);
  m.refcount -= 1;
  if (m.refcount === 0) finishMessage(q, m, now);
}

/** Slot hand-back from entryDone (spec §7.2). */
function returnSlots(job: Entry["peer"]["job"], m: Message): void {
  for (const other of m.jobs) {
    if (other === job || other.rcptCount >= other.rcptLimit) continue;
    if (other.stackLevel < 0 || !m.hasUnread) moveLimits(other);
  }
  if (!m.hasUnread) moveLimits(job);
}

/** Rate delay: after each delivery the destination pauses (window -1) for the delay (§6.6). */
function suspendQueue(q: Qmgr, queue: Queue, now: number): void {
  const t = queue.transport;
  if (queue.window === 0) {
    reviveWindow(queue, queue.busyCount, windowParamsOf(queue));
    boundWindow(queue);
    queueRevived(q, queue);
  }
  queue.window = -1;
  queue.timerAt = now + t.p.destinationRateDelay;
  addTimer(q, queue.timerAt, "queue", t.name, queue.name);
}

/** An empty queue: kept while dead (unless memory is short), else idle or forgotten. */
function queueEmpty(q: Qmgr, queue: Queue, now: number): void {
  if (queue.window === 0 && q.queueCount > 2 * q.cfg.global.messageRecipientLimit) {
    reviveWindow(queue, 0, windowParamsOf(queue));
    boundWindow(queue);
    queueRevived(q, queue);
  }
  if (queue.window > 0) queueIdle(q, queue, now);
}

/** The message's last in-core entry is gone: read more, or leave the active queue (§8). */
export function finishMessage(q: Qmgr, m: Message, now: number): void {
  while (m.hasUnread && m.refcount === 0) refillMessage(q, m, now);
  if (m.refcount > 0) return;
  for (const j of [...m.jobs]) freeJob(j);
  m.jobs = [];
  q.messages.delete(m.id);
  if (!m.deferred || m.removed) {
    q.effects.push({ kind: "message-done", messageId: m.id });
    return;
  }
  const d = decideAfterAttempt(m, now, q.cfg.global, m.refusedOnly === true);
  if (d.kind === "expired") q.effects.push({ kind: "message-expired", messageId: m.id });
  else
    q.effects.push({
      kind: "message-deferred",
      messageId: m.id,
      nextAttemptAt: d.nextAttemptAt,
      warn: d.warn,
      warnTime: d.warnTime,
    });
}
