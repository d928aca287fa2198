/**
 * The isolate's cache of MX resolutions: one answer per domain kept until its DNS TTL runs out
 * (expiresAtMs, which worker/net/core/mx.ts derives from the records' TTLs within its floor and
 * ceiling), shared by every delivery agent object and consumer invocation of the isolate. A look-up
 * cache that lived one invocation asked DNS 1,354 times for 782 domains on the many-domain bench
 * (issue 41), despite TTLs of 300 s.
 *
 * DESCRIPTION
 *   mxCache                      the isolate's cache (MAX_ENTRIES answers at most).
 *   mxCache.lookup(key, resolve, nowMs)  the cached answer for `key` while it has not expired, else
 *                                `resolve()`'s, cached: concurrent look-ups of one key share one
 *                                query (its promise is cached while it runs).
 *   mxCache.stats()              what the cache costs and saves: entries held, an estimate of their
 *                                bytes, hits, misses (DNS look-ups made), evictions.
 *   mxCache.clear()              empties it (tests).
 *
 * INVARIANTS
 *   An answer is never used after its expiresAtMs. A look-up that rejects is not cached. At most
 *   MAX_ENTRIES entries: when full, the oldest entry goes. Costs nothing billable: memory only
 *   (an isolate's, so each isolate in production asks DNS once per domain and TTL).
 */
import type { MxResolution } from "../net/core/mx";

/** Answers held at most (a few hundred bytes each). */
const MAX_ENTRIES = 10_000;

interface Entry {
  /** Until when it may be used, ms (+Infinity while its look-up runs). */
  expiresAt: number;
  value: Promise<MxResolution>;
  bytes: number;
}

/** What the cache holds and did (see the header). */
export interface MxCacheStats {
  entries: number;
  bytes: number;
  hits: number;
  misses: number;
  evictions: number;
}

export class MxCache {
  private readonly entries = new Map<string, Entry>();
  private counts = { hits: 0, misses: 0, evictions: 0, bytes: 0 };

  constructor(private readonly max = MAX_ENTRIES) {}

  lookup(key: string, resolve: () => Promise<MxResolution>, nowMs: number): Promise<MxResolution> {
    const hit = this.entries.get(key);
    if (hit && hit.expiresAt > nowMs) {
      this.counts.hits++;
      return hit.value;
    }
    if (hit) this.drop(key, hit);
    this.counts.misses++;
    if (this.entries.size >= this.max) {
      const [oldest, e] = this.entries.entries().next().value as [string, Entry];
      this.drop(oldest, e);
      this.counts.evictions++;
    }
    const entry: Entry = { expiresAt: Number.POSITIVE_INFINITY, value: resolve(), bytes: 0 };
    this.entries.set(key, entry);
    entry.value.then(
      (r) => {
        if (this.entries.get(key) !== entry) return;
        entry.expiresAt = r.expiresAtMs;
        entry.bytes = 2 * (key.length + JSON.stringify(r).length);
        this.counts.bytes += entry.bytes;
      },
      () => {
        if (this.entries.get(key) === entry) this.entries.delete(key);
      },
    );
    return entry.value;
  }

  stats(): MxCacheStats {
    return {
      entries: this.entries.size,
      bytes: this.counts.bytes,
      hits: this.counts.hits,
      misses: this.counts.misses,
      evictions: this.counts.evictions,
    };
  }

  clear(): void {
    this.entries.clear();
    this.counts = { hits: 0, misses: 0, evictions: 0, bytes: 0 };
  }

  private drop(key: string, e: Entry): void {
    this.entries.delete(key);
    this.counts.bytes -= e.bytes;
  }
}

/** The isolate's cache. */
export const mxCache = new MxCache();
