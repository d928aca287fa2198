/**
 * A counting gate with a bounded wait: at most `limit` holders at once, later callers wait for
 * at most `maxWaitMs`, and a caller that would wait longer is refused. Waiters are served round
 * robin across their keys (one tenant's flood does not queue another tenant's request behind
 * all of its own), in arrival order within a key.
 *
 * DESCRIPTION
 *   Postfix bounds its smtpd processes (process_limit); a client beyond them waits in the
 *   listen queue and costs the machine nothing. The accept routes hold such a slot from their
 *   first byte read to their answer (including the in_flow_delay pause), so that a sender at
 *   full speed keeps at most `limit` requests working beside delivery, however many it opens.
 *   Unbounded, an open-loop client at the accept ceiling kept 512 requests working on the
 *   runtime's one thread and delivery fell from 384 to 32 deliveries/s (bench:backlog with 64
 *   submitting loops); waiting is free, working is not.
 *
 *   new Gate({ limit, maxWaitMs, maxWaiters })
 *   enter(key?)  resolves with a release function once a slot is held, or with null when the
 *                caller was refused: `maxWaiters` wait already, or no slot freed within
 *                `maxWaitMs` (0: refused at once when all are held). Each release is idempotent.
 *   held(), waiting()   the slots held and the callers waiting, for tests and reports.
 *
 * INVARIANTS
 *   held() <= limit; a freed slot goes to the longest waiter of the key after the one served
 *   last (keys in the order they began waiting); a waiter refused by its timeout never holds a
 *   slot.
 */

/** Gate options. */
export interface GateOptions {
  /** Slots held at once (>= 1). */
  limit: number;
  /** Longest wait for a slot, ms (0: none). */
  maxWaitMs: number;
  /** Callers that may wait at once. */
  maxWaiters: number;
}

interface Waiter {
  grant: () => void;
  timer: ReturnType<typeof setTimeout> | undefined;
}

export class Gate {
  private holders = 0;
  private count = 0;
  /** Waiters per key; a key's place in the Map is its turn (served keys go to the back). */
  private readonly queues = new Map<string, Waiter[]>();

  constructor(readonly opts: GateOptions) {
    if (!(opts.limit >= 1)) throw new RangeError("Gate limit must be at least 1");
  }

  held(): number {
    return this.holders;
  }

  waiting(): number {
    return this.count;
  }

  enter(key = ""): Promise<(() => void) | null> {
    if (this.holders < this.opts.limit && this.count === 0) {
      this.holders++;
      return Promise.resolve(this.releaser());
    }
    if (this.opts.maxWaitMs <= 0 || this.count >= this.opts.maxWaiters) return Promise.resolve(null);
    return new Promise((resolve) => {
      const w: Waiter = {
        grant: () => { clearTimeout(w.timer); resolve(this.releaser()); },
        timer: undefined,
      };
      w.timer = setTimeout(() => {
        const q = this.queues.get(key);
        const i = q ? q.indexOf(w) : -1;
        if (i < 0) return;
        q!.splice(i, 1);
        if (q!.length === 0) this.queues.delete(key);
        this.count--;
        resolve(null);
      }, this.opts.maxWaitMs);
      const q = this.queues.get(key);
      if (q) q.push(w); else this.queues.set(key, [w]);
      this.count++;
    });
  }

  /** The next waiter in turn, taken out of its queue (its key goes to the back), or undefined. */
  private next(): Waiter | undefined {
    for (const [key, q] of this.queues) {
      const w = q.shift()!;
      this.queues.delete(key);
      if (q.length > 0) this.queues.set(key, q);
      this.count--;
      return w;
    }
    return undefined;
  }

  /** A release for a slot just taken: the slot passes to the next waiter in turn, or is freed. */
  private releaser(): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const next = this.next();
      if (next) next.grant(); // the slot changes hands: holders stays
      else this.holders--;
    };
  }
}
