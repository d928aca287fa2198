import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { newMessageId, shardOf, ShardAffinity } from "../../../worker/model/ids";

describe("ShardAffinity", () => {
  it("keeps a shard for `messages` messages, then picks again", () => {
    const picks: number[] = [];
    let n = 0;
    const a = new ShardAffinity({ messages: 3, ms: 1000 }, (count) => {
      picks.push(count);
      return n++ % count;
    });
    const got = Array.from({ length: 7 }, () => a.next(8, 0));
    expect(got).toEqual([0, 0, 0, 1, 1, 1, 2]);
    expect(picks).toEqual([8, 8, 8]);
  });

  it("gives a request of more messages than are left a shard of its own: a burst of batches spreads", () => {
    let n = 0;
    const a = new ShardAffinity({ messages: 64, ms: 1000 }, () => n++);
    expect([a.next(8, 0, 100), a.next(8, 0, 100), a.next(8, 0, 100)]).toEqual([0, 1, 2]);
    expect([a.next(8, 0, 1), a.next(8, 0, 1)]).toEqual([3, 3]);
    expect(a.next(8, 0, 62)).toBe(3); // 64 in all
    expect(a.next(8, 0, 1)).toBe(4);
  });

  it("picks again once its time is up, and when the shard count shrinks below it", () => {
    let n = 5;
    const a = new ShardAffinity({ messages: 100, ms: 1000 }, () => n++);
    expect(a.next(8, 0)).toBe(5);
    expect(a.next(8, 999)).toBe(5);
    expect(a.next(8, 1000)).toBe(6);
    n = 2;
    expect(a.next(4, 1001)).toBe(2);
  });

  it("always answers a shard in range, and runs no longer than its span", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 256 }),
        fc.array(fc.integer({ min: 0, max: 400 }), { maxLength: 300 }),
        (count, steps) => {
          const a = new ShardAffinity({ messages: 64, ms: 1000 });
          let now = 0;
          let run = 0;
          let last = -1;
          let runStart = 0;
          for (const dt of steps) {
            now += dt;
            const s = a.next(count, now);
            expect(s).toBeGreaterThanOrEqual(0);
            expect(s).toBeLessThan(count);
            expect(shardOf(newMessageId(s))).toBe(s);
            if (s === last && run < 64 && now - runStart < 1000) run++;
            else {
              run = 1;
              runStart = now;
            }
            last = s;
            expect(run).toBeLessThanOrEqual(64);
          }
        },
      ),
    );
  });
});
