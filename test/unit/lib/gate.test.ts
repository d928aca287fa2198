import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { Gate } from "../../../worker/lib/gate";

const clock = () => {
  let t = 0;
  return {
    now: () => t,
    advance: (ms: number) => {
      t += ms;
    },
  };
};

describe("Gate", () => {
  it("lets `limit` callers in, refuses the next at once, and takes one again after a release", () => {
    const c = clock();
    const g = new Gate({ limit: 2, perKey: 2, maxHoldMs: 1000 }, c.now);
    const a = g.enter("t");
    const b = g.enter("u");
    expect(a).not.toBeNull();
    expect(b).not.toBeNull();
    expect(g.enter("v")).toBeNull();
    a!();
    expect(g.held()).toBe(1);
    expect(g.enter("v")).not.toBeNull();
  });

  it("keeps the last limit - perKey slots from one key, for the others", () => {
    const g = new Gate({ limit: 4, perKey: 3, maxHoldMs: 1000 }, clock().now);
    const flood = [g.enter("flood"), g.enter("flood"), g.enter("flood")];
    expect(flood.every((r) => r !== null)).toBe(true);
    expect(g.enter("flood")).toBeNull();
    expect(g.held("flood")).toBe(3);
    const other = g.enter("other");
    expect(other).not.toBeNull();
    expect(g.enter("third")).toBeNull(); // full
    flood[0]!();
    expect(g.enter("third")).not.toBeNull();
  });

  it("gives each sending key its fair share: a flood keeps ceil(limit / keys sending) while another key sends", () => {
    const c = clock();
    const g = new Gate({ limit: 4, perKey: 3, maxHoldMs: 60_000, activeMs: 5000 }, c.now);
    const flood = [g.enter("flood"), g.enter("flood"), g.enter("flood")];
    expect(flood.every((r) => r !== null)).toBe(true); // alone: perKey
    const first = g.enter("other");
    expect(first).not.toBeNull();
    expect(g.enter("other")).toBeNull(); // the gate is full
    expect(g.sending()).toBe(2);
    flood[0]!();
    expect(g.share("flood")).toBe(2);
    expect(g.enter("flood")).toBeNull(); // over its share now: the freed slot waits for the other
    c.advance(1000); // the other's Retry-After
    const second = g.enter("other");
    expect(second).not.toBeNull();
    expect(g.held("other")).toBe(2);
    first!();
    second!();
    c.advance(5000); // the other has not asked for 5 s: the flood is alone again
    expect(g.sending()).toBe(1);
    expect(g.share("flood")).toBe(3);
    expect(g.enter("flood")).not.toBeNull();
  });

  it("counts a refused key as sending, and a key holding a slot however long ago it asked", () => {
    const c = clock();
    const g = new Gate({ limit: 2, perKey: 2, maxHoldMs: 60_000, activeMs: 1000 }, c.now);
    const a = [g.enter("a"), g.enter("a")];
    expect(a.every((r) => r !== null)).toBe(true);
    expect(g.enter("b")).toBeNull();
    expect(g.sending()).toBe(2);
    expect(g.share("a")).toBe(1);
    c.advance(1000);
    expect(g.sending()).toBe(1); // b forgotten; a still holds
    a[0]!();
    expect(g.enter("a")).not.toBeNull(); // alone again
  });

  it("a second release of the same slot changes nothing", () => {
    const g = new Gate({ limit: 1, perKey: 1, maxHoldMs: 1000 }, clock().now);
    const a = g.enter("t")!;
    a();
    const b = g.enter("t");
    expect(b).not.toBeNull();
    a(); // stale: must not free b's slot
    expect(g.held()).toBe(1);
    expect(g.enter("t")).toBeNull();
  });

  it("takes back a slot held past maxHoldMs (a request the runtime cancelled), oldest first", () => {
    const c = clock();
    const g = new Gate({ limit: 2, perKey: 2, maxHoldMs: 1000 }, c.now);
    const lost = g.enter("t");
    c.advance(600);
    const young = g.enter("t");
    expect(g.enter("t")).toBeNull();
    c.advance(400); // lost is 1000 ms old, young 400
    const next = g.enter("t");
    expect(next).not.toBeNull();
    expect(g.held()).toBe(2);
    lost!(); // its late release frees nothing of the others'
    expect(g.held()).toBe(2);
    young!();
    next!();
    expect(g.held()).toBe(0);
  });

  it("never holds more than limit, nor more than a key's fair share, and counts exactly (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 6 }),
        fc.constantFrom(0, 300, 1500),
        fc.array(
          fc.oneof(
            fc.record({ op: fc.constant("enter" as const), key: fc.constantFrom("a", "b", "c") }),
            fc.record({ op: fc.constant("release" as const), pick: fc.nat() }),
            fc.record({ op: fc.constant("wait" as const), ms: fc.integer({ min: 0, max: 700 }) }),
          ),
          { maxLength: 60 },
        ),
        (limit, activeMs, ops) => {
          const c = clock();
          const perKey = Math.max(1, limit - 1);
          const g = new Gate({ limit, perKey, maxHoldMs: 1000, activeMs }, c.now);
          const live: { key: string; at: number; release: () => void }[] = [];
          const asked = new Map<string, number>();
          for (const o of ops) {
            if (o.op === "wait") {
              c.advance(o.ms);
              continue;
            }
            if (o.op === "release") {
              if (live.length === 0) continue;
              const [h] = live.splice(o.pick % live.length, 1);
              h!.release();
              continue;
            }
            // The model: slots held at most 1000 ms count.
            for (let i = live.length - 1; i >= 0; i--) if (live[i]!.at <= c.now() - 1000) live.splice(i, 1);
            if (activeMs > 0) asked.set(o.key, c.now());
            const sending = new Set([
              ...live.map((h) => h.key),
              ...[...asked].filter(([, at]) => at > c.now() - activeMs).map(([k]) => k),
            ]);
            sending.add(o.key);
            const share = Math.min(perKey, Math.max(1, Math.ceil(limit / sending.size)));
            const r = g.enter(o.key);
            const mine = live.filter((h) => h.key === o.key).length;
            expect(g.share(o.key)).toBe(share); // after enter(): the gate has taken back expired slots, as the model has
            expect(r !== null).toBe(live.length < limit && mine < share);
            if (r) live.push({ key: o.key, at: c.now(), release: r });
            expect(g.held()).toBe(live.length);
            expect(g.held()).toBeLessThanOrEqual(limit);
            expect(g.held(o.key)).toBeLessThanOrEqual(perKey);
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it("queues a caller that finds no room and gives it the next slot that frees, before any newcomer", () => {
    const c = clock();
    const g = new Gate({ limit: 1, perKey: 1, maxHoldMs: 60_000 }, c.now);
    const holder = g.enter("a")!;
    const first = g.wait("b");
    const second = g.wait("c");
    expect(g.waiting()).toBe(2);
    expect([g.rank(first, 5), g.rank(second, 5), g.rank(second, 0)]).toEqual([0, 1, 0]);
    expect(g.next()).toBeNull(); // full: nobody may enter
    expect(g.claim(first)).toBeNull(); // still full
    holder();
    expect(g.next()).toBe(first);
    expect(g.enter("newcomer")).toBeNull(); // a waiter could take the slot: no jumping the queue
    expect(g.claim(second)).toBeNull(); // not its turn
    const b = g.claim(first);
    expect(b).not.toBeNull();
    expect(g.waiting()).toBe(1);
    b!();
    expect(g.claim(second)).not.toBeNull();
    expect(g.waiting()).toBe(0);
  });

  it("passes over a waiter whose key is at its share, and forgets one that stopped claiming", () => {
    const c = clock();
    const g = new Gate({ limit: 4, perKey: 3, maxHoldMs: 60_000, staleMs: 500 }, c.now);
    const flood = [g.enter("flood"), g.enter("flood"), g.enter("flood")];
    const other = g.enter("other")!;
    const more = g.wait("flood"); // at its share: must not take the slot the other frees
    const gone = g.wait("cancelled");
    const late = g.wait("late");
    other();
    expect(g.next()).toBe(gone);
    c.advance(300);
    expect(g.claim(more)).toBeNull(); // `more` keeps polling; `gone` never claims again: its request was cancelled
    c.advance(300);
    const l = g.claim(late); // the stale waiter is skipped, the flood is still at its share
    expect(l).not.toBeNull();
    expect(g.claim(more)).toBeNull();
    flood[0]!();
    l!(); // the flood sends alone again: its share is 3
    expect(g.claim(more)).not.toBeNull();
    expect(g.waiting()).toBe(0);
  });

  it("hands slots to waiters in arrival order and never past limit or a key's share (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.array(
          fc.oneof(
            fc.record({ op: fc.constant("arrive" as const), key: fc.constantFrom("a", "b", "c") }),
            fc.record({ op: fc.constant("release" as const), pick: fc.nat() }),
            fc.record({ op: fc.constant("poll" as const) }),
          ),
          { maxLength: 80 },
        ),
        (limit, ops) => {
          const g = new Gate({ limit, perKey: limit, maxHoldMs: 60_000 }, clock().now);
          const live: (() => void)[] = [];
          const queue: number[] = [];
          const served: number[] = [];
          for (const o of ops) {
            if (o.op === "arrive") {
              const r = g.enter(o.key);
              if (r) live.push(r);
              else queue.push(g.wait(o.key));
            } else if (o.op === "release") {
              if (live.length > 0) live.splice(o.pick % live.length, 1)[0]!();
            } else {
              // Every waiter polls, last first: only the head may get a slot.
              for (const t of [...queue].reverse()) {
                const r = g.claim(t);
                if (!r) continue;
                live.push(r);
                served.push(t);
                queue.splice(queue.indexOf(t), 1);
              }
            }
            expect(g.held()).toBe(live.length);
            expect(g.held()).toBeLessThanOrEqual(limit);
          }
          // One key per share of `limit`: waiters are served in ticket order.
          expect(served).toEqual([...served].sort((x, y) => x - y));
        },
      ),
      { numRuns: 300 },
    );
  });
});
