import { describe, expect, it } from "vitest";
import { MxCache } from "../../../worker/delivery/mx-cache";
import type { MxResolution } from "../../../worker/net/core/mx";

const hosts = (domain: string, expiresAtMs: number): MxResolution => ({
  kind: "hosts",
  domain,
  hosts: [],
  implicit: false,
  site: domain,
  expiresAtMs,
});

/** The delivery stage whose look-ups under way its callers share. */
const agent = {};

describe("MxCache", () => {
  it("answers from the cache until the answer's TTL runs out, then asks again", async () => {
    const cache = new MxCache();
    let asked = 0;
    const resolve = async () => {
      asked++;
      return hosts("a.test", 1000 + 300_000);
    };
    expect((await cache.lookup("a.test", agent, resolve, 1000)).domain).toBe("a.test");
    await cache.lookup("a.test", agent, resolve, 1000 + 299_999);
    expect(asked).toBe(1);
    await cache.lookup("a.test", agent, resolve, 1000 + 300_000);
    expect(asked).toBe(2);
    expect(cache.stats()).toMatchObject({ entries: 1, hits: 1, misses: 2 });
    expect(cache.stats().bytes).toBeGreaterThan(0);
  });

  it("shares one query among concurrent look-ups of a domain, and does not keep a look-up that failed", async () => {
    const cache = new MxCache();
    let asked = 0;
    let fail = true;
    const resolve = () => {
      asked++;
      return fail ? Promise.reject(new Error("resolver down")) : Promise.resolve(hosts("b.test", 10_000));
    };
    const [x, y] = [cache.lookup("b.test", agent, resolve, 0), cache.lookup("b.test", agent, resolve, 0)];
    await expect(x).rejects.toThrow("resolver down");
    await expect(y).rejects.toThrow("resolver down");
    expect(asked).toBe(1);
    fail = false;
    await expect(cache.lookup("b.test", agent, resolve, 1)).resolves.toMatchObject({ domain: "b.test" });
    expect(asked).toBe(2);
  });

  it("never hands one owner's query under way to another: each asks, and then both use the answer", async () => {
    const cache = new MxCache();
    let asked = 0;
    let answer: (r: MxResolution) => void = () => undefined;
    const pending = () => {
      asked++;
      return new Promise<MxResolution>((r) => (answer = r));
    };
    const first = cache.lookup("d.test", agent, pending, 0);
    const other = cache.lookup("d.test", {}, () => Promise.resolve(hosts("d.test", 60_000)), 0);
    expect(asked).toBe(1);
    expect(await other).toMatchObject({ domain: "d.test" }); // its own query, not the first's promise
    answer(hosts("d.test", 60_000));
    await first;
    await expect(cache.lookup("d.test", {}, pending, 1)).resolves.toMatchObject({ domain: "d.test" });
    expect(asked).toBe(1);
    expect(cache.stats()).toMatchObject({ misses: 2, hits: 1 });
  });

  it("holds at most its maximum, the oldest going first, and counts the bytes it holds", async () => {
    const cache = new MxCache(2);
    for (const d of ["c1.test", "c2.test", "c3.test"]) await cache.lookup(d, agent, async () => hosts(d, 60_000), 0);
    expect(cache.stats()).toMatchObject({ entries: 2, evictions: 1, misses: 3 });
    let asked = 0;
    await cache.lookup(
      "c1.test",
      agent,
      async () => {
        asked++;
        return hosts("c1.test", 60_000);
      },
      1,
    );
    expect(asked).toBe(1); // c1 was the oldest: gone
    const bytes = cache.stats().bytes;
    expect(bytes).toBeGreaterThan(0);
    cache.clear();
    expect(cache.stats()).toEqual({ entries: 0, bytes: 0, hits: 0, misses: 0, evictions: 0 });
  });
});
