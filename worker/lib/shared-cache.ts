/**
 * An isolate's cache shared by every object and request it runs, which shares values and never a
 * promise: look-ups under way are shared only by the callers of one owner (a delivery agent's
 * stage, a consumer invocation, a request).
 *
 * DESCRIPTION
 *   new SharedCache<V>(max, sizeOf?)   at most `max` keys; when full, the oldest goes. sizeOf
 *                             estimates an entry's bytes, for stats().
 *   cache.fresh(key, nowMs)   the value while it is fresh, else undefined.
 *   cache.lookup(key, owner, load, nowMs, untilOf)
 *       the fresh value; else the look-up of `key` that `owner` has under way; else a new one,
 *       load(), which only this owner's callers await. When it resolves, its value is kept for
 *       everyone until untilOf(value) (ms); a look-up that rejects keeps nothing.
 *   cache.set(key, value, untilMs)   keeps a value found another way (a background refresh).
 *   cache.stats()             entries, bytes (by sizeOf), hits (a fresh value or a look-up joined),
 *                             misses (look-ups made), evictions.
 *   cache.clear()             forgets every value and count (tests).
 *
 * INVARIANTS
 *   A promise made for one owner is never handed to another. In workerd, an object or request
 *   that awaits a promise another one's I/O settles runs its continuation in the other's I/O
 *   context: its own socket then fails with "Cannot perform I/O on behalf of a different Durable
 *   Object", and it waits forever ("Promise will never complete") when that context ends first.
 *   (docs/delivery.md tells what that did to the delivery agents.) A value is plain data and is
 *   shared freely. Owners are held weakly: a finished request's look-ups go with it.
 */

interface Kept<V> {
  value: V;
  until: number;
  bytes: number;
}

/** What a cache holds and did (see the header). */
export interface SharedCacheStats {
  entries: number;
  bytes: number;
  hits: number;
  misses: number;
  evictions: number;
}

/** See the header. */
export class SharedCache<V> {
  private readonly values = new Map<string, Kept<V>>();
  private readonly flights = new WeakMap<object, Map<string, Promise<V>>>();
  private counts = { hits: 0, misses: 0, evictions: 0, bytes: 0 };

  constructor(
    private readonly max = 10_000,
    private readonly sizeOf: (key: string, value: V) => number = () => 0,
  ) {}

  fresh(key: string, nowMs: number): V | undefined {
    const k = this.values.get(key);
    return k !== undefined && k.until > nowMs ? k.value : undefined;
  }

  lookup(key: string, owner: object, load: () => Promise<V>, nowMs: number, untilOf: (v: V) => number): Promise<V> {
    const k = this.values.get(key);
    if (k !== undefined && k.until > nowMs) {
      this.counts.hits++;
      return Promise.resolve(k.value);
    }
    let mine = this.flights.get(owner);
    const running = mine?.get(key);
    if (running) {
      this.counts.hits++;
      return running;
    }
    this.counts.misses++;
    if (!mine) this.flights.set(owner, (mine = new Map()));
    const flights = mine;
    const p = load();
    flights.set(key, p);
    p.then(
      (v) => {
        if (flights.get(key) === p) flights.delete(key);
        this.set(key, v, untilOf(v));
      },
      () => {
        if (flights.get(key) === p) flights.delete(key);
      },
    );
    return p;
  }

  set(key: string, value: V, untilMs: number): void {
    this.delete(key);
    if (this.values.size >= this.max) {
      this.delete(this.values.keys().next().value as string);
      this.counts.evictions++;
    }
    const bytes = this.sizeOf(key, value);
    this.counts.bytes += bytes;
    this.values.set(key, { value, until: untilMs, bytes });
  }

  private delete(key: string): void {
    const k = this.values.get(key);
    if (k === undefined) return;
    this.values.delete(key);
    this.counts.bytes -= k.bytes;
  }

  stats(): SharedCacheStats {
    return { entries: this.values.size, ...this.counts };
  }

  /** Forgets every value and count (tests). */
  clear(): void {
    this.values.clear();
    this.counts = { hits: 0, misses: 0, evictions: 0, bytes: 0 };
  }
}
