/**
 * A Transport DO's known minimums of `finished` and `retry_due` (table-mins.ts) against the
 * tables themselves, through random sequences of the writes the object makes: every known value
 * is the table's, and forgetFinished drops what it always did.
 */
import { env, runInDurableObject } from "cloudflare:test";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { forgetAttempt } from "../../durable-objects/transport/delivery-state";
import { flushRetries, nextRetryDue, scheduleRetry } from "../../durable-objects/transport/retries";
import { forgetFinished, nextForgetAt, noteFinished } from "../../durable-objects/transport/sqlite-source";

const TTL = 60;
// Times ahead of the clock: a known minimum that has passed is read again (table-mins.ts), and
// these stay known, so every comparison below is of the knowledge, not of a fresh read.
const FUTURE_SEC = Math.floor(Date.now() / 1000) + 100_000;
const FUTURE_MS = FUTURE_SEC * 1000;

type Op =
  | { kind: "finish"; id: number }
  | { kind: "forget" }
  | { kind: "retry"; id: number; due: number }
  | { kind: "drop"; id: number }
  | { kind: "flush"; now: number };

// Each step moves the clock on by `dt` seconds, as the object's clock does (finished times only grow).
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant("finish" as const), id: fc.nat(6) }),
  fc.record({ kind: fc.constant("forget" as const) }),
  fc.record({ kind: fc.constant("retry" as const), id: fc.nat(6), due: fc.integer({ min: 0, max: 4000 }) }),
  fc.record({ kind: fc.constant("drop" as const), id: fc.nat(6) }),
  fc.record({ kind: fc.constant("flush" as const), now: fc.integer({ min: 0, max: 4000 }) }),
);
const step = fc.record({ op, dt: fc.integer({ min: 0, max: 40 }) });

describe("a Transport DO's known minimums of finished and retry_due (table-mins.ts)", () => {
  it("equal the tables' after every write, and forgetFinished drops the rows it always dropped", async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 40 }), async (steps) => {
        const stub = env.TRANSPORT_QUEUE.getByName(`table-mins-${run++}`);
        await runInDurableObject(stub, (_i, state) => {
          const sql = state.storage.sql;
          const n = (q: string, ...args: unknown[]) => sql.exec<{ m: number | null }>(q, ...args).one().m;
          let [now, since] = [FUTURE_SEC, 0];
          for (const { op: o, dt } of steps) {
            now += dt;
            if (o.kind === "finish") {
              sql.exec(
                "INSERT OR IGNORE INTO rcpt (message_id, idx, address, transport, nexthop) VALUES (?, 0, 'a@x.test', 'smtp', 'x.test')",
                `m${o.id}`,
              );
              noteFinished(sql, `m${o.id}`, now);
            } else if (o.kind === "forget") {
              // What the statements always dropped: the backlog rows of messages finished since the
              // last forget, and the finished records past their TTL.
              const rcptLeft = n(
                "SELECT count(*) AS m FROM rcpt WHERE message_id NOT IN (SELECT core_id FROM finished WHERE at >= ?)",
                since,
              );
              const finishedLeft = n("SELECT count(*) AS m FROM finished WHERE at > ?", now - TTL);
              since = forgetFinished(sql, since, now, TTL);
              expect([n("SELECT count(*) AS m FROM rcpt"), n("SELECT count(*) AS m FROM finished")]).toEqual([
                rcptLeft,
                finishedLeft,
              ]);
            } else if (o.kind === "retry") scheduleRetry(sql, `m${o.id}`, FUTURE_MS + o.due);
            else if (o.kind === "drop") forgetAttempt(sql, `m${o.id}`);
            else flushRetries(sql, FUTURE_MS + o.now);
            const f = n("SELECT min(at) AS m FROM finished");
            expect(nextForgetAt(sql, TTL)).toBe(f === null ? null : f + TTL);
            expect(nextRetryDue(sql)).toBe(n("SELECT min(due) AS m FROM retry_due"));
          }
        });
      }),
      { numRuns: 40 },
    );
  });
});
