/*
 * NAME
 *   timers - timers, transport failure and flush: what takes destinations and transports out
 *   of service and brings them back (after Postfix nqmgr qmgr_queue.c, qmgr_transport.c;
 *   spec §6.4, §6.5, §6.6)
 * DESCRIPTION
 *   runTimers() handles every timer due at `now`: dead-destination revival, rate-delay
 *   resume, transport revival and rate unlock, policy wake-ups and idle-queue expiry.
 *   failTransport() marks a transport's delivery service unusable (§6.5) and defers its todo
 *   entries. flush() revives all dead destinations and transports, as `postqueue -f` does.
 * INVARIANTS
 *   A timer acts only if it is still the one its destination, transport or policy armed
 *   (a later one replaced it otherwise); a revived destination's window is bounded as at
 *   any revival (site-shape.ts boundWindow).
 * ERRORS
 *   None for expected input; InvariantError on corrupt state.
 */
import { reviveWindow } from "./destination-window";
import { releaseBlockers } from "./job-list";
import type { Qmgr, Transport } from "./model";
import { boundWindow, windowParamsOf } from "./site-shape";
import { addTimer, blockerUpdate, expireIdle, queueIdle, updateReady } from "./queue";
import { popDueTimer } from "./timer-heap";
import { deferAllTodo, transportAlive } from "./complete";
import { queueRevived } from "./entry-done";

/** The delivery service of a transport is unusable: suspend it and defer its work (§6.5). */
export function failTransport(q: Qmgr, t: Transport, reason: string, now: number): void {
  q.now = now;
  if (!t.dead) {
    t.dead = true;
    t.deadUntil = now + q.cfg.global.transportRetryTime;
    addTimer(q, t.deadUntil, "transport", t.name, "");
    q.effects.push({ kind: "transport", transport: t.name, event: "dead", until: t.deadUntil });
  }
  for (const queue of [...t.queues.values()]) deferAllTodo(q, queue, reason, now);
}

/** Revives every dead destination and transport (postqueue -f). */
export function flush(q: Qmgr, now: number): void {
  q.now = now;
  for (const t of q.transports.values()) {
    transportAlive(q, t);
    for (const queue of [...t.queues.values()]) {
      if (queue.window !== 0) continue;
      reviveWindow(queue, queue.busyCount, windowParamsOf(queue));
      boundWindow(queue);
      queueRevived(q, queue);
      updateReady(queue);
      if (queue.todoCount === 0 && queue.busyCount === 0) queueIdle(q, queue, now);
    }
    releaseBlockers(t);
  }
}

/** Handles every timer due at `now`. */
export function runTimers(q: Qmgr, now: number): void {
  q.now = now;
  for (let tm = popDueTimer(q.timers, now); tm; tm = popDueTimer(q.timers, now)) {
    const t = q.transports.get(tm.transport);
    if (tm.kind === "idle") {
      if (q.idleTimerAt === tm.at) expireIdle(q, now);
      continue;
    }
    if (tm.kind === "policy") {
      const c = q.policies.get(tm.ref);
      if (c && c.wakeAt === tm.at) c.wakeAt = 0;
      for (const other of q.transports.values()) releaseBlockers(other);
      continue;
    }
    if (!t) continue;
    if (tm.kind === "transport") {
      if (t.dead && t.deadUntil === tm.at) transportAlive(q, t);
      if (t.rateLockedUntil === tm.at) t.rateLockedUntil = 0;
      continue;
    }
    const queue = t.queues.get(tm.ref);
    if (!queue) continue;
    if (queue.timerAt !== tm.at || queue.window > 0) continue;
    if (queue.window === 0) {
      reviveWindow(queue, queue.busyCount, windowParamsOf(queue));
      boundWindow(queue);
      queueRevived(q, queue);
    } else {
      queue.window = 1; // rate delay forces the limit to 1
      queue.timerAt = 0;
      blockerUpdate(queue);
    }
    updateReady(queue);
    if (queue.todoCount === 0 && queue.busyCount === 0) queueIdle(q, queue, now);
  }
}
