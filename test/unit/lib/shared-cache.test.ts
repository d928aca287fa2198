/*
 * worker/lib/shared-cache.ts: values are shared by every owner, a look-up under way only by the
 * callers of the owner that made it; a failed look-up keeps nothing; a value lives until its
 * time; the oldest key goes when full. A fast-check property holds the invariant under any
 * interleaving of owners, keys and settlements.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SharedCache } from "../../../worker/lib/shared-cache";

/** A look-up settled by hand, counting the calls. */
function manual<V>() {
  const calls: { key: string; settle: (v: V) => void; fail: (e: Error) => void }[] = [];
  const load = (key: string) => () =>
    new Promise<V>((settle, fail) => {
      calls.push({ key, settle, fail });
    });
  return { calls, load };
}

describe("SharedCache", () => {
  it("shares a look-up under way with its owner's callers only, and its value with everyone once settled", async () => {
    const cache = new SharedCache<string>();
    const { calls, load } = manual<string>();
    const agentA = {};
    const agentB = {};
    const a1 = cache.lookup("k", agentA, load("k"), 0, () => 1000);
    const a2 = cache.lookup("k", agentA, load("k"), 0, () => 1000);
    const b1 = cache.lookup("k", agentB, load("k"), 0, () => 1000);
    expect(calls).toHaveLength(2); // A's two callers share one; B makes its own
    expect(a1).toBe(a2);
    expect(b1).not.toBe(a1);
    calls[0]!.settle("from A");
    expect(await a1).toBe("from A");
    expect(await cache.lookup("k", {}, load("k"), 1, () => 1000)).toBe("from A"); // a settled value: anyone's
    calls[1]!.settle("from B");
    expect(await b1).toBe("from B");
    expect(cache.fresh("k", 2)).toBe("from B"); // the latest settled
    expect(cache.stats()).toMatchObject({ entries: 1, hits: 2, misses: 2 });
  });

  it("keeps nothing of a look-up that failed, and asks again", async () => {
    const cache = new SharedCache<number>();
    const owner = {};
    await expect(
      cache.lookup(
        "k",
        owner,
        () => Promise.reject(new Error("down")),
        0,
        () => 10,
      ),
    ).rejects.toThrow("down");
    expect(cache.stats().entries).toBe(0);
    expect(
      await cache.lookup(
        "k",
        owner,
        async () => 7,
        1,
        () => 10,
      ),
    ).toBe(7);
  });

  it("uses a value until its time, keeps it stale after, and drops the oldest key when full", async () => {
    const cache = new SharedCache<number>(2, () => 8);
    const owner = {};
    for (const [k, v] of [
      ["a", 1],
      ["b", 2],
    ] as const)
      await cache.lookup(
        k,
        owner,
        async () => v,
        0,
        () => 100,
      );
    expect(cache.fresh("a", 99)).toBe(1);
    expect(cache.fresh("a", 100)).toBeUndefined();
    expect(cache.stats().entries).toBe(2); // kept past its time until pushed out
    cache.set("c", 3, 100);
    expect(cache.fresh("a", 0)).toBeUndefined();
    expect(cache.fresh("b", 0)).toBe(2);
    expect(cache.stats()).toMatchObject({ entries: 2, evictions: 1, bytes: 16 });
    cache.clear();
    expect(cache.stats()).toEqual({ entries: 0, bytes: 0, hits: 0, misses: 0, evictions: 0 });
  });

  it("property: whatever the interleaving, no caller ever awaits a promise another owner's look-up made", async () => {
    const step = fc.record({ owner: fc.nat(3), key: fc.nat(2), settle: fc.boolean(), fail: fc.boolean() });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 40 }), async (steps) => {
        const cache = new SharedCache<string>();
        const owners = [{}, {}, {}, {}];
        /** Each promise a look-up made, with the owner it was made for. */
        const madeFor = new Map<Promise<string>, number>();
        const open: { settle: () => void }[] = [];
        let now = 0;
        for (const s of steps) {
          now += 1;
          let made: Promise<string> | null = null;
          const got = cache.lookup(
            `k${s.key}`,
            owners[s.owner]!,
            () =>
              (made = new Promise<string>((res, rej) =>
                open.push({ settle: () => (s.fail ? rej(new Error("x")) : res(`v${s.owner}`)) }),
              )),
            now,
            () => now + 5,
          );
          got.catch(() => undefined);
          if (made) madeFor.set(made, s.owner);
          const origin = madeFor.get(got);
          if (origin !== undefined) expect(origin).toBe(s.owner);
          if (s.settle && open.length > 0) open.shift()!.settle();
          await Promise.resolve();
        }
        for (const o of open) o.settle();
      }),
      { numRuns: 200 },
    );
  });
});
