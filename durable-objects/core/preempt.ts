/*
 * NAME
 *   preempt - job preemption: slots, candidate search, discount and loan (after Postfix
 *   nqmgr qmgr_job_preempt / qmgr_job_candidate, spec §5)
 * DESCRIPTION
 *   tryPreempt() is run on the current job at the start of every selection when the slot cost
 *   is at least 2. A job earns one slot per `cost` selected entries; once its whole slots plus
 *   the loan reach (100 - discount)% of what the best candidate still needs, the candidate is
 *   moved in front of it and becomes current, and the full price is deducted at once.
 *   findCandidate() picks the candidate with the best (time since queued + 1) / total entries
 *   among jobs after the current one that fit in the slots the current job can still
 *   accumulate; it memoises its answer per current job and second, exactly as Postfix does.
 *
 *   With priorities (spec §12.6) a job never preempts a job of higher priority; with one
 *   priority this is exactly Postfix.
 *
 *   A second memo, the relay's own, avoids rescanning the rest of the list each time the
 *   current job changes: after a scan finds nothing, a scan starting at the same job or its
 *   successor, with no more slots and no lower priority, is known to find nothing too — as
 *   long as nothing has since made any job eligible (transport.candEpoch, bumped by linking,
 *   revival, blocker release, pops, preemption, reads, todo disposal and selection past the
 *   current job). Its answers equal the plain scan's; a property test checks exactly that.
 * INVARIANTS
 *   A stack parent is never a candidate; neither is a blocker. Preemption never happens while
 *   the current job's counter is ≤ 0 or when it can never accumulate minSlots × cost.
 * ERRORS
 *   InvariantError if the search returns the current job or a stack parent.
 */
import { invariant } from "./errors";
import {
  bumpCandidates,
  invalidateCandidateCache,
  isBlocker,
  maxEntries,
  popJob,
  schedInsertAfter,
  schedRemove,
} from "./job-list";
import type { Job, Transport } from "./model";

/** Slots `cur` can still accumulate: floor((in-core unselected + counter) / cost) (U1). */
export function maxCandidateSlots(cur: Job, slotCost: number): number {
  return Math.trunc((cur.readEntries - cur.selectedEntries + cur.slotsAvailable) / slotCost);
}

/** Whether accumulated whole slots plus the loan cover (100 - discount)% of `expected` (U2). */
export function preemptAffordable(
  slotsAvailable: number,
  expected: number,
  p: { slotCost: number; slotLoan: number; slotDiscount: number },
): boolean {
  const loanFactor = 100 - p.slotDiscount;
  return Math.trunc(slotsAvailable / p.slotCost) + p.slotLoan >= (expected * loanFactor) / 100.0;
}

/** Extra recipient slots a preempting unread job receives from the pool (§7.4, M1). */
export function extraGrant(extraRcptPool: number, rcptUnused: number): number {
  return Math.trunc((extraRcptPool + rcptUnused + 1) / 2);
}

/**
 * True if the no-candidate memo proves the scan from `cur` would find nothing: since it was
 * taken nothing made a job eligible (epoch), `cur` is at or right after the job it was
 * taken from (so the scan range is a subset), and the slots and priority are no looser.
 */
function knownNoCandidate(t: Transport, cur: Job, maxSlots: number, shortcut: boolean): boolean {
  if (!shortcut || t.noCandEpoch !== t.candEpoch || maxSlots > t.noCandSlots) return false;
  if (cur.message.priority < t.noCandPrio) return false;
  const from = t.noCandFrom;
  return from === null || cur === from || cur.schedPrev === from;
}

/** Finds the best job to preempt `cur` with, memoised per (current job, second). */
export function findCandidate(t: Transport, cur: Job, now: number, shortcut = true): Job | null {
  if (t.candCacheCurrent === cur && (t.candCacheTime === now || t.candCache === null)) return t.candCache;
  // In-core remaining entries plus the counter: selecting from `cur` leaves this unchanged,
  // which is why a cached "none" stays valid across seconds.
  const maxSlots = maxCandidateSlots(cur, t.p.slotCost);
  let best: Job | null = null;
  let bestScore = 0.0;
  if (maxSlots > 0 && !knownNoCandidate(t, cur, maxSlots, shortcut)) {
    const prio = cur.message.priority;
    for (let j = cur.schedNext; j; j = j.schedNext) {
      if (j.stackChildren.length > 0 || isBlocker(j) || j.message.priority < prio) continue;
      const total = maxEntries(j);
      const needed = total - j.selectedEntries;
      const delay = now - j.message.queuedTime + 1;
      if (needed > 0 && needed <= maxSlots) {
        const score = delay / total;
        if (score > bestScore) {
          bestScore = score;
          best = j;
        }
      }
      // Later level-0 jobs are younger, so none can beat this score any more. Stack leaves
      // are out of time order, hence the level test.
      if (delay <= bestScore && j.stackLevel === 0) break;
    }
    if (best === null) {
      t.noCandEpoch = t.candEpoch;
      t.noCandFrom = cur;
      t.noCandSlots = maxSlots;
      t.noCandPrio = cur.message.priority;
    }
  }
  t.candCache = best;
  t.candCacheCurrent = cur;
  t.candCacheTime = now;
  return best;
}

/** Preempts `cur` if a candidate is affordable; returns the job selection starts from. */
export function tryPreempt(t: Transport, cur: Job, now: number, shortcut = true): Job {
  if (cur.slotsAvailable <= 0) return cur;
  if (maxEntries(cur) < t.p.minSlots * t.p.slotCost) return cur;
  const cand = findCandidate(t, cur, now, shortcut);
  if (!cand) return cur;
  invariant(cand !== cur, "tryPreempt", "attempt to preempt itself");
  invariant(cand.stackChildren.length === 0, "tryPreempt", "candidate is a stack parent");
  invariant(cand.stackLevel >= 0, "tryPreempt", "candidate not linked");
  const expected = maxEntries(cand) - cand.selectedEntries;
  // The loan only lets preemption happen earlier; the full price is paid below either way.
  if (!preemptAffordable(cur.slotsAvailable, expected, t.p)) return cur;
  if (cand.stackLevel > 0) popJob(cand);
  bumpCandidates(t);
  schedRemove(t, cand);
  schedInsertAfter(t, cur.schedPrev, cand);
  cand.stackParent = cur;
  cur.stackChildren.push(cand);
  cand.stackLevel = cur.stackLevel + 1;
  t.current = cand;
  invalidateCandidateCache(t);
  // One job may be preempted by several at once, so the slots are spent now; the pop
  // corrects the amount by what the child really used.
  cur.slotsAvailable -= expected * t.p.slotCost;
  cand.slotsUsed = -expected;
  if (cand.message.hasUnread) {
    const extra = extraGrant(t.p.extraRcptPool, t.rcptUnused);
    cand.rcptLimit += extra;
    cand.message.rcptLimit += extra;
    t.rcptUnused -= extra;
  }
  return cand;
}
