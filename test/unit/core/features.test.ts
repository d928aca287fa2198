import { describe, expect, it } from "vitest";
import {
  admitMessage,
  clearPolicy,
  dispatchAll,
  drainEffects,
  explainMessage,
  failTransport,
  flush,
  formatRate,
  isBlocker,
  nextWakeupAt,
  obtainTransport,
  parseRate,
  reportDelivery,
  setPolicy,
  tick,
} from "../../../durable-objects/core";
import { makeQmgr, rcpts, type TestRcpt } from "./harness";

const site = { dsnStatus: "4.4.1", reason: "connection refused" };

describe("pickup policies (spec §12.6)", () => {
  it("reads and prints rates identically", () => {
    for (const spec of ["100/h", "10/30s", "5/m", "1/d", "7/2h"]) expect(formatRate(parseRate(spec)!)).toBe(spec);
    expect(parseRate("100/x")).toBeNull();
    expect(parseRate("0/h")).toBeNull();
  });

  it("caps a tenant's entries in flight and releases the cap as deliveries finish", () => {
    const { q, src } = makeQmgr({ default_destination_recipient_limit: 1 });
    for (let i = 0; i < 3; i++) src.files.set(`a${i}`, rcpts(4, `d${i}.example`));
    src.files.set("b0", rcpts(4, "other.example"));
    for (let i = 0; i < 3; i++) admitMessage(q, { id: `a${i}`, createTime: 0, rcptTotal: 4, tenant: "acme" }, 0);
    admitMessage(q, { id: "b0", createTime: 0, rcptTotal: 4, tenant: "beta" }, 0);
    setPolicy(q, "tenant:acme", { concurrency: 2 }, 0);
    const first = dispatchAll(q, 0);
    const acme = first.filter((e) => e.peer.job.message.tenant === "acme");
    expect(acme).toHaveLength(2);
    expect(first.filter((e) => e.peer.job.message.tenant === "beta").length).toBeGreaterThan(0);
    const waiting = explainMessage(q, "a2", 0);
    expect(waiting.every((w) => w.blockedBy.kind === "policy")).toBe(true);
    expect(waiting[0]!.blockedBy).toMatchObject({ kind: "policy", key: "tenant:acme", reason: "concurrency" });
    reportDelivery(q, acme[0]!.id, { status: "ok" }, 1);
    const next = dispatchAll(q, 1);
    expect(next.filter((e) => e.peer.job.message.tenant === "acme")).toHaveLength(1);
  });

  it("limits a site's rate with a token bucket and wakes the scheduler when a token is due", () => {
    const { q, src } = makeQmgr({
      default_destination_recipient_limit: 1,
      default_destination_concurrency_limit: 0,
      initial_destination_concurrency: 100,
    });
    src.files.set(
      "m",
      Array.from(
        { length: 10 },
        (_, i) =>
          ({ n: i, address: `u${i}@g.example`, transport: "smtp", nexthop: "g.example", site: "gmail" }) as TestRcpt,
      ),
    );
    admitMessage(q, { id: "m", createTime: 0, rcptTotal: 10 }, 0);
    setPolicy(q, "site:gmail", { rate: parseRate("2/10s")! }, 0);
    const t0 = dispatchAll(q, 0);
    expect(t0).toHaveLength(2);
    for (const e of t0) reportDelivery(q, e.id, { status: "ok" }, 0);
    expect(dispatchAll(q, 0)).toHaveLength(0);
    expect(nextWakeupAt(q)).toBe(5); // one token per 5 s
    tick(q, 5);
    expect(dispatchAll(q, 5)).toHaveLength(1);
  });

  it("holds a suspended egress until the suspension expires", () => {
    const { q, src } = makeQmgr({});
    src.files.set(
      "m",
      Array.from(
        { length: 3 },
        (_, i) =>
          ({
            n: i,
            address: `u${i}@x.example`,
            transport: "smtp",
            nexthop: "x.example",
            egress: "proxy-1",
          }) as TestRcpt,
      ),
    );
    admitMessage(q, { id: "m", createTime: 0, rcptTotal: 3 }, 0);
    setPolicy(q, "egress:proxy-1", { suspendedUntil: 3600 }, 0);
    expect(dispatchAll(q, 0)).toHaveLength(0);
    expect(explainMessage(q, "m", 0)[0]!.blockedBy).toEqual({
      kind: "policy",
      key: "egress:proxy-1",
      reason: "suspended",
      until: 3600,
    });
    expect(nextWakeupAt(q)).toBe(3600);
    tick(q, 3600);
    expect(dispatchAll(q, 3600)).toHaveLength(1);
  });

  it("considers priority-1 jobs before priority-0 jobs that were queued earlier", () => {
    const { q, src } = makeQmgr({ transports: { smtp: { process_limit: 1 } } });
    src.files.set("bulk", rcpts(3, "a.example"));
    src.files.set("urgent", rcpts(1, "b.example"));
    admitMessage(q, { id: "bulk", createTime: 0, rcptTotal: 3, singleRcpt: true }, 0);
    admitMessage(q, { id: "urgent", createTime: 5, rcptTotal: 1, priority: 1 }, 5);
    const [e] = dispatchAll(q, 5);
    expect(e!.peer.job.message.id).toBe("urgent");
  });
});

describe("relay departures from Postfix (spec §12)", () => {
  it("remembers a destination's learned window while idle for destination_idle_memory, then forgets it", () => {
    const { q, src } = makeQmgr({ destination_idle_memory: 600 });
    const t = obtainTransport(q, "smtp");
    src.files.set("m1", rcpts(1, "w.example"));
    admitMessage(q, { id: "m1", createTime: 0, rcptTotal: 1 }, 0);
    const [e] = dispatchAll(q, 0);
    reportDelivery(q, e!.id, { status: "ok" }, 1); // window 5 → 6
    expect(t.queues.get("w.example")!.window).toBe(6);
    src.files.set("m2", rcpts(1, "w.example", "smtp", 1));
    admitMessage(q, { id: "m2", createTime: 100, rcptTotal: 1 }, 100);
    expect(t.queues.get("w.example")!.window).toBe(6); // reused within 600 s
    const [e2] = dispatchAll(q, 100);
    reportDelivery(q, e2!.id, { status: "ok" }, 100);
    tick(q, 800);
    expect(t.queues.has("w.example")).toBe(false); // forgotten 600 s after its last use
  });

  it("with destination_idle_memory 0 forgets an empty queue at once, as Postfix does", () => {
    const { q, src } = makeQmgr({ destination_idle_memory: 0 });
    src.files.set("m1", rcpts(1, "w.example"));
    admitMessage(q, { id: "m1", createTime: 0, rcptTotal: 1 }, 0);
    const [e] = dispatchAll(q, 0);
    reportDelivery(q, e!.id, { status: "ok" }, 1);
    expect(obtainTransport(q, "smtp").queues.has("w.example")).toBe(false);
  });

  it("rate-delays a destination: after each delivery it is suspended, then resumes with window 1", () => {
    const { q, src } = makeQmgr({ transports: { smtp: { destination_rate_delay: "10s" } } });
    src.files.set("m", rcpts(3, "slow.example"));
    admitMessage(q, { id: "m", createTime: 0, rcptTotal: 3, singleRcpt: true }, 0);
    const [e] = dispatchAll(q, 0);
    expect(dispatchAll(q, 0)).toHaveLength(0); // limit forced to 1
    reportDelivery(q, e!.id, { status: "ok" }, 2);
    const queue = obtainTransport(q, "smtp").queues.get("slow.example")!;
    expect(queue.window).toBe(-1);
    expect(explainMessage(q, "m", 2)[0]!.blockedBy).toEqual({ kind: "rate_delay", until: 12 });
    tick(q, 12);
    expect(queue.window).toBe(1);
    expect(dispatchAll(q, 12)).toHaveLength(1);
  });

  it("a dead destination's recipients are deferred with the reason; the timer revives it; flush revives at once", () => {
    const { q, src } = makeQmgr({});
    src.files.set("m", rcpts(3, "dead.example"));
    admitMessage(q, { id: "m", createTime: 0, rcptTotal: 3, singleRcpt: true }, 0);
    const sent = dispatchAll(q, 0);
    for (const e of sent) reportDelivery(q, e.id, { status: "defer", siteFailure: site }, 1);
    const effects = drainEffects(q);
    expect(effects).toContainEqual({
      kind: "destination",
      transport: "smtp",
      queue: "dead.example",
      event: "dead",
      until: 301,
      reason: "connection refused",
    });
    expect(effects.find((e) => e.kind === "message-deferred")).toMatchObject({ messageId: "m", nextAttemptAt: 301 });
    // New mail for the dead destination is deferred without an attempt.
    src.files.set("m2", rcpts(1, "dead.example", "smtp", 9));
    admitMessage(q, { id: "m2", createTime: 2, rcptTotal: 1 }, 2);
    expect(drainEffects(q).filter((e) => e.kind === "deferred")).toHaveLength(1);
    tick(q, 301);
    expect(drainEffects(q)).toContainEqual({
      kind: "destination",
      transport: "smtp",
      queue: "dead.example",
      event: "revived",
    });
    src.files.set("m3", rcpts(1, "dead.example", "smtp", 20));
    admitMessage(q, { id: "m3", createTime: 302, rcptTotal: 1 }, 302);
    expect(dispatchAll(q, 302)).toHaveLength(1);
  });

  it("a failed delivery service suspends its transport and defers its work for transport_retry_time", () => {
    const { q, src } = makeQmgr({});
    src.files.set("m", rcpts(4, "a.example"));
    admitMessage(q, { id: "m", createTime: 0, rcptTotal: 4, singleRcpt: true }, 0);
    const t = obtainTransport(q, "smtp");
    failTransport(q, t, "delivery queue unavailable", 10);
    expect(t.dead).toBe(true);
    expect(drainEffects(q).filter((e) => e.kind === "deferred").length).toBeGreaterThan(0);
    expect(dispatchAll(q, 10)).toHaveLength(0);
    tick(q, 70);
    expect(t.dead).toBe(false);
    failTransport(q, t, "again", 80);
    flush(q, 81);
    expect(t.dead).toBe(false);
  });
});

describe("operator suspensions through policy keys", () => {
  it("suspends one destination for an hour while others keep flowing, then resumes it on time", () => {
    const { q, src } = makeQmgr({});
    src.files.set("m", [...rcpts(2, "held.example"), ...rcpts(2, "open.example", "smtp", 2)]);
    admitMessage(q, { id: "m", createTime: 0, rcptTotal: 4, singleRcpt: true }, 0);
    setPolicy(q, "dest:smtp/held.example", { suspendedUntil: 3600 }, 0);
    expect(dispatchAll(q, 0).map((e) => e.peer.queue.name)).toEqual(["open.example", "open.example"]);
    expect(nextWakeupAt(q)).toBe(3600);
    tick(q, 3600);
    expect(dispatchAll(q, 3600).map((e) => e.peer.queue.name)).toEqual(["held.example", "held.example"]);
  });

  it("keeps a suspended backlog marked as blocked when another destination's window opens, and releases it with the policy", () => {
    const { q, src } = makeQmgr({});
    for (let i = 0; i < 20; i++) {
      src.files.set(`h${i}`, rcpts(1, "held.example"));
      admitMessage(q, { id: `h${i}`, createTime: 0, rcptTotal: 1 }, 0);
    }
    for (let i = 0; i < 8; i++) {
      src.files.set(`o${i}`, rcpts(1, "open.example"));
      admitMessage(q, { id: `o${i}`, createTime: 0, rcptTotal: 1 }, 0);
    }
    setPolicy(q, "dest:smtp/held.example", { suspendedUntil: 3600 }, 0);
    const first = dispatchAll(q, 0);
    expect(first.map((e) => e.peer.queue.name)).toEqual(Array(5).fill("open.example")); // the initial window
    const held = [...q.transports.get("smtp")!.jobsByMessage.values()].filter((j) => j.message.id.startsWith("h"));
    expect(held.every(isBlocker)).toBe(true);
    // The open destination's window gains room: its blockers are released, the suspended jobs are
    // not (no window lets them go), so the next selection does not walk them again.
    reportDelivery(q, first[0]!.id, { status: "ok" }, 1);
    expect(held.every(isBlocker)).toBe(true);
    expect(dispatchAll(q, 1).map((e) => e.peer.queue.name)).toEqual(["open.example", "open.example"]);
    // A policy event releases them.
    clearPolicy(q, "dest:smtp/held.example");
    expect(held.some(isBlocker)).toBe(false);
    expect(dispatchAll(q, 2).filter((e) => e.peer.queue.name === "held.example").length).toBeGreaterThan(0);
  });

  it("caps a whole transport's concurrency", () => {
    const { q, src } = makeQmgr({ default_destination_recipient_limit: 1 });
    src.files.set("m", [...rcpts(3, "a.example"), ...rcpts(3, "b.example", "smtp", 3)]);
    admitMessage(q, { id: "m", createTime: 0, rcptTotal: 6 }, 0);
    setPolicy(q, "transport:smtp", { concurrency: 2 }, 0);
    expect(dispatchAll(q, 0)).toHaveLength(2);
  });
});
