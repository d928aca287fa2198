/**
 * Eviction in the middle of a run: 60 one-recipient messages to one nexthop (a sink taking 40 ms
 * per message, scripted-sinks.ts "slow"); once some are delivered and others are still waiting or
 * in flight, the Transport DO is aborted (its in-memory state is lost; it restarts from its
 * SQLite storage on the next call). Every recipient still ends up delivered; a recipient can
 * arrive twice only if its entry was in flight at the abort, and the duplicates are counted.
 */
import { env, runInDurableObject } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { callWithKey, email, eventually, getEmail, newKey, settle } from "../helpers";
import { leasesIn } from "../leases-probe";

const scripted = inject("scripted");
const MESSAGES = 60;
let key: string;

type Stats = { messages: { rcptTo: string[] }[] };

beforeAll(async () => {
  key = await newKey("acme");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('evict', ?)").bind(
      `[127.0.0.1]:${scripted.ports.slow}`,
    ),
    env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'evict.test', 'evict')"),
  ]);
});

async function arrived(): Promise<string[]> {
  return (await (await fetch(`${scripted.statsUrl}/slow`)).json<Stats>()).messages.flatMap((m) => m.rcptTo);
}

/** Entries the Transport DO has dispatched and not yet seen reported (its leases). */
async function leases(): Promise<number> {
  return (await leasesIn(env.TRANSPORT_QUEUE.getByName("evict"))).length;
}

describe("the Transport DO aborted in the middle of a run", () => {
  it(
    `still delivers every one of ${MESSAGES} recipients; duplicates only for entries in flight at the abort`,
    { timeout: 60_000 },
    async () => {
      const rcpts = Array.from({ length: MESSAGES }, (_, i) => `e${i}@evict.test`);
      const res = await callWithKey(
        key,
        "POST",
        "/emails/batch",
        rcpts.map((to) => email({ to: [to] })),
      );
      expect(res.status).toBe(200);
      const ids = (await res.json<{ data: { id: string }[] }>()).data.map((d) => d.id);

      await eventually(async () => ((await arrived()).length >= 5 ? true : undefined), 30_000, "the first deliveries");
      const inFlight = await leases();
      const before = (await arrived()).length;
      await expect(
        runInDurableObject(env.TRANSPORT_QUEUE.getByName("evict"), (_o, state) => state.abort("evicted by the test")),
      ).rejects.toThrow("evicted by the test");
      // The abort really hit the middle of the run.
      expect(before).toBeLessThan(MESSAGES);

      await eventually(
        async () => (new Set(await arrived()).size >= MESSAGES ? true : undefined),
        45_000,
        "every recipient at the sink",
      );
      for (const id of ids) {
        await eventually(
          async () => ((await getEmail(key, id)).body.recipients[0]!.status === "delivered" ? true : undefined),
          10_000,
          `delivered state of ${id}`,
        );
      }
      const all = await arrived();
      expect([...new Set(all)].sort()).toEqual([...rcpts].sort());
      const duplicates = all.length - new Set(all).size;
      console.log(
        `eviction: ${before} of ${MESSAGES} delivered before the abort, ${inFlight} leased (in flight) at the abort, ${duplicates} duplicates`,
      );
      expect(duplicates).toBeLessThanOrEqual(inFlight);
    },
  );

  it("lets the queues settle", async () => {
    await settle();
  });
});
