/*
 * NAME
 *   event-queue - the simulator's future event list
 * DESCRIPTION
 *   A binary min-heap of events ordered by (time, insertion sequence). Simulated time is a
 *   fractional number of seconds; events at the same time come out in the order they were
 *   scheduled, which makes a run deterministic without any tie-breaking randomness.
 *   push() schedules, pop() removes the earliest, peekAt() tells its time, size the count.
 * INVARIANTS
 *   heap[i] precedes heap[2i+1] and heap[2i+2] by (at, seq); seq is unique.
 * ERRORS
 *   push() throws on a non-finite time (a model bug, never an expected outcome).
 */

interface Slot<E> {
  at: number;
  seq: number;
  event: E;
}

/** A scheduled event with its time. */
export interface Timed<E> {
  at: number;
  event: E;
}

/** Future event list: earliest first, FIFO among equal times. */
export class EventQueue<E> {
  private readonly heap: Slot<E>[] = [];
  private seq = 0;

  /** Number of pending events. */
  get size(): number {
    return this.heap.length;
  }

  /** Schedules `event` at time `at` (seconds). */
  push(at: number, event: E): void {
    if (!Number.isFinite(at)) throw new Error(`event scheduled at non-finite time ${at}`);
    const h = this.heap;
    h.push({ at, seq: this.seq++, event });
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  /** Time of the earliest event, or null when empty. */
  peekAt(): number | null {
    return this.heap.length > 0 ? this.heap[0]!.at : null;
  }

  /** Removes and returns the earliest event, or null when empty. */
  pop(): Timed<E> | null {
    const h = this.heap;
    const top = h[0];
    if (!top) return null;
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      siftDown(h);
    }
    return { at: top.at, event: top.event };
  }
}

function before<E>(a: Slot<E>, b: Slot<E>): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

function siftDown<E>(h: Slot<E>[]): void {
  let i = 0;
  for (;;) {
    const l = 2 * i + 1;
    const r = l + 1;
    let m = i;
    if (l < h.length && before(h[l]!, h[m]!)) m = l;
    if (r < h.length && before(h[r]!, h[m]!)) m = r;
    if (m === i) return;
    [h[i], h[m]] = [h[m]!, h[i]!];
    i = m;
  }
}
