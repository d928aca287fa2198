import { describe, expect, it } from "vitest";
import {
  isStrictBase64,
  judgeAddress,
  judgeBatch,
  judgeEmail,
  judgeIdempotencyKey,
  judgeRaw,
  type Limits,
} from "../../chaos/core/oracle";

const LIMITS: Limits = { maxRecipients: 50, maxMessageBytes: 1 << 20 };
const base = { from: "Acme <hello@acme.example>", to: ["ann@example.com"], subject: "Hi", text: "Hello" };

describe("the fuzz oracle", () => {
  it.each([
    { name: "bare address", input: "ann@example.com", want: "accept" },
    { name: "display name", input: "Ann Smith <ann@example.com>", want: "accept" },
    { name: "display name with U+2028", input: "Ann\u2028Smith <ann@example.com>", want: "accept" },
    { name: "no domain", input: "ann@", want: "reject" },
    { name: "no at sign", input: "plainaddress", want: "reject" },
    { name: "space in local part", input: "a b@example.com", want: "reject" },
    { name: "double dot", input: "a..b@example.com", want: "reject" },
    { name: "CR/LF injection", input: "ann@example.com\r\nBcc: x@evil.example", want: "reject" },
    { name: "bare LF", input: "Ann\n <ann@example.com>", want: "reject" },
    { name: "local part over 64", input: `${"l".repeat(65)}@example.com`, want: "reject" },
    { name: "unbalanced bracket", input: "Ann <ann@example.com", want: "reject" },
    { name: "internationalized local part", input: "jürgen@example.com", want: "either" },
    { name: "IDN domain", input: "user@bücher.example", want: "either" },
    { name: "hyphen at label start", input: "a@-b.example", want: "reject" },
    { name: "single-label domain", input: "a@localhost", want: "reject" },
  ])("judges the address: $name", ({ input, want }) => {
    expect(judgeAddress(input).expect).toBe(want);
  });

  it.each([
    { name: "a plain valid email", patch: {}, want: "accept" },
    { name: "missing subject", patch: { subject: undefined }, want: "reject" },
    { name: "subject with CR/LF", patch: { subject: "a\r\nBcc: x@evil.example" }, want: "reject" },
    { name: "to of the wrong type", patch: { to: 42 }, want: "reject" },
    { name: "empty to array", patch: { to: [] }, want: "reject" },
    { name: "51 recipients", patch: { to: Array.from({ length: 51 }, (_, i) => `r${i}@example.com`) }, want: "reject" },
    {
      name: "50 recipients counted after de-duplication",
      patch: { to: Array.from({ length: 50 }, (_, i) => `r${i}@example.com`), cc: ["R0@example.com"] },
      want: "accept",
    },
    { name: "header value with LF", patch: { headers: { "X-Ref": "a\nb" } }, want: "reject" },
    { name: "header name with a space", patch: { headers: { "Bad Name": "v" } }, want: "reject" },
    { name: "reserved header name", patch: { headers: { "Message-ID": "<x@y>" } }, want: "either" },
    { name: "tag value outside the alphabet", patch: { tags: [{ name: "a", value: "b c" }] }, want: "reject" },
    {
      name: "attachment with non-base64 content",
      patch: { attachments: [{ filename: "a.txt", content: "!!!" }] },
      want: "reject",
    },
    {
      name: "attachment without padding",
      patch: { attachments: [{ filename: "a.txt", content: "aGVsbG8" }] },
      want: "either",
    },
    {
      name: "attachment filename with CR/LF",
      patch: { attachments: [{ filename: "a\r\n.txt", content: "aGk=" }] },
      want: "reject",
    },
    { name: "unknown field", patch: { x_unknown: 1 }, want: "accept" },
  ])("judges POST /emails: $name", ({ patch, want }) => {
    const value = { ...base, ...patch } as Record<string, unknown>;
    for (const [k, v] of Object.entries(patch)) if (v === undefined) delete value[k];
    expect(judgeEmail(value, LIMITS).expect).toBe(want);
  });

  it("rejects a body that is not JSON or over the size limit", () => {
    expect(judgeEmail(undefined, LIMITS).expect).toBe("reject");
    expect(judgeEmail(base, LIMITS, LIMITS.maxMessageBytes + 1).expect).toBe("reject");
  });

  it("judges batches as a whole and per item", () => {
    expect(judgeBatch([], LIMITS).whole.expect).toBe("reject");
    expect(
      judgeBatch(
        Array.from({ length: 101 }, () => base),
        LIMITS,
      ).whole.expect,
    ).toBe("reject");
    const r = judgeBatch([base, { ...base, from: "nope" }], LIMITS);
    expect(r.whole.expect).toBe("accept");
    expect(r.items.map((i) => i.expect)).toEqual(["accept", "reject"]);
  });

  it.each([
    { name: "valid", patch: {}, want: "accept" },
    { name: "CR/LF in mail_from", patch: { mail_from: "a@example.com\r\nRCPT TO:<x@evil.example>" }, want: "reject" },
    { name: "bad base64 message", patch: { encoding: "base64", message: "%%%" }, want: "reject" },
    { name: "unknown encoding", patch: { encoding: "binary" }, want: "reject" },
    { name: "null reverse path", patch: { mail_from: "" }, want: "either" },
  ])("judges POST /relay/messages/raw: $name", ({ patch, want }) => {
    const raw = {
      mail_from: "a@example.com",
      rcpt_to: ["b@example.com"],
      message: "From: a@example.com\r\nSubject: x\r\n\r\nhi\r\n",
      ...patch,
    };
    expect(judgeRaw(raw, LIMITS).expect).toBe(want);
  });

  it("checks Idempotency-Key length and alphabet, and canonical base64", () => {
    expect(judgeIdempotencyKey("welcome/ann-123").expect).toBe("accept");
    expect(judgeIdempotencyKey("a b").expect).toBe("reject");
    expect(judgeIdempotencyKey("x".repeat(257)).expect).toBe("reject");
    expect(isStrictBase64("aGVsbG8=")).toBe(true);
    expect(isStrictBase64("aGVsbG8")).toBe(false);
  });
});
