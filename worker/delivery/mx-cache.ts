/**
 * The isolate's cache of MX resolutions: one answer per domain kept until its DNS TTL runs out
 * (expiresAtMs, which worker/net/core/mx.ts derives from the records' TTLs within its floor and
 * ceiling), shared by every delivery agent object and consumer invocation of the isolate. A look-up
 * cache that lived one invocation asked DNS 1,354 times for 782 domains on the many-domain bench
 * (issue 41), despite TTLs of 300 s.
 *
 * DESCRIPTION
 *   mxCache                      the isolate's cache (MAX_ENTRIES answers at most).
 *   mxCache.lookup(key, owner, resolve, nowMs)  the cached answer for `key` while it has not
 *                                expired, else `resolve()`'s, cached: concurrent look-ups of one
 *                                key by one owner (a delivery stage) share one query; another
 *                                owner's look-up under way is not shared (lib/shared-cache.ts).
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
import { SharedCache, type SharedCacheStats } from "../lib/shared-cache";

/** Answers held at most (a few hundred bytes each). */
const MAX_ENTRIES = 10_000;

/** What the cache holds and did (see the header). */
export type MxCacheStats = SharedCacheStats;

export class MxCache {
  private readonly cache: SharedCache<MxResolution>;

  constructor(max = MAX_ENTRIES) {
    this.cache = new SharedCache(max, (key, r) => 2 * (key.length + JSON.stringify(r).length));
  }

  lookup(key: string, owner: object, resolve: () => Promise<MxResolution>, nowMs: number): Promise<MxResolution> {
    return this.cache.lookup(key, owner, resolve, nowMs, (r) => r.expiresAtMs);
  }

  stats(): MxCacheStats {
    return this.cache.stats();
  }

  clear(): void {
    this.cache.clear();
  }
}

/** The isolate's cache. */
export const mxCache = new MxCache();
