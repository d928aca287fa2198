// Issue 11 (no work grows with the backlog): recipients held by a pickup policy (a suspended
// destination) are looked at once, not again on every Destination verdict or report of a live
// destination, and a live destination's jobs waiting for its window do not build policy keys
// each time a slot frees. Measured as reads of the policy table (every policy key built and
// checked is one) while live mail flows beside a suspended backlog of 100 or 1,000 messages.
import { describe, expect, it } from "vitest";
import {
  admitMessage,
  applyDestinationState,
  dispatchAll,
  reportDelivery,
  setPolicy,
  type PolicyCounter,
} from "../../../durable-objects/core";
import { makeQmgr, type TestRcpt } from "./harness";

/** Policy reads while 60 live messages are delivered beside `stuck` suspended ones. */
function policyReadsBeside(stuck: number): { reads: number; delivered: number } {
  const { q, src } = makeQmgr({ initial_destination_concurrency: 5 });
  let reads = 0;
  q.policies = new (class extends Map<string, PolicyCounter> {
    override get(k: string) {
      reads++;
      return super.get(k);
    }
  })(q.policies);
  setPolicy(q, "dest:smtp/stuck.test", { suspendedUntil: 1_000_000 }, 0);
  for (let i = 0; i < stuck; i++) {
    src.files.set(`s${i}`, [
      { n: i, address: `u${i}@stuck.test`, transport: "smtp", nexthop: "stuck.test" } as TestRcpt,
    ]);
    admitMessage(q, { id: `s${i}`, createTime: 0, rcptTotal: 1 }, 0);
  }
  expect(dispatchAll(q, 0)).toEqual([]); // the suspended jobs are looked at once, here
  for (let i = 0; i < 60; i++) {
    src.files.set(`ok${i}`, [{ n: i, address: `v${i}@ok.test`, transport: "smtp", nexthop: "ok.test" } as TestRcpt]);
    admitMessage(q, { id: `ok${i}`, createTime: 1, rcptTotal: 1 }, 1);
  }
  reads = 0;
  let delivered = 0;
  for (let now = 2; now < 200 && delivered < 60; now++) {
    const entries = dispatchAll(q, now);
    for (const e of entries) {
      reportDelivery(q, e.id, { status: "ok" }, now);
      delivered++;
    }
    applyDestinationState(q, "smtp", "ok.test", { window: 5 + (now % 3), deadUntil: 0 }, now);
  }
  return { reads, delivered };
}

describe("a suspended backlog beside live mail", () => {
  it("costs the same policy reads whether 100 or 1,000 messages wait suspended", () => {
    const small = policyReadsBeside(100);
    const large = policyReadsBeside(1000);
    expect(small.delivered).toBe(60);
    expect(large.delivered).toBe(60);
    expect(large.reads).toBe(small.reads);
    // A few reads per delivered recipient (its keys when selected and charged), not per waiting one.
    expect(large.reads).toBeLessThan(60 * 20);
  });
});
