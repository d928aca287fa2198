/** Idempotency-Key exactly as Resend: replay, payload mismatch, in-flight, bad keys, per-tenant scope, 24 h expiry. */
import { env } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { outboxName, shardForKey } from "../../worker/model/ids";
import { callWithKey, email, newKey, settle } from "./helpers";
import { settingsOf } from "../../worker/settings/settings";

let key: string;
beforeAll(async () => {
  key = await newKey("acme");
});
afterAll(() => settle());

async function countMessages(): Promise<number> {
  let n = 0;
  for (let s = 0; s < settingsOf(env).outboxShards; s++) {
    const listed = await env.BODIES.list({ prefix: `mess/${s.toString(16).padStart(2, "0")}` });
    n += listed.objects.length;
  }
  return n;
}

describe("Idempotency-Key", () => {
  it("returns the original response for the same key and payload, and stores one message", async () => {
    const before = await countMessages();
    const first = await callWithKey(key, "POST", "/emails", email(), { "idempotency-key": "welcome-user/123" });
    const second = await callWithKey(key, "POST", "/emails", email(), { "idempotency-key": "welcome-user/123" });
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    const a = await first.text();
    expect(await second.text()).toBe(a);
    expect(await countMessages()).toBe(before + 1);
  });

  it("answers 409 invalid_idempotent_request for the same key with a different payload", async () => {
    await callWithKey(key, "POST", "/emails", email(), { "idempotency-key": "k-mismatch" });
    const res = await callWithKey(key, "POST", "/emails", email({ subject: "Other" }), {
      "idempotency-key": "k-mismatch",
    });
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ statusCode: 409, name: "invalid_idempotent_request" });
  });

  it("answers 409 concurrent_idempotent_requests while the original request is in flight", async () => {
    // A request that has reserved its key and is still writing its body holds the reservation.
    const body = JSON.stringify(email());
    const hash = [
      ...new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`POST /emails\n${body}`))),
    ]
      .map((b) => b.toString(16).padStart(2, "0"))
      .join("");
    const shard = await shardForKey("acme", "k-in-flight", settingsOf(env).outboxShards);
    const reserved = await env.OUTBOX.getByName(outboxName(shard)).reserve(
      "acme",
      { key: "k-in-flight", hash },
      "other-request",
    );
    expect(reserved.kind).toBe("fresh");
    const res = await callWithKey(key, "POST", "/emails", body, { "idempotency-key": "k-in-flight" });
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ statusCode: 409, name: "concurrent_idempotent_requests" });
    // Once the original request gives up (released), the key works again.
    await env.OUTBOX.getByName(outboxName(shard)).release("acme", "k-in-flight", "other-request");
    expect((await callWithKey(key, "POST", "/emails", body, { "idempotency-key": "k-in-flight" })).status).toBe(200);
  });

  it.each([
    { name: "an empty key", value: "" },
    { name: "a key of 257 characters", value: "k".repeat(257) },
    { name: "a key with spaces", value: "two words" },
  ])("answers 400 invalid_idempotency_key for $name", async ({ value }) => {
    const res = await callWithKey(key, "POST", "/emails", email(), { "idempotency-key": value });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ statusCode: 400, name: "invalid_idempotency_key" });
  });

  it("keeps keys per tenant: another tenant may use the same key", async () => {
    const other = await newKey("globex");
    const a = await (
      await callWithKey(key, "POST", "/emails", email(), { "idempotency-key": "shared-key" })
    ).json<{ id: string }>();
    const b = await (
      await callWithKey(other, "POST", "/emails", email(), { "idempotency-key": "shared-key" })
    ).json<{ id: string }>();
    expect(a.id).not.toBe(b.id);
  });

  it("does not burn a key on a request that failed validation", async () => {
    const bad = await callWithKey(key, "POST", "/emails", email({ from: "nope" }), {
      "idempotency-key": "k-after-422",
    });
    expect(bad.status).toBe(422);
    const good = await callWithKey(key, "POST", "/emails", email(), { "idempotency-key": "k-after-422" });
    expect(good.status).toBe(200);
  });

  it("applies to batches as a whole, and to raw submissions", async () => {
    const batch = [email(), email({ to: "b@example.com" })];
    const one = await (await callWithKey(key, "POST", "/emails/batch", batch, { "idempotency-key": "batch-1" })).text();
    expect(
      await (await callWithKey(key, "POST", "/emails/batch", batch, { "idempotency-key": "batch-1" })).text(),
    ).toBe(one);
    const raw = {
      mail_from: "a@acme.test",
      rcpt_to: "b@example.com",
      message: "From: a@acme.test\r\nSubject: x\r\n\r\nhi\r\n",
    };
    const r1 = await (
      await callWithKey(key, "POST", "/relay/messages/raw", raw, { "idempotency-key": "raw-1" })
    ).text();
    expect(
      await (await callWithKey(key, "POST", "/relay/messages/raw", raw, { "idempotency-key": "raw-1" })).text(),
    ).toBe(r1);
  });

  it("forgets a key after 24 hours", async () => {
    const shard = await shardForKey("acme", "k-expiry", settingsOf(env).outboxShards);
    const stub = env.OUTBOX.getByName(outboxName(shard));
    const first = await (
      await callWithKey(key, "POST", "/emails", email(), { "idempotency-key": "k-expiry" })
    ).json<{ id: string }>();
    const { runInDurableObject } = await import("cloudflare:test");
    await runInDurableObject(stub, (_o, state) => {
      state.storage.sql.exec("UPDATE idem SET expires_at = ? WHERE key = 'k-expiry'", Date.now() - 1);
    });
    const again = await (
      await callWithKey(key, "POST", "/emails", email(), { "idempotency-key": "k-expiry" })
    ).json<{ id: string }>();
    expect(again.id).not.toBe(first.id);
  });
});
