import PostalMime from "postal-mime";
import { describe, expect, it } from "vitest";
import { compose, formatDate, type SendRequest } from "../../../worker/mail/compose";
import { isMailInputError, type MailInputError } from "../../../worker/mail/errors";

const NOW = new Date(Date.UTC(2026, 0, 2, 3, 4, 5));
const OPTS = { now: NOW, messageId: "0000-1" };
const base: SendRequest = { from: "Acme <no-reply@acme.com>", to: "a@x.com", subject: "Hello" };
const b64 = (s: string) => Buffer.from(s).toString("base64");

function errorOf(input: SendRequest): MailInputError {
  try {
    compose(input, OPTS);
  } catch (e) {
    if (isMailInputError(e)) return e;
    throw e;
  }
  throw new Error("expected a MailInputError");
}

/** The Content-Type values of every entity, in order, as a compact outline. */
function outline(raw: string): string[] {
  return [...raw.matchAll(/^Content-Type: ([a-z]+\/[a-z0-9.+-]+)/gim)].map((m) => m[1]!.toLowerCase());
}

describe("compose", () => {
  it("renders a text+html message exactly, deterministically and without tags", () => {
    const input = {
      ...base,
      text: "Hi there.\n",
      html: "<p>Hi there.</p>",
      tags: [{ name: "category", value: "welcome" }],
    };
    const { raw, messageId } = compose(input, OPTS);
    expect(raw).toBe(compose(input, OPTS).raw);
    expect(messageId).toBe("<0000-1@acme.com>");
    expect(raw.split("\r\n")).toEqual([
      "From: Acme <no-reply@acme.com>",
      "To: a@x.com",
      "Subject: Hello",
      "Date: Fri, 02 Jan 2026 03:04:05 +0000",
      "Message-ID: <0000-1@acme.com>",
      "MIME-Version: 1.0",
      'Content-Type: multipart/alternative; boundary="=_cohort_00001_0"',
      "",
      "--=_cohort_00001_0",
      "Content-Type: text/plain; charset=utf-8",
      "Content-Transfer-Encoding: quoted-printable",
      "",
      "Hi there.",
      "",
      "--=_cohort_00001_0",
      "Content-Type: text/html; charset=utf-8",
      "Content-Transfer-Encoding: quoted-printable",
      "",
      "<p>Hi there.</p>",
      "--=_cohort_00001_0--",
      "",
    ]);
  });

  const png = { content: b64("png"), filename: "logo.png", content_id: "logo" };
  const pdf = { content: b64("%PDF"), filename: "a.pdf" };
  it.each([
    { name: "text only", input: { text: "t" }, want: ["text/plain"] },
    { name: "html only", input: { html: "<b>h</b>" }, want: ["text/html"] },
    { name: "neither (empty text part)", input: {}, want: ["text/plain"] },
    {
      name: "text and html",
      input: { text: "t", html: "h" },
      want: ["multipart/alternative", "text/plain", "text/html"],
    },
    {
      name: "html with a cid image",
      input: { html: "h", attachments: [png] },
      want: ["multipart/related", "text/html", "image/png"],
    },
    {
      name: "text, html, cid image and a file",
      input: { text: "t", html: "h", attachments: [png, pdf] },
      want: [
        "multipart/mixed",
        "multipart/alternative",
        "text/plain",
        "multipart/related",
        "text/html",
        "image/png",
        "application/pdf",
      ],
    },
    {
      name: "text with a file",
      input: { text: "t", attachments: [pdf] },
      want: ["multipart/mixed", "text/plain", "application/pdf"],
    },
    {
      name: "text with a cid image but no html",
      input: { text: "t", attachments: [png] },
      want: ["multipart/mixed", "text/plain", "image/png"],
    },
  ])("builds the MIME tree for $name", ({ input, want }) => {
    expect(outline(compose({ ...base, ...input }, OPTS).raw)).toEqual(want);
  });

  it("keeps Bcc out of the headers but in the envelope", () => {
    const { raw, envelope } = compose({ ...base, text: "t", bcc: ["secret@hidden.org"] }, OPTS);
    expect(raw).not.toMatch(/bcc|secret@hidden\.org/i);
    expect(envelope.rcptTo).toEqual(["a@x.com", "secret@hidden.org"]);
  });

  it("folds a long ASCII subject at spaces within 78 columns and unfolds to the original", async () => {
    const subject = Array.from({ length: 40 }, (_, i) => `word${i}`).join(" ");
    const { raw } = compose({ ...base, subject, text: "t" }, OPTS);
    const head = raw.slice(0, raw.indexOf("\r\n\r\n"));
    for (const line of head.split("\r\n")) expect(line.length).toBeLessThanOrEqual(78);
    expect((await PostalMime.parse(raw)).subject).toBe(subject);
  });

  it.each([
    { name: "non-ASCII", subject: "Grüße 🎉", encoded: true },
    { name: "an encoded-word lookalike", subject: "=?UTF-8?B?SGk=?=", encoded: true },
    { name: "leading whitespace", subject: "  indented", encoded: true },
    { name: "plain ASCII", subject: "Plain subject", encoded: false },
  ])("encodes a subject with $name only when needed", async ({ subject, encoded }) => {
    const { raw } = compose({ ...base, subject, text: "t" }, OPTS);
    expect(/^Subject: =\?UTF-8\?B\?/m.test(raw)).toBe(encoded);
    expect((await PostalMime.parse(raw)).subject).toBe(subject);
  });

  it("formats dates per RFC 5322 in UTC", () => {
    expect(formatDate(new Date(Date.UTC(2026, 7, 5, 11, 52, 1)))).toBe("Wed, 05 Aug 2026 11:52:01 +0000");
    expect(formatDate(new Date(Date.UTC(1999, 11, 31, 23, 59, 59)))).toBe("Fri, 31 Dec 1999 23:59:59 +0000");
  });

  it("lets a custom Message-ID replace the generated one and adds other custom headers in order", () => {
    const { raw, messageId } = compose(
      {
        ...base,
        text: "t",
        headers: {
          "Message-ID": "<thread-1@acme.com>",
          "X-B": "2",
          "X-A": "1",
          "List-Unsubscribe": "<https://acme.com/u>",
        },
      },
      OPTS,
    );
    expect(messageId).toBe("<thread-1@acme.com>");
    expect(raw.match(/^Message-ID:.*$/gim)).toEqual(["Message-ID: <thread-1@acme.com>"]);
    expect(raw.indexOf("X-B: 2")).toBeLessThan(raw.indexOf("X-A: 1"));
    expect(raw).toContain("List-Unsubscribe: <https://acme.com/u>\r\n");
  });

  it.each([
    "Content-Type",
    "content-transfer-encoding",
    "MIME-Version",
    "Bcc",
    "DKIM-Signature",
    "From",
    "To",
    "Cc",
    "Subject",
    "Reply-To",
    "Date",
    "Content-Disposition",
    "Received",
    "Return-Path",
    // Issue 12's probe: these passed as custom headers.
    "Sender",
    "Resent-Bcc",
    "Resent-From",
    "resent-to",
    "Resent-Sender",
    "Resent-Message-ID",
  ])("refuses the structural or field-backed custom header %s", (name) => {
    const err = errorOf({ ...base, text: "t", headers: { [name]: "x" } });
    expect(err.field).toBe(`headers.${name}`);
    expect(err.status).toBe(422);
  });

  it.each<{ name: string; headers: Record<string, string>; field: string }>([
    { name: "a space in the name", headers: { "X Bad": "v" }, field: "headers.X Bad" },
    { name: "a colon in the name", headers: { "X:Bad": "v" }, field: "headers.X:Bad" },
    { name: "a non-ASCII name", headers: { "X-Ünï": "v" }, field: "headers.X-Ünï" },
    { name: "an empty name", headers: { "": "v" }, field: "headers." },
    { name: "a malformed Message-ID", headers: { "Message-ID": "no-brackets@x.com" }, field: "headers.Message-ID" },
    { name: "a non-string value", headers: { "X-N": 5 as unknown as string }, field: "headers.X-N" },
  ])("rejects a custom header with $name", ({ headers, field }) => {
    expect(errorOf({ ...base, text: "t", headers }).field).toBe(field);
  });

  it.each([
    {
      name: "missing content (path only)",
      att: { path: "https://x/y.pdf", filename: "y.pdf" },
      field: "attachments[0].content",
    },
    { name: "invalid base64", att: { content: "not base64!", filename: "y.pdf" }, field: "attachments[0].content" },
    {
      name: "a malformed content_type",
      att: { content: b64("x"), content_type: "pdf" },
      field: "attachments[0].content_type",
    },
    {
      name: "a content_id with spaces",
      att: { content: b64("x"), content_id: "a b" },
      field: "attachments[0].content_id",
    },
  ])("rejects an attachment with $name as invalid_attachment", ({ att, field }) => {
    const err = errorOf({ ...base, text: "t", attachments: [att] });
    expect(err.field).toBe(field);
    expect(err.errorName).toBe("invalid_attachment");
  });

  it("requires at least one recipient", () => {
    expect(errorOf({ from: "a@x.com", to: [], subject: "s", text: "t" }).field).toBe("to");
  });

  it("wraps attachment base64 at 76 columns, guesses types and keeps media-type parameters", async () => {
    const bytes = new Uint8Array(1000).map((_, i) => (i * 7) % 256);
    const { raw } = compose(
      {
        ...base,
        text: "t",
        attachments: [
          { content: Buffer.from(bytes).toString("base64"), filename: "data.zip" },
          { content: b64("a,b"), filename: "r.csv", content_type: "text/csv; charset=utf-8" },
        ],
      },
      OPTS,
    );
    const b64Lines = raw.split("\r\n").filter((l) => /^[A-Za-z0-9+/=]{60,}$/.test(l));
    expect(b64Lines.length).toBeGreaterThan(10);
    for (const l of b64Lines) expect(l.length).toBeLessThanOrEqual(76);
    expect(raw).toContain('Content-Type: application/zip; name="data.zip"');
    expect(raw).toContain('Content-Type: text/csv; charset=utf-8; name="r.csv"');
    const parsed = await PostalMime.parse(raw);
    expect(new Uint8Array(parsed.attachments[0]!.content as ArrayBuffer)).toEqual(bytes);
  });

  it("sends message/rfc822 and multipart attachments as they are (7bit, or 8bit for UTF-8), never base64 (RFC 2045 §6.4)", async () => {
    const forwarded = "From: Ann <ann@example.org>\nTo: bob@example.com\nSubject: Original\n\nThe original text.\n";
    const signed =
      "--b1\r\nContent-Type: text/plain\r\n\r\nsigned\r\n--b1\r\nContent-Type: application/pgp-signature\r\n\r\nsig\r\n--b1--\r\n";
    const utf8 = "From: zoë@example.org\r\nSubject: Grüße\r\n\r\nÜber\r\n";
    const out = compose(
      {
        ...base,
        text: "t",
        attachments: [
          { content: b64(forwarded), filename: "original.eml", content_type: "message/rfc822" },
          {
            content: b64(signed),
            content_type: 'multipart/signed; boundary="b1"; protocol="application/pgp-signature"',
          },
          { content: Buffer.from(utf8).toString("base64"), filename: "intl.eml", content_type: "message/rfc822" },
        ],
      },
      OPTS,
    );
    const parts = out.raw.split(/\r\n--=_cohort_[^\r\n]*\r\n/);
    const part = (type: string) => parts.find((p) => p.startsWith(`Content-Type: ${type}`))!;
    expect(part('message/rfc822; name="original.eml"')).toMatch(
      /^Content-Type: message\/rfc822; name="original\.eml"\r\nContent-Transfer-Encoding: 7bit\r\n/,
    );
    expect(part('message/rfc822; name="original.eml"')).toContain(
      "\r\n\r\nFrom: Ann <ann@example.org>\r\nTo: bob@example.com\r\nSubject: Original\r\n\r\nThe original text.\r\n",
    );
    expect(part("multipart/signed")).toMatch(
      /Content-Transfer-Encoding: 7bit\r\n[^]*\r\n\r\n--b1\r\nContent-Type: text\/plain/,
    );
    expect(part('message/rfc822; name="intl.eml"')).toMatch(/Content-Transfer-Encoding: 8bit\r\n[^]*Subject: Grüße/);
    expect(out.eightBit).toBe(true);
    const parsed = await PostalMime.parse(new TextEncoder().encode(out.raw), { forceRfc822Attachments: true });
    // A parser reads the multipart as MIME now (its signature part comes out), and each message whole.
    expect(parsed.attachments.map((a) => a.mimeType)).toEqual([
      "message/rfc822",
      "application/pgp-signature",
      "message/rfc822",
    ]);
    expect(
      compose({ ...base, text: "t", attachments: [{ content: b64(forwarded), content_type: "message/rfc822" }] }, OPTS)
        .eightBit,
    ).toBe(false);
  });

  it.each([
    [
      "bytes that are not UTF-8",
      Buffer.from([0x46, 0x72, 0x6f, 0x6d, 0x3a, 0x20, 0xe9, 0x0d, 0x0a]).toString("base64"),
      "message/rfc822",
      /7-bit or UTF-8/,
    ],
    [
      "a line over 998 octets",
      Buffer.from(`Subject: ${"x".repeat(1000)}\r\n\r\nb`).toString("base64"),
      "message/rfc822",
      /998 octets/,
    ],
    [
      "a multipart without its boundary",
      Buffer.from("--x\r\n\r\na\r\n--x--").toString("base64"),
      "multipart/mixed",
      /boundary/,
    ],
  ])("refuses a composite attachment with %s (it cannot be sent base64)", (_, content, content_type, message) => {
    expect(errorOf({ ...base, text: "t", attachments: [{ content, content_type }] })).toMatchObject({
      field: "attachments[0].content",
      message: expect.stringMatching(message),
    });
  });

  it("escapes dot-leading lines and wraps lines over 998 characters in the text part", () => {
    const { raw } = compose({ ...base, text: `.\n.hidden\n${"x".repeat(5000)}` }, OPTS);
    const bodyLines = raw.slice(raw.indexOf("\r\n\r\n") + 4).split("\r\n");
    expect(bodyLines.some((l) => l.startsWith("."))).toBe(false);
    for (const l of bodyLines) expect(l.length).toBeLessThanOrEqual(76);
  });

  it("uses base64 for text that is mostly non-ASCII", () => {
    const { raw } = compose({ ...base, text: "日本語のテキスト".repeat(20) }, OPTS);
    expect(raw).toContain("Content-Transfer-Encoding: base64");
  });

  it("rejects an invalid clock or message id as a caller bug (RangeError)", () => {
    expect(() => compose({ ...base, text: "t" }, { now: new Date(NaN), messageId: "m" })).toThrow(RangeError);
    expect(() => compose({ ...base, text: "t" }, { now: NOW, messageId: "has space" })).toThrow(RangeError);
  });
});
