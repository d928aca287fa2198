/**
 * A small time-bounded map for per-isolate caches (API key → tenant, API key → role): an entry
 * lives `ttlMs`; when full, the oldest entry goes. The caller passes the time.
 */
export class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; expiresAt: number }>();

  constructor(
    private readonly ttlMs = 30_000,
    private readonly maxEntries = 1000,
  ) {}

  /** The cached value, or undefined when absent or expired. */
  get(key: string, nowMs: number): V | undefined {
    const e = this.entries.get(key);
    if (e && e.expiresAt > nowMs) return e.value;
    if (e) this.entries.delete(key);
    return undefined;
  }

  /** Caches a value, evicting the oldest entry when full. */
  set(key: string, value: V, nowMs: number): void {
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(key, { value, expiresAt: nowMs + this.ttlMs });
  }
}
