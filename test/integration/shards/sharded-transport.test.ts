/**
 * A transport on three Transport DOs (TRANSPORT_SHARDS "3" in this project; worker/model/delivery.ts
 * schedulerName): each destination is scheduled by one shard, admitted there, delivered by its
 * agents, reported back to it (no entry waits for its lease), and the operator's views and calls
 * see the transport whole.
 */
import { env, runInDurableObject } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { schedulerName, schedulerNames } from "../../../worker/model/delivery";
import { callWithKey, email, newKey, newOperatorKey } from "../helpers";
import { recipientsWhen } from "../delivery/observe";
import { admissionsOf } from "../../../durable-objects/transport/admissions";

const sink = inject("sink");
const scripted = inject("scripted");
const SHARDS = 3;
let key: string;
let operator: string;
/**
 * Four destinations of the transport `split`: spellings of three sinks that accept mail (the ports
 * are drawn at each run), the first four in this order that fall on at least two shards. Four
 * spellings of one sink alone fall on one shard in one run of 27.
 */
const nexthops = (() => {
  const all = [sink.smtpPort, scripted.ports.cached!, scripted.ports.slow!].flatMap((p) => [
    `[127.0.0.1]:${p}`,
    `127.0.0.1:${p}`,
    `[localhost]:${p}`,
    `localhost:${p}`,
  ]);
  const shardOf = (n: string) => schedulerName("split", n, SHARDS);
  const other = all.find((n) => shardOf(n) !== shardOf(all[0]!));
  return [all[0]!, ...(other ? [other] : []), ...all.slice(1).filter((n) => n !== other)].slice(0, 4);
})();

beforeAll(async () => {
  key = await newKey("acme");
  operator = await newOperatorKey("ops");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('split', ?)").bind(nexthops[0]),
    ...nexthops.map((n, i) =>
      env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport, nexthop) VALUES (NULL, ?, 'split', ?)").bind(
        `d${i}.split.test`,
        n,
      ),
    ),
  ]);
});

/** Admission records of a shard: rows, and those kept with its snapshot (admissions.ts). */
const admitted = (name: string) =>
  runInDurableObject(
    env.TRANSPORT_QUEUE.getByName(name),
    (_o, state) =>
      state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM admission").one().n +
      admissionsOf(state.storage.sql).size,
  );

describe("a transport on several Transport DOs", () => {
  it("schedules each destination on its own shard and delivers every recipient at the first attempt", async () => {
    const shards = new Set(nexthops.map((n) => schedulerName("split", n, SHARDS)));
    expect(shards.size, "the four destinations fall on more than one shard").toBeGreaterThan(1);
    const res = await callWithKey(
      key,
      "POST",
      "/emails",
      email({ to: nexthops.map((_, i) => `r@d${i}.split.test`), subject: "sharded" }),
    );
    expect(res.status).toBe(200);
    const { id } = await res.json<{ id: string }>();
    const rs = await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered", 15_000);
    // Reported to the shard that handed each entry over: no lease ran out, no second attempt.
    expect(rs.map((r) => r.attempts)).toEqual([1, 1, 1, 1]);
    for (const name of shards) expect(await admitted(name), name).toBeGreaterThan(0);
    for (const name of schedulerNames("split", SHARDS).filter((n) => !shards.has(n)))
      expect(await admitted(name), name).toBe(0);
  });

  it("answers the operator's queue view for the transport whole, every shard's destinations in it", async () => {
    const res = await callWithKey(operator, "GET", "/relay/queue");
    expect(res.status).toBe(200);
    const body = await res.json<{ transports: { transport: string; destinations: number }[] }>();
    const split = body.transports.find((t) => t.transport === "split");
    expect(split?.destinations).toBe(nexthops.length);
  });
});
