/**
 * Outside authority over the core (core/control.ts): the Destination DO's verdict and
 * operators taking messages out. Examples for each rule, then fast-check properties over
 * random scenarios that mix both with admissions, dispatches, failures and time.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  admitMessage,
  applyDestinationState,
  dispatchAll,
  drainEffects,
  removeMessage,
  reportDelivery,
  tick,
  type Qmgr,
} from "../../../durable-objects/core";
import { makeQmgr, rcpts, type TestRcpt } from "./harness";
import { Runner, scenarioArb, type Scenario } from "./scenario";

const RUNS = Number(process.env.PROPERTY_RUNS ?? 1000);

function queueOf(q: Qmgr<TestRcpt>, nexthop = "dest.example") {
  return q.transports.get("smtp")!.queues.get(nexthop)!;
}

describe("applyDestinationState (the Destination DO is the authority)", () => {
  it("a dead verdict kills a live queue until the DO's time and defers its todo entries without an attempt", () => {
    const { q, src } = makeQmgr({ default_destination_recipient_limit: 2, initial_destination_concurrency: 2 });
    src.files.set("m1", rcpts(10));
    admitMessage(q, { id: "m1", createTime: 0, rcptTotal: 10 }, 0);
    expect(dispatchAll(q, 0, 100)).toHaveLength(2);
    drainEffects(q);
    expect(
      applyDestinationState(q, "smtp", "dest.example", { window: 0, deadUntil: 500, reason: "4.4.1 refused" }, 10),
    ).toBe(true);
    const queue = queueOf(q);
    expect(queue.window).toBe(0);
    expect(queue.timerAt).toBe(500);
    const effects = drainEffects(q);
    expect(
      effects.filter((e) => e.kind === "deferred").flatMap((e) => (e.kind === "deferred" ? e.rcpts : [])),
    ).toHaveLength(6);
    expect(effects).toContainEqual(expect.objectContaining({ kind: "destination", event: "dead", until: 500 }));
    expect(dispatchAll(q, 20, 100)).toHaveLength(0);
    // The core revives it at the DO's time, not at its own minimal_backoff_time.
    tick(q, 499);
    expect(queueOf(q).window).toBe(0);
    tick(q, 500);
    expect(queueOf(q).window).toBeGreaterThan(0);
  });

  it("a live verdict sets the window and revives a dead queue; the same verdict again changes nothing", () => {
    const { q, src } = makeQmgr({ default_destination_recipient_limit: 2, initial_destination_concurrency: 1 });
    src.files.set("m1", rcpts(20));
    admitMessage(q, { id: "m1", createTime: 0, rcptTotal: 20 }, 0);
    expect(dispatchAll(q, 0, 100)).toHaveLength(1);
    expect(applyDestinationState(q, "smtp", "dest.example", { window: 4, deadUntil: 0 }, 1)).toBe(true);
    expect(applyDestinationState(q, "smtp", "dest.example", { window: 4, deadUntil: 0 }, 1)).toBe(false);
    expect(dispatchAll(q, 1, 100)).toHaveLength(3);
    expect(applyDestinationState(q, "smtp", "dest.example", { window: 0, deadUntil: 100 }, 2)).toBe(true);
    drainEffects(q);
    expect(applyDestinationState(q, "smtp", "dest.example", { window: 3, deadUntil: 0 }, 3)).toBe(true);
    expect(queueOf(q).window).toBe(3);
    expect(drainEffects(q)).toContainEqual(expect.objectContaining({ kind: "destination", event: "revived" }));
  });

  it("a live verdict whose basis is not the queue's window now is stale (the queue applied later reports) and is ignored; a dead one still applies", () => {
    const { q, src } = makeQmgr({ default_destination_recipient_limit: 2, initial_destination_concurrency: 5 });
    src.files.set("m1", rcpts(20));
    admitMessage(q, { id: "m1", createTime: 0, rcptTotal: 20 }, 0);
    expect(applyDestinationState(q, "smtp", "dest.example", { window: 7, deadUntil: 0, basis: 6 }, 1)).toBe(false);
    expect(queueOf(q).window).toBe(5);
    expect(applyDestinationState(q, "smtp", "dest.example", { window: 7, deadUntil: 0, basis: 5 }, 1)).toBe(true);
    expect(queueOf(q).window).toBe(7);
    expect(applyDestinationState(q, "smtp", "dest.example", { window: 0, deadUntil: 100, basis: 3 }, 2)).toBe(true);
    expect(queueOf(q).window).toBe(0);
  });

  it("an unknown queue or a rate-delay pause is left alone", () => {
    const { q } = makeQmgr({});
    expect(applyDestinationState(q, "smtp", "nowhere.example", { window: 0, deadUntil: 100 }, 1)).toBe(false);
  });
});

describe("removeMessage (hold, cancel, requeue)", () => {
  it("disposes of todo entries, lets entries in flight finish, and leaves as done — never deferred", () => {
    const { q, src } = makeQmgr({ default_destination_recipient_limit: 2, initial_destination_concurrency: 2 });
    src.files.set("m1", rcpts(10));
    admitMessage(q, { id: "m1", createTime: 0, rcptTotal: 10 }, 0);
    const busy = dispatchAll(q, 0, 100);
    expect(busy).toHaveLength(2);
    const waiting = removeMessage(q, "m1", 1);
    expect(waiting.map((r) => r.address)).toHaveLength(6);
    expect(dispatchAll(q, 1, 100)).toHaveLength(0);
    expect(drainEffects(q).some((e) => e.kind.startsWith("message-"))).toBe(false);
    reportDelivery(q, busy[0]!.id, { status: "defer" }, 2);
    reportDelivery(q, busy[1]!.id, { status: "ok" }, 2);
    expect(drainEffects(q)).toEqual([{ kind: "message-done", messageId: "m1" }]);
    expect(q.messages.size).toBe(0);
    expect(q.rcptCount).toBe(0);
  });

  it("a message with nothing in flight leaves at once; an unknown one is ignored", () => {
    const { q, src } = makeQmgr({});
    src.files.set("m1", rcpts(3));
    admitMessage(q, { id: "m1", createTime: 0, rcptTotal: 3 }, 0);
    expect(removeMessage(q, "m1", 1)).toHaveLength(3);
    expect(drainEffects(q)).toEqual([{ kind: "message-done", messageId: "m1" }]);
    expect(removeMessage(q, "m1", 1)).toEqual([]);
  });
});

function run(s: Scenario): Runner {
  const r = Runner.fresh(s);
  for (const op of s.ops) {
    const before = r.trace.dispatched.length;
    r.apply(op);
    for (const e of r.trace.dispatched.slice(before))
      expect(e.peer.queue.busyCount).toBeLessThanOrEqual(Math.max(e.peer.queue.window, 0));
    let n = 0;
    for (const t of r.q.transports.values()) for (const j of t.jobsByMessage.values()) n += j.rcptCount;
    expect(n).toBe(r.q.rcptCount);
  }
  return r;
}

describe("control properties (fast-check)", () => {
  it(
    `with verdicts and removals mixed in: windows hold, no recipient is handed out twice, ` +
      `each message leaves once, removed ones as done (${RUNS} scenarios)`,
    () => {
      fc.assert(
        fc.property(scenarioArb({ failures: true, control: true }), (s) => {
          const r = run(s);
          r.drain();
          expect(r.q.messages.size).toBe(0);
          expect(r.q.rcptCount).toBe(0);
          const seen = new Map<number, number>();
          const bump = (n: number) => seen.set(n, (seen.get(n) ?? 0) + 1);
          for (const e of r.trace.dispatched) for (const x of e.rcpts) bump(x.n);
          for (const ef of r.trace.effects)
            if (ef.kind === "deferred") for (const x of ef.rcpts) bump((x as TestRcpt).n);
          for (const waiting of r.removed.values()) for (const x of waiting) bump(x.n);
          for (const [n, c] of seen) expect(c, `recipient ${n}`).toBe(1);
          const removedRcpts = new Set([...r.removed.keys()].flatMap((id) => r.src.files.get(id)!.map((x) => x.n)));
          // Every recipient of a message not removed is accounted for exactly once.
          for (let n = 0; n < r.totalRcpts; n++)
            if (!removedRcpts.has(n)) expect(seen.get(n), `recipient ${n}`).toBe(1);
          const finished = r.trace.effects.filter(
            (e) => e.kind === "message-done" || e.kind === "message-deferred" || e.kind === "message-expired",
          );
          const ids = finished.map((e) => (e as { messageId: string }).messageId);
          expect(new Set(ids).size).toBe(ids.length);
          expect(ids.length).toBe(s.messages.length);
          for (const e of finished)
            if (r.removed.has((e as { messageId: string }).messageId)) expect(e.kind).toBe("message-done");
        }),
        { numRuns: RUNS },
      );
    },
    600_000,
  );
});

describe("pickup policies changed at run time", () => {
  it("clearing a suspension lets a job that was passed over as blocked be selected at once", async () => {
    const { setPolicy, clearPolicy } = await import("../../../durable-objects/core");
    const { q, src } = makeQmgr({ default_destination_recipient_limit: 2 });
    setPolicy(q, "dest:smtp/dest.example", { suspendedUntil: 3600 }, 0);
    src.files.set("m1", rcpts(4));
    admitMessage(q, { id: "m1", createTime: 0, rcptTotal: 4 }, 0);
    expect(dispatchAll(q, 1, 100)).toHaveLength(0);
    clearPolicy(q, "dest:smtp/dest.example");
    expect(dispatchAll(q, 2, 100)).toHaveLength(2);
  });
});
