/**
 * Inflow control (Postfix's in_flow_delay): while mail arrives faster than its transport delivers
 * it, the Transport DO answers admissions `over` (core/flow.ts), the Outbox remembers it
 * (storage/outbox-admit.ts Inflow) and answers accepts with a pause, and the route holds the
 * answer back that long, the message already stored. This project runs with IN_FLOW_DELAY_MS
 * "0" (tests send bursts on purpose); these tests give the Outboxes an env with 400 ms.
 */
import { env, runInDurableObject } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { outboxName, shardCount, shardOf } from "../../durable-objects/storage/outbox-ids";
import type { Inflow } from "../../durable-objects/storage/outbox-admit";
import { callWithKey, email, eventually, getEmail, newKey } from "./helpers";

const DELAY_MS = 400;
let key: string;

/** Gives every shard's Outbox IN_FLOW_DELAY_MS = DELAY_MS and, with `over`, a fresh over note (or clears it). */
async function everyShard(over: boolean | null): Promise<void> {
  for (let s = 0; s < shardCount(env.OUTBOX_SHARDS); s++) {
    await runInDurableObject(env.OUTBOX.getByName(outboxName(s)), (instance) => {
      const o = instance as unknown as { env: Env; inflow: Inflow };
      o.env = { ...o.env, IN_FLOW_DELAY_MS: String(DELAY_MS) };
      if (over !== null) o.inflow.note(over, Date.now());
    });
  }
}

/** A one-recipient accept straight to the Outbox of `shard`: its answer. */
function acceptIn(shard: number) {
  const id = `${shard.toString(16).padStart(2, "0")}${crypto.randomUUID().slice(2)}`;
  return env.OUTBOX.getByName(outboxName(shard)).accept({
    tenant: "inflow", idempotency: null, response: { status: 200, body: "{}" },
    messages: [{ id, createdAt: Date.now(), scheduledAt: null, mailFrom: "a@acme.test", rcptTo: ["r@example.com"], size: 10, summary: { from: "a@acme.test", to: ["r@example.com"], cc: null, bcc: null, reply_to: null, subject: "s", html: null, text: "t", tags: null, message_id: `<${id}@acme.test>` } }],
  });
}

beforeAll(async () => {
  key = await newKey("inflow");
});

describe("inflow control", () => {
  it("holds back an accept's answer IN_FLOW_DELAY_MS while the inflow is over; the message is stored before", async () => {
    await everyShard(true);
    const t0 = Date.now();
    const res = await callWithKey(key, "POST", "/emails", email({ to: ["held@example.com"] }));
    expect(res.status).toBe(200);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(DELAY_MS);
    const { id } = await res.json<{ id: string }>();
    expect((await getEmail(key, id)).status).toBe(200);
    await everyShard(false);
    expect(await acceptIn(0)).toEqual({ kind: "accepted", pauseMs: 0 });
  });

  it("learns `over` from its admissions: a burst of 150 recipients that nobody delivers (DISPATCH manual here) makes the next accepts of that shard pause", async () => {
    await everyShard(false);
    const to = (m: number) => Array.from({ length: 50 }, (_, i) => `burst${m}-${i}@example.com`);
    const res = await callWithKey(key, "POST", "/emails/batch", [0, 1, 2].map((m) => email({ to: to(m) })));
    expect(res.status).toBe(200);
    const { data } = await res.json<{ data: { id: string }[] }>();
    const shard = shardOf(data[0]!.id);
    expect(data.every((d) => shardOf(d.id) === shard)).toBe(true); // one request, one shard
    // The Outbox admits them within ADMIT_BATCH_MS (1 s here); the Transport DO's answer says over.
    const answer = await eventually(async () => {
      const a = await acceptIn(shard);
      return a.kind === "accepted" && a.pauseMs === DELAY_MS ? a : undefined;
    }, 10_000, "an accept answered with a pause");
    expect(answer).toEqual({ kind: "accepted", pauseMs: DELAY_MS });
  });
});
