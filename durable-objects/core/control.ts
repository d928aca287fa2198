/*
 * NAME
 *   control - outside authority over the in-core queue: the Destination DO's verdict, and
 *   operators taking a message out (postsuper -h / -d / -r)
 * DESCRIPTION
 *   applyDestinationState() makes a destination queue's window and dead state equal to what
 *   its Destination Durable Object answered for the same reports. The Destination DO is the
 *   authority (it also outlives this Transport DO's idle memory); the core's own feedback
 *   normally agrees, so this changes nothing, and when it does not (a restore, reports seen
 *   in a different order) the DO wins: a live answer revives or resizes the queue, a dead one
 *   kills it until the DO's revival time, deferring its todo entries as Postfix does.
 *   A queue under a rate-delay pause (window -1) is left to its timer.
 *
 *   removeMessage() takes a message out of the active queue: its todo entries are disposed
 *   of without delivery, nothing more is read from its backlog, and entries in flight finish
 *   normally; the message then leaves as `message-done` (never deferred or expired), because
 *   the shell that removed it decides what happens to its recipients. It returns the
 *   recipients that were still waiting (todo), for the shell's records.
 * INVARIANTS
 *   Every counter entryDone() keeps stays exact; a removed message never produces a retry.
 * ERRORS
 *   None; unknown transports, queues and messages are ignored (false / empty).
 */
import { queueDied } from "./complete";
import { entryDone, finishMessage, queueRevived } from "./entry-done";
import { releaseWindowBlockers } from "./job-list";
import type { Entry, Qmgr } from "./model";
import type { ResolvedRecipient } from "./ports";
import { addTimer, blockerUpdate, updateReady } from "./queue";

/** A Destination DO's answer: its window, and when it comes back if dead (0 = alive). */
export interface DestinationVerdict {
  window: number;
  deadUntil: number;
  reason?: string | null;
  /**
   * The queue's own window when it made the last report the verdict answers. When the queue's
   * window is no longer that, it has applied later reports than the Destination DO saw (the
   * verdict comes a stage behind, in batches per delivery agent), and a live verdict's window
   * would undo them: it is ignored. A dead verdict always applies.
   */
  basis?: number;
}

/** Aligns a destination queue with its Destination DO's verdict; true if anything changed. */
export function applyDestinationState(
  q: Qmgr,
  transport: string,
  queueName: string,
  v: DestinationVerdict,
  now: number,
): boolean {
  q.now = now;
  const t = q.transports.get(transport);
  const queue = t?.queues.get(queueName);
  if (!t || !queue || queue.window < 0) return false;
  if (v.deadUntil > now) {
    if (queue.window === 0) {
      if (queue.timerAt === v.deadUntil) return false;
      queue.timerAt = v.deadUntil;
      addTimer(q, v.deadUntil, "queue", t.name, queue.name);
      return true;
    }
    queue.window = 0;
    queueDied(q, queue, v.reason ?? queue.dsn ?? "destination is dead", now, v.deadUntil);
  } else {
    // A provider rule's limit bounds the window a shared Destination DO hands out (site-shape.ts).
    const limit = queue.shape?.limit;
    const window = limit !== undefined ? Math.min(v.window, limit) : v.window;
    if (window <= 0 || queue.window === window) return false;
    if (v.basis !== undefined && queue.window !== v.basis) return false;
    if (queue.window === 0) queueRevived(q, queue);
    queue.window = window;
    blockerUpdate(queue);
  }
  updateReady(queue);
  // A window is no policy event: jobs held by pickup policies alone stay marked (else every
  // verdict would have the next selection look at each of them again, work that grows with a
  // suspended destination's backlog).
  releaseWindowBlockers(t);
  return true;
}

/** Takes a message out of the active queue; returns its recipients that were still waiting. */
export function removeMessage<R extends ResolvedRecipient>(q: Qmgr<R>, messageId: string, now: number): R[] {
  q.now = now;
  const m = q.messages.get(messageId);
  if (!m) return [];
  m.removed = true;
  m.hasUnread = false;
  const todo: Entry<R>[] = [];
  for (const j of m.jobs) {
    for (let p = j.peerHead; p; p = p.next) for (let e = p.todoHead; e; e = e.pNext) todo.push(e as Entry<R>);
  }
  for (const e of todo) entryDone(q, e, now);
  // Nothing read in core (waiting for recipient slots): it leaves at once.
  if (q.messages.get(messageId) === m && m.refcount === 0) finishMessage(q, m, now);
  return todo.flatMap((e) => e.rcpts);
}
