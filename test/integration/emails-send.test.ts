/** POST /emails (happy path, round trip, DKIM, every validation error), authentication and tenant isolation, routing errors. */
import { env } from "cloudflare:test";
import PostalMime from "postal-mime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, callWithKey, classified, email, getEmail, newKey, settle } from "./helpers";

let key: string;
beforeAll(async () => {
  key = await newKey("acme");
});
afterAll(() => settle());

describe("POST /emails", () => {
  it("accepts a message, answers Resend's { id } and stores the body in R2 before the envelope", async () => {
    const res = await callWithKey(
      key,
      "POST",
      "/emails",
      email({ cc: ["bob@example.org"], bcc: "carol@example.net", tags: [{ name: "kind", value: "welcome" }] }),
    );
    expect(res.status).toBe(200);
    const { id } = await res.json<{ id: string }>();
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(await env.BODIES.head(`mess/${id}`)).not.toBeNull();
    const { status, body } = await getEmail(key, id);
    expect(status).toBe(200);
    expect(body).toMatchObject({
      object: "email",
      id,
      from: "Acme <no-reply@acme.test>",
      to: ["ann@example.com"],
      cc: ["bob@example.org"],
      bcc: ["carol@example.net"],
      subject: "Hello",
      text: "Hi there",
      tags: [{ name: "kind", value: "welcome" }],
    });
    expect(body.recipients.map((r) => r.email)).toEqual(["ann@example.com", "bob@example.org", "carol@example.net"]);
  });

  it("classifies the recipients through the queue: they become ready on the default smtp transport", async () => {
    const { id } = await (
      await callWithKey(key, "POST", "/emails", email({ to: ["dan@Example.COM"] }))
    ).json<{ id: string }>();
    const body = await classified(key, id);
    expect(body.last_event).toBe("queued");
    // In the Transport DO's core and selectable (dispatch is manual in this project): "queued".
    expect(body.recipients).toEqual([
      {
        email: "dan@example.com",
        status: "ready",
        attempts: 0,
        next_attempt_at: null,
        last_response: null,
        blocked_by: "queued",
        blocked_until: null,
      },
    ]);
  });

  it("round-trips: the stored body parses back with postal-mime to the submitted fields and attachment", async () => {
    const content = btoa("%PDF-1.4 tiny \u00e9".replace(/[^\x00-\xff]/g, "?"));
    const req = email({
      from: "Zoë Ünicode <zoe@acme.test>",
      to: ["Ann <ann@example.com>"],
      subject: "Grüße — 你好 ✉",
      html: "<p>Hallo <b>Welt</b></p>",
      text: "Hallo Welt",
      reply_to: "help@acme.test",
      headers: { "X-Entity-Ref-ID": "ref-42" },
      attachments: [{ filename: "résumé.pdf", content, content_type: "application/pdf" }],
    });
    const { id } = await (await callWithKey(key, "POST", "/emails", req)).json<{ id: string }>();
    const raw = await (await env.BODIES.get(`mess/${id}`))!.arrayBuffer();
    const parsed = await PostalMime.parse(raw);
    expect(parsed.from).toEqual({ name: "Zoë Ünicode", address: "zoe@acme.test" });
    expect(parsed.to).toEqual([{ name: "Ann", address: "ann@example.com" }]);
    expect(parsed.subject).toBe("Grüße — 你好 ✉");
    expect(parsed.text?.trim()).toBe("Hallo Welt");
    expect(parsed.html?.trim()).toBe("<p>Hallo <b>Welt</b></p>");
    expect(parsed.replyTo).toEqual([{ name: "", address: "help@acme.test" }]);
    expect(parsed.headers.find((h) => h.key === "x-entity-ref-id")?.value).toBe("ref-42");
    expect(parsed.messageId).toBe(`<${id}@acme.test>`);
    expect(parsed.attachments).toHaveLength(1);
    expect(parsed.attachments[0]).toMatchObject({ filename: "résumé.pdf", mimeType: "application/pdf" });
    expect(btoa(String.fromCharCode(...new Uint8Array(parsed.attachments[0]!.content as ArrayBuffer)))).toBe(content);
  });

  it("DKIM-signs mail from a domain with a configured key (DKIM_KEYS), and only that mail", async () => {
    const signed = await (
      await callWithKey(key, "POST", "/emails", email({ from: "news@signed.test" }))
    ).json<{ id: string }>();
    const plain = await (await callWithKey(key, "POST", "/emails", email())).json<{ id: string }>();
    const head = async (id: string) => (await (await env.BODIES.get(`mess/${id}`))!.text()).split("\r\n\r\n")[0]!;
    expect(await head(signed.id)).toMatch(
      /^DKIM-Signature: v=1; a=ed25519-sha256; c=relaxed\/relaxed; d=signed\.test; s=s1;/,
    );
    expect(await head(plain.id)).not.toMatch(/DKIM-Signature/i);
  });

  it.each([
    { name: "no body", body: "", status: 400, error: "validation_error", message: /empty/ },
    { name: "invalid JSON", body: "{nope", status: 400, error: "validation_error", message: /not valid JSON/ },
    {
      name: "missing from",
      body: { to: "a@example.com", subject: "s" },
      status: 422,
      error: "missing_required_field",
      message: /`from`/,
    },
    {
      name: "missing to",
      body: { from: "a@acme.test", subject: "s" },
      status: 422,
      error: "missing_required_field",
      message: /`to`/,
    },
    {
      name: "missing subject",
      body: { from: "a@acme.test", to: "b@example.com" },
      status: 422,
      error: "missing_required_field",
      message: /`subject`/,
    },
    { name: "wrong type", body: email({ to: 42 }), status: 422, error: "validation_error", message: /`to`/ },
    {
      name: "bad tag",
      body: email({ tags: [{ name: "has space", value: "x" }] }),
      status: 422,
      error: "validation_error",
      message: /`tags\[0\]\.name`/,
    },
    {
      name: "bad from",
      body: email({ from: "not an address" }),
      status: 422,
      error: "invalid_from_address",
      message: /`from`/,
    },
    {
      name: "bad to",
      body: email({ to: ["ok@example.com", "broken@"] }),
      status: 422,
      error: "validation_error",
      message: /`to\[1\]`/,
    },
    {
      name: "header injection in subject",
      body: email({ subject: "Hi\r\nBcc: victim@example.com" }),
      status: 422,
      error: "validation_error",
      message: /`subject`/,
    },
    {
      name: "header injection in a custom header",
      body: email({ headers: { "X-A": "1\nX-B: 2" } }),
      status: 422,
      error: "validation_error",
      message: /headers/,
    },
    {
      name: "bad base64 attachment",
      body: email({ attachments: [{ filename: "a.bin", content: "***" }] }),
      status: 422,
      error: "invalid_attachment",
      message: /attachments\[0\]/,
    },
    {
      name: "bad scheduled_at",
      body: email({ scheduled_at: "next tuesday-ish" }),
      status: 422,
      error: "validation_error",
      message: /scheduled_at/,
    },
    {
      name: "scheduled_at in the past",
      body: email({ scheduled_at: "2020-01-01T00:00:00Z" }),
      status: 422,
      error: "validation_error",
      message: /scheduled_at`: 2020-01-01T00:00:00\.000Z is in the past/,
    },
    {
      name: "51 recipients",
      body: email({ to: Array.from({ length: 51 }, (_, i) => `u${i}@example.com`) }),
      status: 422,
      error: "validation_error",
      message: /limit is 50/,
    },
    {
      name: "a message over MAX_MESSAGE_BYTES",
      body: email({ text: "x".repeat(210_000) }),
      status: 413,
      error: "validation_error",
      message: /limit is 200000 bytes/,
    },
    // Refused from the parts' sizes, before anything is composed (issue 12: 50 MB took 12 s of CPU first).
    {
      name: "attachments that cannot fit, before composing",
      body: email({ attachments: [{ filename: "big.bin", content: "QUJD".repeat(65_000) }] }),
      status: 413,
      error: "validation_error",
      message: /would be at least \d+ bytes; the limit is 200000/,
    },
    {
      name: "a request body over the request limit",
      body: email({ text: "x".repeat(400_000) }),
      status: 413,
      error: "validation_error",
      message: /request body/,
    },
  ])("rejects $name with $status $error", async ({ body, status, error, message }) => {
    const res = await callWithKey(key, "POST", "/emails", body);
    expect(res.status).toBe(status);
    const json = await res.json<{ statusCode: number; name: string; message: string }>();
    expect(json).toEqual({ statusCode: status, name: error, message: expect.stringMatching(message) });
    expect(JSON.stringify(json)).not.toMatch(/at .*\.ts:\d+/);
  });

  it("counts cc and bcc toward the recipient limit after de-duplication", async () => {
    const to = Array.from({ length: 40 }, (_, i) => `u${i}@example.com`);
    const ok = await callWithKey(
      key,
      "POST",
      "/emails",
      email({
        to,
        cc: to.slice(0, 10).map((a) => a.toUpperCase().replace("EXAMPLE.COM", "example.com")),
        bcc: to.slice(0, 10),
      }),
    );
    expect(ok.status).toBe(200);
    const tooMany = await callWithKey(
      key,
      "POST",
      "/emails",
      email({ to, cc: Array.from({ length: 11 }, (_, i) => `c${i}@example.com`) }),
    );
    expect(tooMany.status).toBe(422);
  });
});

describe("authentication", () => {
  it("answers 401 missing_api_key without an Authorization header", async () => {
    const res = await call("/emails", { method: "POST", body: JSON.stringify(email()) });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ statusCode: 401, name: "missing_api_key" });
  });

  it("answers 401 missing_api_key for a non-Bearer scheme", async () => {
    const res = await call("/emails", { headers: { authorization: `Basic ${btoa("a:b")}` } });
    expect(res.status).toBe(401);
  });

  it("answers 403 invalid_api_key for an unknown key, on every route", async () => {
    for (const [method, path] of [
      ["POST", "/emails"],
      ["GET", "/emails"],
      ["GET", "/emails/x"],
      ["POST", "/emails/batch"],
      ["PATCH", "/emails/x"],
      ["POST", "/emails/x/cancel"],
      ["POST", "/relay/messages/raw"],
    ] as const) {
      const res = await callWithKey("co_not_a_real_key", method, path, method === "GET" ? undefined : {});
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(await res.json()).toEqual({ statusCode: 403, name: "invalid_api_key", message: "API key is invalid." });
    }
  });

  it("stores only the SHA-256 of a key in D1", async () => {
    const rows = await env.DB.prepare("SELECT key_hash FROM api_keys WHERE tenant_id = 'acme'").all<{
      key_hash: string;
    }>();
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(key));
    const hex = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
    expect(rows.results.map((r) => r.key_hash)).toContain(hex);
    expect(JSON.stringify(rows.results)).not.toContain(key);
  });

  it("never shows one tenant's email to another tenant's key: 404", async () => {
    const other = await newKey("globex");
    const { id } = await (await callWithKey(key, "POST", "/emails", email())).json<{ id: string }>();
    for (const [method, path] of [
      ["GET", `/emails/${id}`],
      ["PATCH", `/emails/${id}`],
      ["POST", `/emails/${id}/cancel`],
    ] as const) {
      const res = await callWithKey(other, method, path, method === "GET" ? undefined : { scheduled_at: "in 1 hour" });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(await res.json()).toMatchObject({ statusCode: 404, name: "not_found" });
    }
  });
});

describe("routing of errors", () => {
  it("answers 405 method_not_allowed for a known path with another method", async () => {
    const res = await callWithKey(key, "DELETE", "/emails");
    expect(res.status).toBe(405);
    expect(await res.json()).toMatchObject({ statusCode: 405, name: "method_not_allowed" });
  });

  it("answers 404 not_found for an id that is not an email id", async () => {
    const res = await callWithKey(key, "GET", "/emails/not-an-id");
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ name: "not_found" });
  });

  it("answers GET /emails/batch 405 method_not_allowed: batch is the batch endpoint, not an email id", async () => {
    for (const method of ["GET", "PATCH", "DELETE"]) {
      const res = await callWithKey(key, method, "/emails/batch", method === "PATCH" ? {} : undefined);
      expect(res.status, method).toBe(405);
      expect(await res.json()).toMatchObject({ statusCode: 405, name: "method_not_allowed" });
    }
  });

  it("sends X-Content-Type-Options: nosniff with every answer: JSON, errors, the dashboard", async () => {
    const answers = [
      await callWithKey(key, "GET", "/emails?limit=1"),
      await callWithKey(key, "GET", "/emails/not-an-id"),
      await callWithKey(key, "DELETE", "/emails"),
      await callWithKey(key, "GET", "/no-such-endpoint"),
      await callWithKey("re_wrong", "GET", "/emails"),
      await callWithKey(key, "GET", "/relay/dashboard/"),
    ];
    for (const res of answers)
      expect(res.headers.get("x-content-type-options"), `${res.status} ${res.url}`).toBe("nosniff");
  });
});
