/** POST /relay/messages/raw: relaying an already composed RFC 5322 message with its envelope. */
import { env } from "cloudflare:test";
import PostalMime from "postal-mime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callWithKey, classified, newKey, settle } from "./helpers";

let key: string;
beforeAll(async () => {
  key = await newKey("acme");
});
afterAll(() => settle());

const MESSAGE = [
  "From: Ann Sender <ann@acme.test>",
  "To: Bob <bob@example.com>",
  "Subject: =?UTF-8?B?R3LDvMOfZQ==?=",
  "MIME-Version: 1.0",
  "Content-Type: text/plain; charset=utf-8",
  "",
  "Hello Bob,",
  "bye",
  "",
].join("\n");

describe("POST /relay/messages/raw", () => {
  it("relays a composed message to the envelope recipients, adding Date and Message-ID and CRLF line ends", async () => {
    const res = await callWithKey(key, "POST", "/relay/messages/raw", {
      mail_from: "bounces@acme.test",
      rcpt_to: ["bob@example.com", "hidden@example.org"],
      message: MESSAGE,
    });
    expect(res.status).toBe(200);
    const { id } = await res.json<{ id: string }>();
    const stored = await (await env.BODIES.get(`mess/${id}`))!.text();
    expect(stored).toMatch(/^Date: .+\r\nMessage-ID: <[0-9a-f-]+@acme\.test>\r\nFrom: Ann Sender/);
    expect(stored).not.toMatch(/[^\r]\n/);
    const parsed = await PostalMime.parse(stored);
    expect(parsed.subject).toBe("Grüße");
    expect(parsed.text).toBe("Hello Bob,\nbye\n");
    const body = await classified(key, id);
    expect(body).toMatchObject({
      from: "Ann Sender <ann@acme.test>",
      to: ["bob@example.com"],
      bcc: ["hidden@example.org"],
      subject: "Grüße",
    });
    expect(body.recipients.map((r) => [r.email, r.status])).toEqual([
      ["bob@example.com", "ready"],
      ["hidden@example.org", "ready"],
    ]);
  });

  it("accepts base64 octets and keeps an existing Message-ID", async () => {
    const msg =
      "From: a@acme.test\r\nMessage-ID: <keep-me@acme.test>\r\nDate: Tue, 05 Aug 2026 11:52:01 +0000\r\n\r\n8bit: \xe9\r\n";
    const res = await callWithKey(key, "POST", "/relay/messages/raw", {
      mail_from: "a@acme.test",
      rcpt_to: "b@example.com",
      message: btoa(msg),
      encoding: "base64",
    });
    expect(res.status).toBe(200);
    const { id } = await res.json<{ id: string }>();
    const stored = new Uint8Array(await (await env.BODIES.get(`mess/${id}`))!.arrayBuffer());
    expect(String.fromCharCode(...stored)).toBe(msg);
    expect((await classified(key, id)).message_id).toBe("<keep-me@acme.test>");
  });

  it.each([
    {
      name: "no From header",
      body: { mail_from: "a@acme.test", rcpt_to: "b@example.com", message: "Subject: x\r\n\r\nhi" },
      status: 422,
      error: "validation_error",
      message: /From/,
    },
    {
      name: "a header line over 998 octets",
      body: {
        mail_from: "a@acme.test",
        rcpt_to: "b@example.com",
        message: `From: a@acme.test\r\nX-Long: ${"y".repeat(1000)}\r\n\r\nhi`,
      },
      status: 422,
      error: "validation_error",
      message: /998/,
    },
    {
      name: "a line that is not a header",
      body: {
        mail_from: "a@acme.test",
        rcpt_to: "b@example.com",
        message: "From: a@acme.test\r\nnot a header\r\n\r\nhi",
      },
      status: 422,
      error: "validation_error",
      message: /not a header field/,
    },
    {
      name: "a bad envelope recipient",
      body: { mail_from: "a@acme.test", rcpt_to: ["b@example.com", "bad@"], message: "From: a@acme.test\r\n\r\nhi" },
      status: 422,
      error: "validation_error",
      message: /rcpt_to\[1\]/,
    },
    {
      name: "a bad envelope sender",
      body: { mail_from: "nope", rcpt_to: "b@example.com", message: "From: a@acme.test\r\n\r\nhi" },
      status: 422,
      error: "validation_error",
      message: /mail_from/,
    },
    {
      name: "bad base64",
      body: { mail_from: "a@acme.test", rcpt_to: "b@example.com", message: "***", encoding: "base64" },
      status: 422,
      error: "validation_error",
      message: /base64/,
    },
    {
      name: "a missing message",
      body: { mail_from: "a@acme.test", rcpt_to: "b@example.com" },
      status: 422,
      error: "missing_required_field",
      message: /message/,
    },
    {
      name: "51 recipients",
      body: {
        mail_from: "a@acme.test",
        rcpt_to: Array.from({ length: 51 }, (_, i) => `u${i}@example.com`),
        message: "From: a@acme.test\r\n\r\nhi",
      },
      status: 422,
      error: "validation_error",
      message: /limit is 50/,
    },
    {
      name: "a message over MAX_MESSAGE_BYTES",
      body: {
        mail_from: "a@acme.test",
        rcpt_to: "b@example.com",
        message: `From: a@acme.test\r\n\r\n${`${"z".repeat(98)}\r\n`.repeat(2_100)}`,
      },
      status: 413,
      error: "validation_error",
      message: /limit/,
    },
    // Issue 12's probe: each of these was accepted.
    {
      name: "an empty From",
      body: { mail_from: "a@acme.test", rcpt_to: "b@example.com", message: "From: \r\n\r\nhi" },
      status: 422,
      error: "validation_error",
      message: /From field without a valid address/,
    },
    {
      name: "two From fields",
      body: {
        mail_from: "a@acme.test",
        rcpt_to: "b@example.com",
        message: "From: a@acme.test\r\nFrom: ceo@other.test\r\n\r\nhi",
      },
      status: 422,
      error: "validation_error",
      message: /more than one From/,
    },
    {
      name: "a From that is not an address",
      body: { mail_from: "a@acme.test", rcpt_to: "b@example.com", message: "From: not an address\r\n\r\nhi" },
      status: 422,
      error: "validation_error",
      message: /From field without a valid address/,
    },
    {
      name: "a NUL octet",
      body: { mail_from: "a@acme.test", rcpt_to: "b@example.com", message: "From: a@acme.test\r\n\r\nhi\u0000there" },
      status: 422,
      error: "validation_error",
      message: /NUL/,
    },
    {
      name: "a body line over 998 octets",
      body: {
        mail_from: "a@acme.test",
        rcpt_to: "b@example.com",
        message: `From: a@acme.test\r\n\r\n${"w".repeat(5000)}`,
      },
      status: 422,
      error: "validation_error",
      message: /998/,
    },
  ])("rejects $name with $status $error", async ({ body, status, error, message }) => {
    const res = await callWithKey(key, "POST", "/relay/messages/raw", body);
    expect(res.status).toBe(status);
    expect(await res.json()).toEqual({ statusCode: status, name: error, message: expect.stringMatching(message) });
  });

  it("removes Bcc and Resent-Bcc fields, folded lines included, as Postfix's cleanup does: the envelope still reaches every recipient", async () => {
    const msg =
      "From: a@acme.test\r\nTo: b@example.com\r\nBcc: secret@example.org,\r\n  other@example.org\r\nResent-Bcc: x@example.org\r\nSubject: s\r\n\r\nhi\r\n";
    const res = await callWithKey(key, "POST", "/relay/messages/raw", {
      mail_from: "a@acme.test",
      rcpt_to: ["b@example.com", "secret@example.org"],
      message: msg,
    });
    expect(res.status).toBe(200);
    const { id } = await res.json<{ id: string }>();
    const stored = await (await env.BODIES.get(`mess/${id}`))!.text();
    // Field names and the hidden addresses, not any "bcc" (a random Message-ID may contain it).
    expect(stored).not.toMatch(/^(resent-)?bcc\s*:/im);
    expect(stored).not.toMatch(/secret@|other@example|x@example/i);
    expect(stored).toMatch(/\r\nTo: b@example.com\r\nSubject: s\r\n\r\nhi\r\n$/);
    expect((await classified(key, id)).recipients.map((r) => r.email)).toEqual(["b@example.com", "secret@example.org"]);
  });

  it("answers 405 for GET", async () => {
    expect((await callWithKey(key, "GET", "/relay/messages/raw")).status).toBe(405);
  });
});
