/**
 * Back-pressure at accept (worker/api/http/accept-gate.ts): the send routes hold one of the isolate's
 * ACCEPT_CONCURRENCY slots while they work, a tenant at most three quarters of them; a request
 * that finds no slot waits for one in arrival order, and only after ACCEPT_WAIT_MS (300 ms in this
 * project, 10 s by default) is it answered 429 rate_limit_exceeded with Retry-After, nothing
 * stored; the same request sent again (same Idempotency-Key) is accepted once a slot frees.
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
  it("answers 429 with Retry-After when every slot stays held for ACCEPT_WAIT_MS, stores nothing, and takes the retry", async () => {
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
      expect(err.message).toMatch(
        /4 send requests are in progress and no slot freed within 300 ms.*Nothing was queued/,
      );
      expect((await callWithKey(key, "POST", "/emails/batch", [email({ to: ["gated2@example.com"] })])).status).toBe(
        429,
      );
      expect(
        (
          await callWithKey(key, "POST", "/relay/messages/raw", {
            from: "a@acme.test",
            to: ["b@example.com"],
            raw: "Subject: x\r\n\r\nbody\r\n",
          })
        ).status,
      ).toBe(429);
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

  it("keeps a request that finds every slot held waiting, and serves the waiters in arrival order as slots free", async () => {
    const gate = acceptGateOf(env);
    const held = Array.from({ length: 4 }, (_, i) => gate.enter(`holder-${i}`));
    expect(held.every((r) => r !== null)).toBe(true);
    const done: string[] = [];
    const send = (name: string) =>
      callWithKey(name === "first" ? key : other, "POST", "/emails", email({ to: [`${name}@example.com`] })).then(
        (r) => {
          done.push(name);
          return r;
        },
      );
    const first = send("first");
    await new Promise((r) => setTimeout(r, 50));
    const second = send("second");
    await new Promise((r) => setTimeout(r, 50));
    expect(gate.waiting()).toBe(2);
    expect(done).toEqual([]);
    expect(gate.enter("newcomer")).toBeNull(); // nobody jumps the queue
    held[0]!();
    expect((await first).status).toBe(200);
    expect(done).toEqual(["first"]);
    held[1]!();
    expect((await second).status).toBe(200);
    expect(done).toEqual(["first", "second"]);
    for (const r of held) r!();
    expect(gate.held()).toBe(0);
    expect(gate.waiting()).toBe(0);
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
      expect((await refused.json<{ message: string }>()).message).toMatch(
        new RegExp(`this tenant has ${share} send requests in progress, its share of 4 while \\d+ tenants are sending`),
      );
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
