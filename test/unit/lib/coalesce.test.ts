/*
 * worker/lib/coalesce.ts: items added while a flush runs go together in the next flush; an item
 * added to an idle coalescer is flushed at once, or after its linger (a number, or a function
 * asked before each flush). Fake timers: the linger is observed, not slept.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Coalescer } from "../../../worker/lib/coalesce";

/** A coalescer whose flushes are recorded and each answer the items doubled, after `callMs`. */
function recording(linger: number | (() => number), callMs = 5) {
  const flushes: number[][] = [];
  const c = new Coalescer<number, number>(async (items) => {
    flushes.push(items);
    await new Promise((r) => setTimeout(r, callMs));
    return items.map((x) => 2 * x);
  }, linger);
  return { c, flushes };
}

describe("Coalescer", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("flushes an item added when idle at once, and items added meanwhile together next", async () => {
    const { c, flushes } = recording(0);
    const first = c.add(1);
    expect(flushes).toEqual([[1]]); // no timer needed: the flush started in add's tick
    const rest = [c.add(2), c.add(3)];
    await vi.advanceTimersByTimeAsync(5);
    expect(await first).toBe(2);
    expect(flushes).toEqual([[1], [2, 3]]);
    await vi.advanceTimersByTimeAsync(5);
    expect(await Promise.all(rest)).toEqual([4, 6]);
  });

  it("waits its fixed linger before a flush and takes what arrived within it", async () => {
    const { c, flushes } = recording(20);
    const a = c.add(1);
    await vi.advanceTimersByTimeAsync(19);
    const b = c.add(2);
    expect(flushes).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(flushes).toEqual([[1, 2]]);
    await vi.advanceTimersByTimeAsync(5);
    expect(await Promise.all([a, b])).toEqual([2, 4]);
  });

  it("asks a linger function before each flush: 0 flushes at once, more waits", async () => {
    let busy = false;
    const asked: boolean[] = [];
    const { c, flushes } = recording(() => {
      asked.push(busy);
      return busy ? 10 : 0;
    });
    const a = c.add(1);
    expect(flushes).toEqual([[1]]); // quiet: at once
    await vi.advanceTimersByTimeAsync(5);
    await a;
    busy = true;
    const b = c.add(2);
    await vi.advanceTimersByTimeAsync(9);
    const d = c.add(3);
    expect(flushes).toEqual([[1]]); // busy: still lingering
    await vi.advanceTimersByTimeAsync(1);
    expect(flushes).toEqual([[1], [2, 3]]);
    await vi.advanceTimersByTimeAsync(5);
    expect(await Promise.all([b, d])).toEqual([4, 6]);
    expect(asked).toEqual([false, true]);
  });

  it("rejects every item of a failed flush, and goes on with the next", async () => {
    const c = new Coalescer<number, number>(async (items) => {
      await new Promise((r) => setTimeout(r, 5));
      if (items.includes(1)) throw new Error("down");
      return items;
    });
    const failed = [c.add(1)];
    const next = [c.add(2), c.add(3)]; // added while [1] is out: the next flush
    const settled = Promise.allSettled([...failed, ...next]);
    await vi.advanceTimersByTimeAsync(10);
    expect((await settled).map((r) => (r.status === "fulfilled" ? r.value : (r.reason as Error).message))).toEqual([
      "down",
      2,
      3,
    ]);
  });
});
