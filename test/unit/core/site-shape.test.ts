// A provider rule's shape in the scheduler (core/site-shape.ts, issue 13 item 2): the queue
// joins the provider's site, its window stays within the rule's limit whatever feedback comes,
// the provider's key gets the cap and rate unless someone else set it, and without a shape the
// core is Postfix's.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { admitMessage, dispatchAll, reportDelivery, setPolicy, tick } from "../../../durable-objects/core";
import { makeQmgr, rcpts } from "./harness";

const SHAPE = { name: "google", initial: 2, limit: 3, rate: "100/m" };
const REFUSED = {
  dsnStatus: "4.7.0",
  reason: "host mx.test[192.0.2.1] refused to talk to me: 421 4.7.0 Too many connections",
};

function setup(n: number, nexthops = ["a.test"]) {
  const { q, src } = makeQmgr({
    default_destination_recipient_limit: 2,
    initial_destination_concurrency: 5,
    default_destination_concurrency_limit: 20,
  });
  for (let i = 0; i < n; i++) {
    src.files.set(`m${i}`, rcpts(1, nexthops[i % nexthops.length]!, "smtp", i));
    admitMessage(q, { id: `m${i}`, createTime: 0, rcptTotal: 1 }, 0);
  }
  return q;
}

describe("a reported shape", () => {
  it("puts the queue in the provider's site, bounds its window, and caps the provider's sessions across its domains", () => {
    const q = setup(40, ["a.test", "b.test"]);
    const first = dispatchAll(q, 0);
    expect(first).toHaveLength(10); // 5 per domain: Postfix's initial window
    reportDelivery(q, first[0]!.id, { status: "ok", site: SHAPE }, 1);
    const a = q.transports.get("smtp")!.queues.get("a.test")!;
    expect(a).toMatchObject({ site: "google", shape: { initial: 2, limit: 3 } });
    expect(a.window).toBeLessThanOrEqual(3);
    expect(q.policies.get("site:google")!.rule).toEqual({
      concurrency: 3,
      rate: { count: 100, perSec: 60 },
      provider: "google",
    });
    for (const e of first.slice(1)) reportDelivery(q, e.id, { status: "ok", site: SHAPE }, 2);
    // Both domains are now in the site: at most 3 sessions to the provider as a whole.
    tick(q, 3);
    expect(dispatchAll(q, 3).length).toBeLessThanOrEqual(3);
  });

  it("leaves an operator's rule on the key alone, and follows a changed provider rule", () => {
    const q = setup(4);
    setPolicy(q, "site:google", { concurrency: 50 }, 0);
    const [e, f] = dispatchAll(q, 0);
    reportDelivery(q, e!.id, { status: "ok", site: SHAPE }, 1);
    expect(q.policies.get("site:google")!.rule).toEqual({ concurrency: 50 });
    const q2 = setup(4);
    const [g, h] = dispatchAll(q2, 0);
    reportDelivery(q2, g!.id, { status: "ok", site: SHAPE }, 1);
    reportDelivery(q2, h!.id, { status: "ok", site: { ...SHAPE, limit: 4, rate: "50/m" } }, 2);
    expect(q2.policies.get("site:google")!.rule).toMatchObject({
      concurrency: 4,
      rate: { count: 50, perSec: 60 },
      provider: "google",
    });
    void f;
  });

  it("property: whatever feedback follows, a shaped queue's window stays within the rule's limit, and dead detection still works", () => {
    const step = fc.constantFrom("ok", "refused", "failed");
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.array(step, { minLength: 1, maxLength: 60 }), (limit, steps) => {
        const q = setup(80);
        const shape = { name: "p", limit };
        let t = 0;
        let shaped = false;
        for (const s of steps) {
          t += 1;
          tick(q, t);
          const [e] = dispatchAll(q, t);
          if (!e) continue;
          const report =
            s === "ok"
              ? { status: "ok" as const }
              : s === "refused"
                ? { status: "defer" as const, siteFailure: REFUSED }
                : {
                    status: "defer" as const,
                    siteFailure: { dsnStatus: "4.4.1", reason: "connect to a.test[192.0.2.1]:25: Connection refused" },
                  };
          reportDelivery(q, e.id, { ...report, site: shape }, t);
          shaped = true;
          const queue = q.transports.get("smtp")!.queues.get("a.test");
          if (queue && shaped) expect(queue.window).toBeLessThanOrEqual(limit);
        }
      }),
      { numRuns: 200 },
    );
  });

  it("a shaped destination whose sessions all fail still dies, and comes back within its limit", () => {
    const q = setup(20);
    const sent = dispatchAll(q, 0);
    const down = { dsnStatus: "4.4.1", reason: "connect to a.test[192.0.2.1]:25: Connection refused" };
    for (const e of sent)
      reportDelivery(q, e.id, { status: "defer", siteFailure: down, site: { name: "p", limit: 2 } }, 1);
    const queue = q.transports.get("smtp")!.queues.get("a.test");
    expect(queue?.window ?? 0).toBe(0);
    tick(q, 10_000);
    // The deferred mail comes back as the shell re-admits it at its retry time.
    for (let i = 0; i < 5; i++) admitMessage(q, { id: `m${i}`, createTime: 0, rcptTotal: 1 }, 10_000);
    const again = dispatchAll(q, 10_000);
    expect(again.length).toBeGreaterThan(0);
    expect(again.length).toBeLessThanOrEqual(2);
  });

  it("without a shape nothing changes: no site, no policy", () => {
    const q = setup(4);
    const [e] = dispatchAll(q, 0);
    reportDelivery(q, e!.id, { status: "ok" }, 1);
    expect(q.transports.get("smtp")!.queues.get("a.test")!.site).toBeNull();
    expect(q.policies.size).toBe(0);
  });
});
