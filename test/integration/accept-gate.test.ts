/**
 * Back-pressure at accept (worker/api/accept-gate.ts): the send routes hold one of the isolate's
 * ACCEPT_CONCURRENCY slots while they work; a request that finds none within ACCEPT_WAIT_MS is
 * answered 429 rate_limit_exceeded with Retry-After, nothing stored, and the same request sent
 * again (same Idempotency-Key) is accepted once a slot frees. The test takes the slots itself
 * through the isolate's gate, so what it checks does not depend on timing.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { acceptGateOf } from "../../worker/api/accept-gate";
import { callWithKey, email, getEmail, newKey, outboxCount } from "./helpers";
import { shardCount } from "../../durable-objects/storage/outbox-ids";

let key: string;

beforeAll(async () => {
  key = await newKey("gate");
});

/** Messages stored in every shard's Outbox. */
async function stored(): Promise<number> {
  let n = 0;
  for (let s = 0; s < shardCount(env.OUTBOX_SHARDS); s++) n += await outboxCount(s, "message");
  return n;
}

describe("accept gate", () => {
  it("answers 429 with Retry-After when every slot stays held past ACCEPT_WAIT_MS, stores nothing, and takes the retry", async () => {
    const gate = acceptGateOf(env);
    expect(gate.opts.limit).toBe(8);
    const held = await Promise.all(Array.from({ length: gate.opts.limit }, () => gate.enter()));
    expect(held.every((r) => r !== null)).toBe(true);
    const body = email({ to: ["gated@example.com"] });
    try {
      const before = await stored();
      const t0 = Date.now();
      const refused = await callWithKey(key, "POST", "/emails", body, { "idempotency-key": "gate-1" });
      expect(refused.status).toBe(429);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(gate.opts.maxWaitMs - 50);
      expect(refused.headers.get("retry-after")).toBe("1");
      const err = await refused.json<{ statusCode: number; name: string; message: string }>();
      expect(err.statusCode).toBe(429);
      expect(err.name).toBe("rate_limit_exceeded");
      expect(err.message).toMatch(/Nothing was queued/);
      const batch = await callWithKey(key, "POST", "/emails/batch", [email({ to: ["gated2@example.com"] })]);
      expect(batch.status).toBe(429);
      expect(await stored()).toBe(before);
      // Other routes are not gated.
      expect((await callWithKey(key, "GET", "/emails")).status).toBe(200);
    } finally {
      for (const r of held) r!();
    }
    const again = await callWithKey(key, "POST", "/emails", body, { "idempotency-key": "gate-1" });
    expect(again.status).toBe(200);
    const { id } = await again.json<{ id: string }>();
    expect((await getEmail(key, id)).status).toBe(200);
    expect(gate.held()).toBe(0);
  }, 30_000);

  it("a request that waits for a slot is accepted when one frees in time", async () => {
    const gate = acceptGateOf(env);
    const held = await Promise.all(Array.from({ length: gate.opts.limit }, () => gate.enter()));
    try {
      const first = callWithKey(key, "POST", "/emails", email({ to: ["w1@example.com"] }));
      const second = callWithKey(key, "POST", "/emails", email({ to: ["w2@example.com"] }));
      await new Promise((r) => setTimeout(r, 200));
      expect(gate.waiting()).toBe(2);
      held[0]!();
      expect((await first).status).toBe(200);
      held[1]!();
      expect((await second).status).toBe(200);
    } finally {
      for (const r of held) r!();
    }
    expect(gate.held()).toBe(0);
  }, 30_000);

  it("releases the slot when the route fails", async () => {
    const gate = acceptGateOf(env);
    const bad = await callWithKey(key, "POST", "/emails", { from: "x" });
    expect(bad.status).toBe(422);
    expect(gate.held()).toBe(0);
  });
});
