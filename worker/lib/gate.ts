/**
 * A counting gate: at most `limit` holders at once, at most `perKey` of them under one key; a
 * caller that finds no room is refused at once.
 *
 * DESCRIPTION
 *   Postfix bounds its smtpd processes (process_limit); the accept routes hold a slot of this
 *   gate from their first byte read to their answer (the in_flow_delay pause included), so a
 *   sender at full speed keeps at most `limit` requests working beside delivery, however many
 *   it opens, and one key (a tenant) never holds the last `limit - perKey` slots.
 *
 *   Nobody waits here for a slot. A first version queued waiters and woke each with another
 *   request's release; in the full chaos load campaign the runtime cancelled such requests as
 *   hung ("your Worker's code had hung and would never generate a response"), slots stopped
 *   coming back, and from 45 s on nothing more was accepted. The refused client waits instead
 *   (429 with Retry-After), as Resend's clients do at its rate limit.
 *
 *   new Gate({ limit, perKey, maxHoldMs }, now)
 *   enter(key)   a release function when a slot is free (and `key` holds fewer than `perKey`),
 *                else null. Each release is idempotent.
 *   held(key?)   slots held (by `key`).
 *
 * INVARIANTS
 *   held() <= limit and held(key) <= perKey. A slot held longer than `maxHoldMs` is taken
 *   back at the next enter(): a request the runtime cancels may never run its release, and
 *   without this each such cancellation would shrink the gate for the isolate's life. Time
 *   comes from `now` (ms); nothing else is read.
 */

/** Gate options. */
export interface GateOptions {
  /** Slots held at once (>= 1). */
  limit: number;
  /** Slots one key may hold (1..limit). */
  perKey: number;
  /** A slot held longer than this is presumed lost and freed, ms. */
  maxHoldMs: number;
}

export class Gate {
  /** Holders by slot number, oldest first (Map order is insertion order). */
  private readonly holds = new Map<number, { key: string; at: number }>();
  private readonly byKey = new Map<string, number>();
  private seq = 0;

  constructor(readonly opts: GateOptions, private readonly now: () => number) {
    if (!(opts.limit >= 1) || !(opts.perKey >= 1) || opts.perKey > opts.limit) throw new RangeError("Gate needs 1 <= perKey <= limit");
  }

  held(key?: string): number {
    return key === undefined ? this.holds.size : this.byKey.get(key) ?? 0;
  }

  enter(key: string): (() => void) | null {
    this.expire();
    if (this.holds.size >= this.opts.limit || this.held(key) >= this.opts.perKey) return null;
    const id = ++this.seq;
    this.holds.set(id, { key, at: this.now() });
    this.byKey.set(key, this.held(key) + 1);
    return () => this.free(id);
  }

  private free(id: number): void {
    const h = this.holds.get(id);
    if (!h) return;
    this.holds.delete(id);
    const n = this.held(h.key) - 1;
    if (n > 0) this.byKey.set(h.key, n); else this.byKey.delete(h.key);
  }

  /** Frees the slots held past maxHoldMs (the oldest come first: stops at the first young one). */
  private expire(): void {
    const oldest = this.now() - this.opts.maxHoldMs;
    for (const [id, h] of this.holds) {
      if (h.at > oldest) break;
      this.free(id);
    }
  }
}
