import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import fc from "fast-check";
import { Gate } from "../../../worker/lib/gate";

describe("Gate", () => {
  beforeEach(() => { vi.useFakeTimers(); });
  afterEach(() => { vi.useRealTimers(); });

  it("lets `limit` callers in at once and queues the next in arrival order", async () => {
    const g = new Gate({ limit: 2, maxWaitMs: 1000, maxWaiters: 10 });
    const a = await g.enter();
    const b = await g.enter();
    expect(a).not.toBeNull();
    expect(b).not.toBeNull();
    expect(g.held()).toBe(2);
    const order: string[] = [];
    const c = g.enter().then((r) => { order.push("c"); return r; });
    const d = g.enter().then((r) => { order.push("d"); return r; });
    await Promise.resolve();
    expect(g.waiting()).toBe(2);
    expect(order).toEqual([]);
    b!();
    const rc = await c;
    expect(rc).not.toBeNull();
    expect(order).toEqual(["c"]);
    expect(g.held()).toBe(2);
    a!();
    expect(await d).not.toBeNull();
    expect(order).toEqual(["c", "d"]);
    expect(g.waiting()).toBe(0);
  });

  it("serves waiting keys round robin, each key in arrival order", async () => {
    const g = new Gate({ limit: 1, maxWaitMs: 1000, maxWaiters: 20 });
    const first = await g.enter("a");
    const order: string[] = [];
    const wait = (key: string, name: string) => g.enter(key).then((r) => { order.push(name); r!(); });
    // tenant a floods first; b's single request arrives last.
    const all = [wait("a", "a1"), wait("a", "a2"), wait("a", "a3"), wait("b", "b1"), wait("c", "c1"), wait("b", "b2")];
    first!();
    await Promise.all(all);
    expect(order).toEqual(["a1", "b1", "c1", "a2", "b2", "a3"]);
  });

  it("refuses a waiter whose slot does not free within maxWaitMs, and it never holds one", async () => {
    const g = new Gate({ limit: 1, maxWaitMs: 500, maxWaiters: 10 });
    const a = await g.enter();
    const b = g.enter();
    await vi.advanceTimersByTimeAsync(499);
    expect(g.waiting()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(await b).toBeNull();
    expect(g.waiting()).toBe(0);
    a!();
    expect(g.held()).toBe(0);
    expect(await g.enter()).not.toBeNull();
  });

  it("refuses at once when all slots are held and maxWaitMs is 0, or the waiters are at their bound", async () => {
    const none = new Gate({ limit: 1, maxWaitMs: 0, maxWaiters: 10 });
    await none.enter();
    expect(await none.enter()).toBeNull();
    const few = new Gate({ limit: 1, maxWaitMs: 1000, maxWaiters: 1 });
    await few.enter();
    void few.enter();
    expect(await few.enter()).toBeNull();
    expect(few.waiting()).toBe(1);
  });

  it("a second release of the same slot changes nothing", async () => {
    const g = new Gate({ limit: 1, maxWaitMs: 1000, maxWaiters: 10 });
    const a = await g.enter();
    a!();
    a!();
    expect(g.held()).toBe(0);
    const b = await g.enter();
    const c = g.enter();
    a!(); // a stale release must not hand b's slot to c
    await Promise.resolve();
    expect(g.waiting()).toBe(1);
    b!();
    expect(await c).not.toBeNull();
  });

  it("never holds more than limit, and every caller is let in or refused (property)", async () => {
    await fc.assert(fc.asyncProperty(
      fc.integer({ min: 1, max: 4 }),
      fc.integer({ min: 0, max: 300 }),
      fc.array(fc.record({ at: fc.integer({ min: 0, max: 1000 }), hold: fc.integer({ min: 0, max: 400 }) }), { minLength: 1, maxLength: 30 }),
      async (limit, maxWaitMs, calls) => {
        vi.useFakeTimers();
        const g = new Gate({ limit, maxWaitMs, maxWaiters: 8 });
        let peak = 0, inside = 0, settled = 0;
        const sorted = [...calls].sort((x, y) => x.at - y.at);
        let now = 0;
        for (const call of sorted) {
          await vi.advanceTimersByTimeAsync(call.at - now);
          now = call.at;
          void g.enter().then((release) => {
            settled++;
            if (release === null) return;
            inside++;
            peak = Math.max(peak, inside);
            setTimeout(() => { inside--; release(); }, call.hold);
          });
        }
        await vi.advanceTimersByTimeAsync(2000 + 30 * 400);
        expect(peak).toBeLessThanOrEqual(limit);
        expect(settled).toBe(calls.length);
        expect(g.held()).toBe(0);
        expect(g.waiting()).toBe(0);
      },
    ), { numRuns: 200 });
  });
});
