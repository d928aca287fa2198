/*
 * NAME
 *   timer-heap - the scheduler's timers as a binary min-heap on (at, seq)
 * DESCRIPTION
 *   Postfix arms event timers (dead-queue revival, rate-delay resume, transport retry); the
 *   relay keeps them as data so one Durable Object alarm at the earliest time serves them all
 *   (spec §11, §12.3). pushTimer() adds one; popDueTimer() removes the earliest timer due at
 *   `now`; peekTimerAt() tells the earliest time. Timers are never cancelled in place: the
 *   code that handles one checks that the object it names still waits for it (lazy deletion).
 * INVARIANTS
 *   heap[i] ≤ heap[2i+1], heap[2i+2] by (at, seq); seq is unique, so order is total and
 *   deterministic.
 * ERRORS
 *   None.
 */
import type { Timer } from "./ports";

function less(a: Timer, b: Timer): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

/** Adds a timer. */
export function pushTimer(heap: Timer[], t: Timer): void {
  heap.push(t);
  let i = heap.length - 1;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (!less(heap[i]!, heap[parent]!)) break;
    [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
    i = parent;
  }
}

/** The earliest timer's time, or null. */
export function peekTimerAt(heap: Timer[]): number | null {
  return heap.length > 0 ? heap[0]!.at : null;
}

/** Removes and returns the earliest timer if it is due at `now`. */
export function popDueTimer(heap: Timer[], now: number): Timer | null {
  const top = heap[0];
  if (!top || top.at > now) return null;
  const last = heap.pop()!;
  if (heap.length > 0) {
    heap[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < heap.length && less(heap[l]!, heap[m]!)) m = l;
      if (r < heap.length && less(heap[r]!, heap[m]!)) m = r;
      if (m === i) break;
      [heap[i], heap[m]] = [heap[m]!, heap[i]!];
      i = m;
    }
  }
  return top;
}
