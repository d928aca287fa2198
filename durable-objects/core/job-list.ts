/*
 * NAME
 *   job-list - per-transport jobs: the two job lists, preemption stacks and recipient slot
 *   pools (after Postfix nqmgr qmgr_job.c)
 * DESCRIPTION
 *   linkJob() puts a new or retired job on the scheduler list and the enqueue-time list (spec
 *   §2.2) and hands it the transport's free recipient slots (§7.2). unlinkJob() takes it off
 *   both lists; retireJob() pops, returns surplus slots and unlinks (a retired job can be
 *   revived by obtainJob()). freeJob() disposes of a job when its message leaves the core.
 *   moveLimits() moves a job's unused slots to the first job that still has unread
 *   recipients. popJob() takes a job off its preemption stack, crediting its original parent
 *   (§5.4). obtainJob() finds or creates the job of (message, transport) and readies it for
 *   new recipients. releaseBlockers() un-marks every blocker of a transport at once (§4.4).
 *
 *   Ordering departs from Postfix only through priority (spec §12.6): a job sorts after every
 *   job of higher priority, then by queued time. With one priority it is exactly Postfix's.
 * INVARIANTS
 *   Linked jobs have stackLevel ≥ 0 and are on both lists; unlinked jobs are on neither.
 *   Insertion scans from the tail, stepping over jobs with a stack parent; if it passes the
 *   current job (or there is none) the new job becomes current.
 * ERRORS
 *   InvariantError on impossible list or stack states.
 */
import { invariant } from "./errors";
import type { Job, Message, Transport } from "./model";

/**
 * Forgets the memoised preemption candidate (Postfix RESET_CANDIDATE_CACHE). Postfix resets
 * only the current-job key; the candidate is cleared too so that it can never point at a job
 * freed since (a snapshot would name a job that no longer exists). Unobservable otherwise: a
 * memo whose key is null is never used.
 */
export function invalidateCandidateCache(t: Transport): void {
  t.candCacheCurrent = null;
  t.candCache = null;
}

/** Some job may have become eligible as a candidate: the no-candidate memo is stale. */
export function bumpCandidates(t: Transport): void {
  t.candEpoch += 1;
}

/** True while the job is marked as blocked by its destinations' windows, or by pickup policies alone. */
export function isBlocker(j: Job): boolean {
  return j.blockerTag === j.transport.blockerTag || j.policyBlockerTag === j.transport.policyBlockerTag;
}

/** Entries read in core but not yet selected remain. */
export function hasEntries(j: Job): boolean {
  return j.selectedEntries < j.readEntries;
}

/** Upper bound of the job's entries: read plus the message's unread recipients. */
export function maxEntries(j: Job): number {
  return j.readEntries + j.message.rcptUnread;
}

/** Releases every blocker job and queue of the transport and restarts at the list head. */
export function releaseBlockers(t: Transport): void {
  t.policyBlockerTag += 2;
  releaseWindowBlockers(t);
}

/**
 * Releases the jobs blocked by windows (a queue gained room), not those held by pickup
 * policies alone: no window makes those selectable, only a policy event (releaseBlockers).
 */
export function releaseWindowBlockers(t: Transport): void {
  bumpCandidates(t);
  t.blockerTag += 2;
  t.current = t.schedHead;
  invalidateCandidateCache(t);
}

/** Does `a` stay in front of a newly linked job `b` (queued time, then priority)? */
function staysAhead(a: Job, b: Job): boolean {
  const pa = a.message.priority;
  const pb = b.message.priority;
  return pa > pb || (pa === pb && a.message.queuedTime <= b.message.queuedTime);
}

/** Links `j` right after `prev` (or at the head) on the scheduler list. */
export function schedInsertAfter(t: Transport, prev: Job | null, j: Job): void {
  const next = prev ? prev.schedNext : t.schedHead;
  j.schedPrev = prev;
  j.schedNext = next;
  if (prev) prev.schedNext = j;
  else t.schedHead = j;
  if (next) next.schedPrev = j;
  else t.schedTail = j;
}

/** Unlinks `j` from the scheduler list. */
export function schedRemove(t: Transport, j: Job): void {
  if (j.schedPrev) j.schedPrev.schedNext = j.schedNext;
  else t.schedHead = j.schedNext;
  if (j.schedNext) j.schedNext.schedPrev = j.schedPrev;
  else t.schedTail = j.schedPrev;
  j.schedPrev = j.schedNext = null;
}

function timeInsertAfter(t: Transport, prev: Job | null, j: Job): void {
  const next = prev ? prev.timeNext : t.timeHead;
  j.timePrev = prev;
  j.timeNext = next;
  if (prev) prev.timeNext = j;
  else t.timeHead = j;
  if (next) next.timePrev = j;
  else t.timeTail = j;
}

function timeRemove(t: Transport, j: Job): void {
  if (j.timePrev) j.timePrev.timeNext = j.timeNext;
  else t.timeHead = j.timeNext;
  if (j.timeNext) j.timeNext.timePrev = j.timePrev;
  else t.timeTail = j.timePrev;
  j.timePrev = j.timeNext = null;
}

/** Links a new or retired job on both lists and gives it the free slots (spec §2.2, §7.2). */
export function linkJob(t: Transport, j: Job): void {
  invariant(j.stackLevel < 0, "linkJob", "already linked");
  bumpCandidates(t);
  let current = t.current;
  let prev = t.schedTail;
  for (; prev; prev = prev.schedPrev) {
    if (prev.stackParent === null && staysAhead(prev, j)) break;
    if (current === prev) current = null;
  }
  let unread = t.nextUnread;
  let tprev = t.timeTail;
  for (; tprev; tprev = tprev.timePrev) {
    if (staysAhead(tprev, j)) break;
    if (unread === tprev) unread = null;
  }
  j.stackLevel = 0;
  schedInsertAfter(t, prev, j);
  timeInsertAfter(t, tprev, j);
  if (current === null) t.current = j;
  if (unread === null) {
    const old = t.nextUnread;
    t.nextUnread = j;
    if (old) moveLimits(old);
  }
  if (t.rcptUnused > 0) {
    j.rcptLimit += t.rcptUnused;
    j.message.rcptLimit += t.rcptUnused;
    t.rcptUnused = 0;
  }
}

/** Moves a job's unused recipient slots to the pool and on to the first unread job (§7.2). */
export function moveLimits(j: Job): void {
  const t = j.transport;
  let next = t.nextUnread;
  if (j === next) {
    // Advance the cache along the time list, whose order never changes: O(1) amortised.
    for (next = next.timeNext; next; next = next.timeNext) if (next.message.hasUnread) break;
    t.nextUnread = next;
  }
  const m = j.message;
  const spare = Math.min(j.rcptLimit - j.rcptCount, m.rcptLimit - m.rcptCount);
  if (spare > 0) {
    j.rcptLimit -= spare;
    m.rcptLimit -= spare;
    t.rcptUnused += spare;
    if (next && t.rcptUnused > 0) {
      next.rcptLimit += t.rcptUnused;
      next.message.rcptLimit += t.rcptUnused;
      t.rcptUnused = 0;
    }
  }
}

/** Hands a job's children to `parent` (or orphans them); their stack levels stay. */
function parentGone(j: Job, parent: Job | null): void {
  for (const c of j.stackChildren) {
    c.stackParent = parent;
    if (parent) parent.stackChildren.push(c);
  }
  j.stackChildren = [];
}

/** Takes a job off its preemption stack, crediting its original parent (spec §5.4). */
export function popJob(j: Job): void {
  invariant(j.stackLevel > 0, "popJob", `not on a stack (level ${j.stackLevel})`);
  const t = j.transport;
  const parent = j.stackParent;
  // Only the original parent is credited: an adoptive one never paid for this child.
  if (parent && j.stackLevel === parent.stackLevel + 1) parent.slotsAvailable -= j.slotsUsed * t.p.slotCost;
  if (parent) {
    const i = parent.stackChildren.indexOf(j);
    invariant(i >= 0, "popJob", "child missing from its parent");
    parent.stackChildren.splice(i, 1);
    j.stackParent = null;
  }
  parentGone(j, parent);
  j.stackLevel = 0;
  invalidateCandidateCache(t);
  bumpCandidates(t);
}

/** Takes a level-0 job off both lists; its children become orphans. */
export function unlinkJob(j: Job): void {
  invariant(j.stackLevel === 0, "unlinkJob", `non-zero stack level ${j.stackLevel}`);
  invariant(j.stackParent === null, "unlinkJob", "parent present");
  const t = j.transport;
  parentGone(j, null);
  if (t.current === j) t.current = j.schedNext;
  if (j === t.candCache || j === t.candCacheCurrent) invalidateCandidateCache(t);
  // "Nothing after noCandFrom qualifies" stays true of its predecessor once it is gone.
  if (j === t.noCandFrom) t.noCandFrom = j.schedPrev;
  schedRemove(t, j);
  timeRemove(t, j);
  j.stackLevel = -1;
}

/** Removes a job from the lists while its entries finish; slot counters are kept. */
export function retireJob(j: Job): void {
  if (j.stackLevel > 0) popJob(j);
  moveLimits(j);
  unlinkJob(j);
}

/** Disposes of a job whose message leaves the core. */
export function freeJob(j: Job): void {
  invariant(j.rcptCount === 0, "freeJob", `non-zero recipient count ${j.rcptCount}`);
  if (j.stackLevel > 0) popJob(j);
  moveLimits(j);
  invariant(j.rcptLimit === 0, "freeJob", `recipient slots leak (${j.rcptLimit})`);
  if (j.stackLevel >= 0) unlinkJob(j);
  j.transport.jobsByMessage.delete(j.message.id);
}

/** A new, unlinked job. */
function createJob(m: Message, t: Transport): Job {
  const j: Job = {
    message: m,
    transport: t,
    peerHead: null,
    peerTail: null,
    peerByQueue: null,
    peerBatch: -1,
    readEntries: 0,
    selectedEntries: 0,
    slotsAvailable: 0,
    slotsUsed: 0,
    stackLevel: -1,
    stackParent: null,
    stackChildren: [],
    blockerTag: 0,
    policyBlockerTag: 0,
    rcptCount: 0,
    rcptLimit: 0,
    schedPrev: null,
    schedNext: null,
    timePrev: null,
    timeNext: null,
  };
  m.jobs.push(j);
  t.jobsByMessage.set(m.id, j);
  return j;
}

/** Finds or creates the job of (message, transport), linked and ready for recipients. */
export function obtainJob(m: Message, t: Transport): Job {
  const j = t.jobsByMessage.get(m.id) ?? createJob(m, t);
  if (j.stackLevel < 0) linkJob(t, j);
  // New recipients may make it a candidate, and no longer a blocker. A non-blocker may now
  // sit behind blockers, so the current pointer must restart from the head.
  invalidateCandidateCache(t);
  bumpCandidates(t);
  if (isBlocker(j)) {
    j.blockerTag = 0;
    j.policyBlockerTag = 0;
    t.current = t.schedHead;
  }
  return j;
}
