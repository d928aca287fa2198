/**
 * Back-pressure at accept (worker/api/http/accept-gate.ts): the send routes hold one of the isolate's
 * ACCEPT_CONCURRENCY slots while they work, a tenant at most three quarters of them; a request
 * that finds no slot is answered at once 429 rate_limit_exceeded with Retry-After, nothing
 * stored, and the same request sent again (same Idempotency-Key) is accepted once a slot frees.
 * The test takes the slots itself through the isolate's gate, so what it checks does not depend
 * on timing.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { acceptGateOf } from "../../worker/api/http/accept-gate";
import { callWithKey, email, getEmail, newKey, outboxCount } from "./helpers";
import { settingsOf } from "../../worker/settings/settings";

let key: string;
let other: string;

beforeAll(async () => {
  key = await newKey("gate");
  other = await newKey("gate-other");
});

/** Messages stored in every shard's Outbox. */
async function stored(): Promise<number> {
  let n = 0;
  for (let s = 0; s < settingsOf(env).outboxShards; s++) n += await outboxCount(s, "message");
  return n;
}

describe("accept gate", () => {
  it("answers 429 with Retry-After at once when every slot is held, stores nothing, and takes the retry", async () => {
    const gate = acceptGateOf(env);
    expect(gate.opts).toMatchObject({ limit: 4, perKey: 3 });
    const held = Array.from({ length: 4 }, (_, i) => gate.enter(`holder-${i}`));
    expect(held.every((r) => r !== null)).toBe(true);
    const body = email({ to: ["gated@example.com"] });
    try {
      const before = await stored();
      const refused = await callWithKey(key, "POST", "/emails", body, { "idempotency-key": "gate-1" });
      expect(refused.status).toBe(429);
      expect(refused.headers.get("retry-after")).toBe("1");
      const err = await refused.json<{ statusCode: number; name: string; message: string }>();
      expect(err).toMatchObject({ statusCode: 429, name: "rate_limit_exceeded" });
      expect(err.message).toMatch(/4 send requests are in progress.*Nothing was queued/);
      expect((await callWithKey(key, "POST", "/emails/batch", [email({ to: ["gated2@example.com"] })])).status).toBe(429);
      expect((await callWithKey(key, "POST", "/relay/messages/raw", { from: "a@acme.test", to: ["b@example.com"], raw: "Subject: x\r\n\r\nbody\r\n" })).status).toBe(429);
      expect(await stored()).toBe(before);
      expect((await callWithKey(key, "GET", "/emails")).status).toBe(200); // other routes are not gated
    } finally {
      for (const r of held) r!();
    }
    const again = await callWithKey(key, "POST", "/emails", body, { "idempotency-key": "gate-1" });
    expect(again.status).toBe(200);
    const { id } = await again.json<{ id: string }>();
    expect((await getEmail(key, id)).status).toBe(200);
    expect(gate.held()).toBe(0);
  });

  it("leaves a quarter of the slots to other tenants when one holds its share", async () => {
    const gate = acceptGateOf(env);
    // Alone a tenant may hold 3 of the 4; the first test's holders asked moments ago and may
    // still count as sending, which lowers its fair share (lib/gate.ts).
    const share = gate.share("gate");
    expect(share).toBeGreaterThanOrEqual(1);
    expect(share).toBeLessThanOrEqual(3);
    const flood: (() => void)[] = [];
    for (let r = gate.enter("gate"); r !== null; r = gate.enter("gate")) flood.push(r);
    expect(flood.length).toBe(share);
    try {
      const refused = await callWithKey(key, "POST", "/emails", email({ to: ["mine@example.com"] }));
      expect(refused.status).toBe(429);
      expect((await refused.json<{ message: string }>()).message).toMatch(new RegExp(`this tenant has ${share} send requests in progress, its share of 4 while \\d+ tenants are sending`));
      expect((await callWithKey(other, "POST", "/emails", email({ to: ["theirs@example.com"] }))).status).toBe(200);
    } finally {
      for (const r of flood) r();
    }
    expect(gate.held()).toBe(0);
  });

  it("releases the slot when the route fails", async () => {
    const gate = acceptGateOf(env);
    const bad = await callWithKey(key, "POST", "/emails", { from: "x" });
    expect(bad.status).toBe(422);
    expect(gate.held()).toBe(0);
  });
});
