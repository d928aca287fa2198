/**
 * Regression tests for the probe findings of issue 12 in the request-handling routes: each of
 * these failed before its fix (a whole-message cancel from a chunked body, a 500 from a
 * double-decoded address, a 500 from D1's LIKE limit, the dev mailbox shown to a tenant key is
 * in delivery/deliver.test.ts).
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { call, callWithKey, classified, email, getEmail, newKey, settle } from "./helpers";

let key: string;
beforeAll(async () => {
  key = await newKey("probe");
});

/** A request whose body is a stream: no Content-Length, sent chunked. */
function chunked(path: string, text: string): Promise<Response> {
  const bytes = new TextEncoder().encode(text);
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(bytes.slice(0, 5));
      c.enqueue(bytes.slice(5));
      c.close();
    },
  });
  return call(path, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body,
    duplex: "half",
  } as RequestInit);
}

async function twoDomains(drop = "drop.example"): Promise<string> {
  const res = await callWithKey(key, "POST", "/emails", email({ to: ["keep@keep.example", `gone@${drop}`] }));
  const { id } = await res.json<{ id: string }>();
  await classified(key, id);
  await settle(); // the cancel filter finds messages through the D1 index
  return id;
}

describe("POST /relay/messages/:id/cancel reads its body whatever the framing", () => {
  it("a chunked body (no Content-Length) cancels only the domain it names", async () => {
    const id = await twoDomains();
    const res = await chunked(`/relay/messages/${id}/cancel`, JSON.stringify({ domain: "drop.example" }));
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ recipients: 1 });
    const statuses = Object.fromEntries((await getEmail(key, id)).body.recipients.map((r) => [r.email, r.status]));
    expect(statuses).toEqual({
      "keep@keep.example": expect.not.stringMatching(/cancelled/),
      "gone@drop.example": "cancelled",
    });
  });

  it("a malformed body is 400 and an unknown field 422; nothing is cancelled", async () => {
    const id = await twoDomains();
    const bad = await chunked(`/relay/messages/${id}/cancel`, "{domain: drop.example");
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ name: "validation_error" });
    const typo = await callWithKey(key, "POST", `/relay/messages/${id}/cancel`, { domian: "drop.example" });
    expect(typo.status).toBe(422);
    expect((await getEmail(key, id)).body.recipients.every((r) => r.status !== "cancelled")).toBe(true);
  });

  it("an empty body still cancels every recipient, as documented", async () => {
    const id = await twoDomains();
    const res = await call(`/relay/messages/${id}/cancel`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}` },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ recipients: 2 });
  });
});

describe("DELETE /relay/suppressions/:address decodes the address once", () => {
  it("%25 is a literal percent sign: a 422 for a non-address, never a 500", async () => {
    const res = await callWithKey(key, "DELETE", "/relay/suppressions/%25");
    expect(res.status).toBe(422);
  });

  it("an address with an encoded percent sign round-trips", async () => {
    expect((await callWithKey(key, "POST", "/relay/suppressions", { address: "a%b@pct.example" })).status).toBe(201);
    const res = await callWithKey(key, "DELETE", "/relay/suppressions/a%25b%40pct.example");
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ address: "a%b@pct.example", deleted: true });
  });
});

describe("POST /relay/messages/cancel with any domain", () => {
  const label = (n: number, ch = "a") => ch.repeat(n);
  it("a 253-character domain is matched exactly, not through a LIKE pattern (D1 refuses patterns over 50 bytes)", async () => {
    const long = [label(63), label(63, "b"), label(63, "c"), label(61, "d")].join(".");
    expect(long.length).toBe(253);
    const res = await callWithKey(key, "POST", "/relay/messages/cancel", { domain: long });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ object: "cancellation", messages: 0, recipients: 0 });
  });

  it("a label over 63 characters, or a domain over 253, is a 422", async () => {
    expect((await callWithKey(key, "POST", "/relay/messages/cancel", { domain: `${label(64)}.example` })).status).toBe(
      422,
    );
    expect(
      (await callWithKey(key, "POST", "/relay/messages/cancel", { domain: Array(64).fill("abc").join(".") })).status,
    ).toBe(422);
  });

  it("matches the domain exactly: `_` is not a wildcard, and a sub-domain does not match its parent", async () => {
    const id = await twoDomains("exact.example");
    const wild = await callWithKey(key, "POST", "/relay/messages/cancel", { domain: "exact_example" });
    expect(await wild.json()).toMatchObject({ recipients: 0 });
    const parent = await callWithKey(key, "POST", "/relay/messages/cancel", { domain: "example" });
    expect(await parent.json()).toMatchObject({ recipients: 0 });
    const exact = await callWithKey(key, "POST", "/relay/messages/cancel", { domain: "EXACT.example" });
    expect(await exact.json()).toMatchObject({ recipients: 1 });
    expect((await getEmail(key, id)).body.recipients.find((r) => r.email === "gone@exact.example")!.status).toBe(
      "cancelled",
    );
  });

  it('takes a tag as "name:value", as search and the CLI write it, and still as {name, value}', async () => {
    const res = await callWithKey(
      key,
      "POST",
      "/emails",
      email({ to: ["t@tagged.example"], tags: [{ name: "campaign", value: "spring" }] }),
    );
    const { id } = await res.json<{ id: string }>();
    await classified(key, id);
    // The index of tags is written with the message's D1 index (classify): wait for it.
    for (let i = 0; i < 100; i++) {
      const n = await env.DB.prepare("SELECT count(*) AS n FROM message_tags WHERE message_id = ?")
        .bind(id)
        .first<{ n: number }>("n");
      if (n) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    const none = await callWithKey(key, "POST", "/relay/messages/cancel", {
      tag: { name: "campaign", value: "autumn" },
    });
    expect(await none.json()).toMatchObject({ recipients: 0 });
    const byString = await callWithKey(key, "POST", "/relay/messages/cancel", { tag: "campaign:spring" });
    expect(await byString.json()).toMatchObject({ messages: 1, recipients: 1 });
    expect((await callWithKey(key, "POST", "/relay/messages/cancel", { tag: "no-colon" })).status).toBe(422);
  });
});
