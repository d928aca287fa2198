/**
 * A hand-off cut short: the Transport DO journals a dispatch, then hands the entries over (the
 * deliver queue's sendBatch, or the DeliveryAgent RPCs), and stops (a deploy, an eviction) before
 * the hand-off is known to have gone through. Whether the jobs reached the queue is unknown, so
 * the entries are in flight after the start, and a lease of DELIVERY_LEASE_SECONDS (15 min) would
 * keep the destination's window full of entries nobody will report.
 *
 * Here the hand-off never answers (the object's env is swapped for one whose queue or agents hang),
 * and the object is aborted while it waits. After the start, the entries are retried within seconds
 * (queue: their hand-off was not confirmed, so they get AGENT_CHECK_SECONDS, 2 s here, to be
 * picked up by a consumer; agents: no agent holds them), and each recipient arrives exactly once.
 */
import { env, runInDurableObject } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { callWithKey, email, eventually, getEmail, newKey, settle } from "../helpers";
import { caught } from "./observe";

const sink = inject("sink");
const MESSAGES = 3;
let key: string;

beforeAll(async () => {
  key = await newKey("acme");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('lostsend', ?)").bind(
      `[127.0.0.1]:${sink.smtpPort}`,
    ),
    env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'lostsend.test', 'lostsend')"),
  ]);
});

const hangs = () => new Promise<never>(() => {});

describe("a hand-off the Transport DO never saw finish", () => {
  it(
    `retries its ${MESSAGES} entries within seconds of the next start, not after their leases; each recipient arrives once`,
    { timeout: 40_000 },
    async () => {
      const stub = () => env.TRANSPORT_QUEUE.getByName("lostsend");
      await runInDurableObject(stub(), (instance) => {
        const o = instance as unknown as { env: Env };
        o.env =
          env.DELIVERY === "agents"
            ? {
                ...o.env,
                DELIVERY_AGENT: { getByName: () => ({ deliver: hangs }) } as unknown as Env["DELIVERY_AGENT"],
              }
            : { ...o.env, DELIVER: { sendBatch: hangs } as unknown as Queue };
      });
      const rcpts = Array.from({ length: MESSAGES }, (_, i) => `s${i}@lostsend.test`);
      // Classified at accept, the messages are admitted by the accept request itself here
      // (ADMIT_BATCH_MS "0"), and the admission's pump is the call that hands the entries over:
      // this answer comes once the abort below ends that call.
      const posted = callWithKey(
        key,
        "POST",
        "/emails/batch",
        rcpts.map((to) => email({ to: [to], subject: "lost send" })),
      );
      // Every entry dispatched (journaled) and stuck in its hand-off.
      await eventually(
        async () => ((await stub().inspect()).inflight === MESSAGES ? true : undefined),
        10_000,
        "the entries in hand-offs that never answer",
      );
      await expect(
        runInDurableObject(stub(), (_o, state) => state.abort("stopped inside the hand-off")),
      ).rejects.toThrow("stopped inside the hand-off");
      const res = await posted;
      expect(res.status).toBe(200); // stored before the admission: the stop is not the sender's concern
      const ids = (await res.json<{ data: { id: string }[] }>()).data.map((d) => d.id);

      const t0 = Date.now();
      for (const id of ids) {
        await eventually(
          async () => ((await getEmail(key, id)).body.recipients[0]!.status === "delivered" ? true : undefined),
          25_000,
          `delivered state of ${id}`,
        );
      }
      const took = Date.now() - t0;
      const arrived = (await caught(sink.httpPort))
        .flatMap((m) => m.rcptTo)
        .filter((a) => a.endsWith("@lostsend.test"));
      console.log(`lost hand-off (${env.DELIVERY}): ${MESSAGES} entries delivered ${took} ms after the abort`);
      expect(arrived.sort()).toEqual([...rcpts].sort());
      expect(took).toBeLessThan(20_000); // a lease would have been 15 min
    },
  );

  it("lets the queues settle", async () => {
    await settle();
  });
});
