/**
 * A snapshot leaves out a queue's fields at their defaults (core/snapshot.ts, QUEUE_DEFAULTS in
 * core/queue.ts), and restore puts them back: an idle destination the core remembers costs its
 * name, window and times. properties.test.ts checks that restored cores select as the originals
 * do; these check the defaults themselves and the size.
 */
import { describe, expect, it } from "vitest";
import {
  admitMessage,
  dispatchAll,
  drainEffects,
  reportDelivery,
  restoreQmgr,
  snapshotQmgr,
  mustParseSchedulerConfig,
  obtainTransport,
} from "../../../durable-objects/core";
import { QUEUE_DEFAULTS, newQueue } from "../../../durable-objects/core/queue";
import { makeQmgr, rcpts } from "./harness";

const DOMAINS = 50;

/** A core that delivered one message to each of DOMAINS domains: every queue idle, remembered. */
function idleCore() {
  const { q, src } = makeQmgr({ default_process_limit: 100 });
  for (let i = 0; i < DOMAINS; i++) {
    src.files.set(`m${i}`, rcpts(1, `d${i}.mix.test`));
    admitMessage(q, { id: `m${i}`, createTime: 0, rcptTotal: 1 }, 0);
  }
  for (const e of dispatchAll(q, 0)) reportDelivery(q, e.id, { status: "ok" }, 1);
  drainEffects(q);
  return { q, src };
}

describe("snapshot of queues", () => {
  it("QUEUE_DEFAULTS are what every new queue starts with", () => {
    const { q } = makeQmgr({});
    const t = obtainTransport(q, "smtp");
    const fresh = newQueue(t, "x.example", "x.example", null, null) as unknown as Record<string, unknown>;
    for (const [k, v] of Object.entries(QUEUE_DEFAULTS)) expect([k, fresh[k]]).toEqual([k, v]);
  });

  it("an idle queue keeps its name, window and times only, and restores to the same queue", () => {
    const { q, src } = idleCore();
    expect(q.queueCount).toBe(DOMAINS);
    const snap = snapshotQmgr(q);
    const queues = snap.transports[0]!.queues;
    expect(queues).toHaveLength(DOMAINS);
    for (const qs of queues) expect(Object.keys(qs).sort()).toEqual(["idleSince", "lastDone", "name", "window"]);
    // About 90 characters an idle queue with its place in the idle list (240 with every field).
    expect(JSON.stringify(snap).length / DOMAINS).toBeLessThan(110);

    const r = restoreQmgr(
      JSON.parse(JSON.stringify(snap)),
      mustParseSchedulerConfig({ default_process_limit: 100 }),
      src,
    );
    const links = new Set(["transport", "idlePrev", "idleNext"]);
    const plain = (x: object) => Object.fromEntries(Object.entries(x).filter(([k]) => !links.has(k)));
    for (const [name, queue] of q.transports.get("smtp")!.queues) {
      const back = r.transports.get("smtp")!.queues.get(name)!;
      expect(plain(back)).toEqual(plain(queue));
      expect(Object.keys(back)).toEqual(Object.keys(queue)); // the same fields in the same order
    }
    expect(JSON.stringify(snapshotQmgr(r))).toBe(JSON.stringify(snap));
  });

  it("a busy queue keeps its counts and egress; a nexthop equal to its name comes back from the name", () => {
    const { q, src } = makeQmgr({ default_process_limit: 100 });
    src.files.set("m0", [
      { n: 0, address: "u@a.example", transport: "smtp", nexthop: "[10.0.0.1]:2525", egress: "e1" },
    ]);
    admitMessage(q, { id: "m0", createTime: 0, rcptTotal: 1 }, 0);
    const snap = snapshotQmgr(q);
    const qs = snap.transports[0]!.queues[0]!;
    expect(qs).toMatchObject({ name: "[10.0.0.1]:2525", egress: "e1", todoCount: 1 });
    expect(qs).not.toHaveProperty("nexthop");
    expect(qs).not.toHaveProperty("idleSince"); // -1: not idle
    const r = restoreQmgr(
      JSON.parse(JSON.stringify(snap)),
      mustParseSchedulerConfig({ default_process_limit: 100 }),
      src,
    );
    expect(r.transports.get("smtp")!.queues.get(qs.name)).toMatchObject({
      nexthop: "[10.0.0.1]:2525",
      egress: "e1",
      todoCount: 1,
      idleSince: -1,
    });
  });
});
