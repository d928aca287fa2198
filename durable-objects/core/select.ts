/*
 * NAME
 *   select - entry selection for a transport (after Postfix nqmgr qmgr_job_entry_select,
 *   qmgr_job_peer_select, qmgr_peer_select; spec §4)
 * DESCRIPTION
 *   selectEntry() picks the next delivery request of a transport: preemption first, then
 *   from the current job towards the tail, skipping blockers; within a job, peers in round
 *   robin, oldest entry of the chosen peer. Jobs with in-core entries but no destination
 *   room become blockers (and tag their queues); jobs with nothing left are retired.
 *   pickPeer() may read more recipients of the job's message (refill, §4.3, §7.3).
 *
 *   dispatch() is the relay's agent loop (spec §12.2): while the transport has fewer than
 *   process_limit entries in flight, is alive, not rate-locked, and has enough ready work,
 *   select. With pickup policies (§12.6) a peer is also skipped while any of its policy keys
 *   has no room.
 * INVARIANTS
 *   A selected entry is busy and in q.busy. No queue ever has more busy entries than its
 *   window. No transport has more than process_limit busy entries.
 * ERRORS
 *   InvariantError on a peer chosen without a todo entry.
 */
import { invariant } from "./errors";
import { bumpCandidates, hasEntries, invalidateCandidateCache, isBlocker, retireJob } from "./job-list";
import type { Entry, Job, Peer, Qmgr, Transport } from "./model";
import { chargePolicies, policyBlock, policyKeysOf } from "./policy";
import { tryPreempt } from "./preempt";
import { addTimer, selectTodo } from "./queue";
import { rotatePeerToTail } from "./peer";
import { refillMessage } from "./assign";

/** The policy keys of a peer's entries. */
export function peerPolicyKeys(q: Qmgr, peer: Peer): string[] {
  const queue = peer.queue;
  const m = peer.job.message;
  return policyKeysOf(
    m.tenant,
    queue.transport.name,
    queue.name,
    queue.egress,
    queue.site,
    m.fields,
    q.cfg.global.policyCombinations,
    queue.remoteip ?? null,
  );
}

/** True if the peer's destination has room and its policies allow a selection now. */
function peerHasRoom(q: Qmgr, peer: Peer, now: number): boolean {
  const queue = peer.queue;
  if (!(queue.window > queue.busyCount) || peer.todoHead === null) return false;
  if (q.policies.size === 0) return true;
  return !policyHolds(q, peer, now);
}

/** Whether a pickup policy holds the peer back; a rate or a suspension frees up by itself, so the scheduler is woken then. */
function policyHolds(q: Qmgr, peer: Peer, now: number): boolean {
  const block = policyBlock(q, peerPolicyKeys(q, peer), now);
  if (block === null) return false;
  const c = q.policies.get(block.key);
  if (block.until !== null && c && c.wakeAt !== block.until) {
    c.wakeAt = block.until;
    addTimer(q, block.until, "policy", peer.queue.transport.name, block.key);
  }
  return true;
}

/**
 * Whether every peer of the job with entries is held back by a pickup policy while its window
 * has room (then no window opening can help it). A peer whose window is full makes the job a
 * window blocker without a look at its policies: a job skipped for its window is looked at again
 * after every report that frees a slot, and its policy keys are not built each time.
 */
function heldByPolicies(q: Qmgr, job: Job, now: number): boolean {
  if (q.policies.size === 0) return false;
  let any = false;
  for (let p = job.peerHead; p; p = p.next) {
    if (!p.todoHead) continue;
    if (!(p.queue.window > p.queue.busyCount) || !policyHolds(q, p, now)) return false;
    any = true;
  }
  return any;
}

/** The first peer with room, rotated to the back (round robin). */
function roundRobin(q: Qmgr, job: Job, now: number): Peer | null {
  for (let p = job.peerHead; p; p = p.next) {
    if (peerHasRoom(q, p, now)) {
      rotatePeerToTail(p);
      return p;
    }
  }
  return null;
}

/** Picks a peer of the job, reading more recipients when the refill rules say so. */
function pickPeer(q: Qmgr, t: Transport, job: Job, now: number): Peer | null {
  const m = job.message;
  if (
    m.hasUnread &&
    m.refcount > 0 &&
    (m.rcptLimit - m.rcptCount >= t.p.refillLimit ||
      (m.rcptLimit > m.rcptCount && now - m.refillTime >= t.p.refillDelay))
  ) {
    refillMessage(q, m, now);
  }
  if (hasEntries(job)) {
    const p = roundRobin(q, job, now);
    if (p) return p;
  }
  if (m.hasUnread && m.refcount > 0 && m.rcptLimit > m.rcptCount) {
    refillMessage(q, m, now); // last chance before the job counts as blocked or stalled
    if (hasEntries(job)) return roundRobin(q, job, now);
  }
  return null;
}

/** Selects the next entry of a transport, or null (spec §4.2). */
export function selectEntry(q: Qmgr, t: Transport, now: number): Entry | null {
  let job = t.current;
  if (!job) return null;
  if (t.p.slotCost >= 2) job = tryPreempt(t, job, now, q.candidateShortcut);
  const start = job;
  while (job) {
    const after: Job | null = job.schedNext;
    if (isBlocker(job)) {
      job = after;
      continue;
    }
    const peer = pickPeer(q, t, job, now);
    if (peer) {
      const e = peer.todoHead;
      invariant(e !== null, "selectEntry", "peer without todo entry");
      selectTodo(q, e);
      if (q.policies.size > 0) e.flight = chargePolicies(q, peerPolicyKeys(q, peer), now) ?? e.flight;
      job.selectedEntries += 1;
      job.slotsAvailable += 1;
      job.slotsUsed += 1;
      if (job !== t.candCacheCurrent) invalidateCandidateCache(t);
      if (job !== start) bumpCandidates(t);
      t.current = job;
      if (!hasEntries(job) && !job.message.hasUnread) retireJob(job);
      return e;
    }
    if (hasEntries(job) && heldByPolicies(q, job, now)) {
      job.policyBlockerTag = t.policyBlockerTag;
    } else if (hasEntries(job)) {
      job.blockerTag = t.blockerTag;
      for (let p = job.peerHead; p; p = p.next) if (p.todoHead) p.queue.blockerTag = t.blockerTag;
    } else {
      retireJob(job); // stalled: nothing in core and nothing readable
    }
    job = after;
  }
  t.current = null;
  return null;
}

/** True if the transport may start another delivery now (spec §4.1, §12.2). */
export function transportReady(t: Transport, now: number): boolean {
  return (
    !t.dead &&
    now >= t.rateLockedUntil &&
    t.pending < 2 &&
    t.busyCount + t.pending < t.p.processLimit &&
    // Postfix's "is there enough work": Σ min(window - busy, todo) ≥ pending + 1, kept as a sum.
    t.readyTotal >= t.pending + 1
  );
}

/**
 * Chooses the next transport in round robin (spec §4.1, §2.3): the first ready one is rotated
 * to the back. Transports in `skip` are passed over.
 */
export function selectTransport(q: Qmgr, now: number, skip?: ReadonlySet<Transport>): Transport | null {
  const order = q.transportOrder;
  for (let i = 0; i < order.length; i++) {
    const t = order[i]!;
    if (skip?.has(t) || !transportReady(t, now)) continue;
    order.splice(i, 1);
    order.push(t);
    return t;
  }
  return null;
}

/** Selects up to `max` entries for delivery on one transport (the relay's agent loop). */
export function dispatch(q: Qmgr, t: Transport, now: number, max = Infinity): Entry[] {
  q.now = now;
  const out: Entry[] = [];
  while (out.length < max && transportReady(t, now)) {
    const e = selectEntry(q, t, now);
    if (!e) break;
    out.push(e);
    if (t.p.transportRateDelay > 0) {
      t.rateLockedUntil = now + t.p.transportRateDelay;
      addTimer(q, t.rateLockedUntil, "transport", t.name, "");
    }
  }
  return out;
}
