/**
 * A counting gate: at most `limit` holders at once, at most `perKey` of them under one key; a
 * caller that finds no room joins a queue of waiters and takes the first slot that frees for it,
 * in arrival order.
 *
 * DESCRIPTION
 *   Postfix bounds its smtpd processes (process_limit); the accept routes hold a slot of this
 *   gate from their first byte read to their answer (the in_flow_delay pause included), so a
 *   sender at full speed keeps at most `limit` requests working beside delivery, however many
 *   it opens, and one key (a tenant) never holds the last `limit - perKey` slots.
 *
 *   When several keys are sending, each may hold only its fair share of the slots, ceil(limit /
 *   the keys that asked within `activeMs`, refused or not), at least one and at most perKey; a
 *   key alone keeps perKey. Without it a flood from one tenant held perKey slots (3 of 4) and
 *   took each one back as soon as it freed, so another tenant's second request found the gate
 *   full and waited out a Retry-After for every request, and delivery, fed in trickles, slowed
 *   down with it (docs/flood.md). Postfix caps one client's connections for the same
 *   reason, with a fixed number (smtpd_client_connection_count_limit: 50, half of the default
 *   process_limit).
 *
 *   A caller that finds no room waits (as a client of a busy Postfix waits in its listen queue
 *   and in in_flow_delay) instead of being refused: wait() gives it a ticket, and claim(ticket)
 *   takes a slot only for the first waiter that may enter now (the gate has room and the waiter's
 *   key is under its share), so slots go in arrival order and a new caller never jumps the queue
 *   (enter() refuses while someone who could take the slot waits). The gate holds no timers and
 *   no promises: the caller polls claim() on a timer of its own. A first version parked waiters on promises that only another
 *   request's release resolved; in the full chaos load campaign the runtime cancelled such
 *   requests as hung ("your Worker's code had hung and would never generate a response"), slots
 *   stopped coming back, and from 45 s on nothing more was accepted. A waiter that stops
 *   claiming (its request was cancelled) is forgotten after `staleMs`, so it never blocks the
 *   queue.
 *
 *   new Gate({ limit, perKey, maxHoldMs, activeMs, staleMs }, now)
 *   enter(key)   a release function when a slot is free, `key` holds fewer than its share(key)
 *                and no waiter that could take the slot is queued, else null; either way `key`
 *                counts as sending for `activeMs`. Each release is idempotent.
 *   wait(key)    a ticket in the queue of waiters (key counts as sending while it waits).
 *   claim(t)     a release function when ticket t is the first waiter that may enter now (it
 *                then leaves the queue), else null; each call proves the waiter alive.
 *   leave(t)     takes ticket t out of the queue (timed out, cancelled); idempotent.
 *   next()       the ticket that would get the next claim, or null.
 *   rank(t, cap) how many waiters are ahead of ticket t (counted up to cap): a caller far back
 *                may poll less often.
 *   waiting()    tickets queued.
 *   held(key?)   slots held (by `key`).
 *   share(key)   the slots `key` may hold now (see above).
 *   sending()    the keys counted as sending now: asked within `activeMs`, or holding a slot.
 *
 * INVARIANTS
 *   held() <= limit and held(key) <= perKey; neither enter() nor claim() lets a key past its
 *   share. Memory is O(keys sending + waiters). A slot held longer than `maxHoldMs` is taken back
 *   at the next enter() or claim(): a request the runtime cancels may never run its release, and
 *   without this each such cancellation would shrink the gate for the isolate's life. Time comes
 *   from `now` (ms); nothing else is read.
 */

/** Gate options. */
export interface GateOptions {
  /** Slots held at once (>= 1). */
  limit: number;
  /** Slots one key may hold (1..limit). */
  perKey: number;
  /** A slot held longer than this is presumed lost and freed, ms. */
  maxHoldMs: number;
  /** How long a key counts as sending after it last asked, ms (0: only while it holds a slot). */
  activeMs?: number;
  /** A waiter that has not claimed for this long is forgotten, ms (default 1000). */
  staleMs?: number;
}

export class Gate {
  /** Holders by slot number, oldest first (Map order is insertion order). */
  private readonly holds = new Map<number, { key: string; at: number }>();
  private readonly byKey = new Map<string, number>();
  /** When each key last asked, oldest first (a key is moved to the end when it asks again). */
  private readonly asked = new Map<string, number>();
  private seq = 0;
  /** Waiters by ticket, in arrival order, with when each last claimed. */
  private readonly waiters = new Map<number, { key: string; seen: number }>();
  /** When the waiters were last swept for stale ones. */
  private swept = Number.NEGATIVE_INFINITY;

  constructor(
    readonly opts: GateOptions,
    private readonly now: () => number,
  ) {
    if (!(opts.limit >= 1) || !(opts.perKey >= 1) || opts.perKey > opts.limit)
      throw new RangeError("Gate needs 1 <= perKey <= limit");
  }

  held(key?: string): number {
    return key === undefined ? this.holds.size : (this.byKey.get(key) ?? 0);
  }

  sending(): number {
    this.forget();
    let n = this.asked.size;
    for (const k of this.byKey.keys()) if (!this.asked.has(k)) n++;
    return n;
  }

  share(key: string): number {
    const others = this.sending() - (this.asked.has(key) || this.byKey.has(key) ? 1 : 0);
    return Math.min(this.opts.perKey, Math.max(1, Math.ceil(this.opts.limit / (others + 1))));
  }

  enter(key: string): (() => void) | null {
    this.expire();
    this.ask(key);
    if (!this.mayEnter(key) || this.next() !== null) return null;
    return this.take(key);
  }

  wait(key: string): number {
    this.ask(key);
    const ticket = ++this.seq;
    this.waiters.set(ticket, { key, seen: this.now() });
    return ticket;
  }

  claim(ticket: number): (() => void) | null {
    const w = this.waiters.get(ticket);
    if (!w) return null;
    this.expire();
    this.ask(w.key);
    w.seen = this.now();
    if (this.next() !== ticket) return null;
    this.waiters.delete(ticket);
    return this.take(w.key);
  }

  leave(ticket: number): void {
    this.waiters.delete(ticket);
  }

  next(): number | null {
    this.sweep();
    if (this.holds.size >= this.opts.limit) return null;
    for (const [ticket, w] of this.waiters) if (this.mayEnter(w.key)) return ticket;
    return null;
  }

  rank(ticket: number, cap: number): number {
    let n = 0;
    for (const t of this.waiters.keys()) {
      if (t === ticket || n >= cap) break;
      n++;
    }
    return n;
  }

  waiting(): number {
    return this.waiters.size;
  }

  /** Forgets the waiters that stopped claiming (at most one scan per half staleMs). */
  private sweep(): void {
    const staleMs = this.opts.staleMs ?? 1000;
    const now = this.now();
    if (now - this.swept < staleMs / 2) return;
    this.swept = now;
    for (const [ticket, w] of this.waiters) if (w.seen < now - staleMs) this.waiters.delete(ticket);
  }

  /** Whether `key` may take a slot now (room, and under its share). */
  private mayEnter(key: string): boolean {
    return this.holds.size < this.opts.limit && this.held(key) < this.share(key);
  }

  private take(key: string): () => void {
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
    if (n > 0) this.byKey.set(h.key, n);
    else this.byKey.delete(h.key);
  }

  /** Records that `key` asked now (moved to the end: the map stays oldest first). */
  private ask(key: string): void {
    this.asked.delete(key);
    if ((this.opts.activeMs ?? 0) > 0) this.asked.set(key, this.now());
  }

  /** Forgets the keys that last asked more than activeMs ago (oldest first: stops at the first young one). */
  private forget(): void {
    const oldest = this.now() - (this.opts.activeMs ?? 0);
    for (const [k, at] of this.asked) {
      if (at > oldest) break;
      this.asked.delete(k);
    }
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
