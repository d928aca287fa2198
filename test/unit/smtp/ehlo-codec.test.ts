import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeUtf8, encodeBase64, encodeUtf8 } from "../../../worker/smtp/core/codec";
import {
  chooseAuthMechanism,
  formatAuthPlain,
  formatMailFrom,
  isSafeAddress,
  messageNeedsSmtpUtf8,
} from "../../../worker/smtp/core/commands";
import { createEmptyCapabilities, parseEhloReply } from "../../../worker/smtp/core/ehlo";
import { createReplyParser, feedReplyParser } from "../../../worker/smtp/core/reply";
import { isTooManyRecipients } from "../../../worker/smtp/core/recipients";

/** Parses one reply from text. */
function reply(text: string) {
  const got = feedReplyParser(createReplyParser(), text).replies[0];
  if (!got) throw new Error(`no reply in ${text}`);
  return got;
}

describe("EHLO extensions", () => {
  it.each([
    { name: "nothing", ehlo: "250 mx.test\r\n", want: {} },
    {
      name: "Postfix-like list",
      ehlo:
        "250-mx.test\r\n250-PIPELINING\r\n250-SIZE 10240000\r\n250-VRFY\r\n250-ETRN\r\n250-STARTTLS\r\n" +
        "250-AUTH PLAIN LOGIN\r\n250-ENHANCEDSTATUSCODES\r\n250-8BITMIME\r\n250-DSN\r\n250 SMTPUTF8\r\n",
      want: {
        pipelining: true,
        size: true,
        sizeLimitBytes: 10240000,
        startTls: true,
        authMechanisms: ["PLAIN", "LOGIN"],
        enhancedStatusCodes: true,
        eightBitMime: true,
        smtpUtf8: true,
      },
    },
    {
      name: "lower case",
      ehlo: "250-mx\r\n250-pipelining\r\n250 auth login\r\n",
      want: { pipelining: true, authMechanisms: ["LOGIN"] },
    },
    { name: "SIZE without limit", ehlo: "250-mx\r\n250 SIZE\r\n", want: { size: true } },
    { name: "SIZE 0", ehlo: "250-mx\r\n250 SIZE 0\r\n", want: { size: true } },
    { name: "SIZE garbage", ehlo: "250-mx\r\n250 SIZE lots\r\n", want: { size: true } },
    {
      name: "old AUTH= syntax merged without duplicates",
      ehlo: "250-mx\r\n250-AUTH=LOGIN PLAIN\r\n250 AUTH PLAIN CRAM-MD5\r\n",
      want: { authMechanisms: ["LOGIN", "PLAIN", "CRAM-MD5"] },
    },
    {
      name: "keyword in greeting line is ignored",
      ehlo: "250-PIPELINING\r\n250 8BITMIME\r\n",
      want: { eightBitMime: true },
    },
  ])("reads $name", ({ ehlo, want }) => {
    expect(parseEhloReply(reply(ehlo))).toEqual({ ...createEmptyCapabilities(), ...want });
  });
});

describe("commands", () => {
  const env = {
    id: "m",
    mailFrom: "a@b.test",
    rcptTo: ["c@d.test"],
    sizeBytes: 10,
    eightBitMime: true,
    smtpUtf8: false,
  };

  it("adds only announced parameters to MAIL FROM", () => {
    expect(formatMailFrom(env, createEmptyCapabilities())).toBe("MAIL FROM:<a@b.test>\r\n");
    expect(formatMailFrom(env, { ...createEmptyCapabilities(), size: true, eightBitMime: true, smtpUtf8: true })).toBe(
      "MAIL FROM:<a@b.test> SIZE=10 BODY=8BITMIME\r\n",
    );
    expect(formatMailFrom({ ...env, mailFrom: "" }, createEmptyCapabilities())).toBe("MAIL FROM:<>\r\n");
  });

  it.each([
    { addr: "user@example.org", safe: true },
    { addr: "", safe: true },
    { addr: '"a b"@example.org', safe: true },
    { addr: "δοκιμή@παράδειγμα.δοκιμή", safe: true },
    { addr: "a@b>\r\nRSET", safe: false },
    { addr: "a\n@b", safe: false },
    { addr: "a<b@c", safe: false },
    { addr: "a\0@b", safe: false },
  ])("judges $addr safe=$safe", ({ addr, safe }) => {
    expect(isSafeAddress(addr)).toBe(safe);
  });

  it("detects SMTPUTF8 need from the envelope", () => {
    expect(messageNeedsSmtpUtf8(env)).toBe(false);
    expect(messageNeedsSmtpUtf8({ ...env, rcptTo: ["ü@x.test"] })).toBe(true);
    expect(messageNeedsSmtpUtf8({ ...env, smtpUtf8: true })).toBe(true);
  });

  it.each([
    { offered: ["LOGIN", "PLAIN"], want: "PLAIN" },
    { offered: ["LOGIN"], want: "LOGIN" },
    { offered: ["CRAM-MD5", "XOAUTH2"], want: null },
    { offered: [], want: null },
  ])("chooses $want from $offered", ({ offered, want }) => {
    expect(chooseAuthMechanism(offered)).toBe(want);
  });

  it("builds the RFC 4616 PLAIN token with UTF-8 credentials", () => {
    const got = formatAuthPlain({ username: "jöe", password: "pä$$" });
    expect(got).toBe(`AUTH PLAIN ${Buffer.from("\0jöe\0pä$$", "utf8").toString("base64")}\r\n`);
  });

  it.each([
    { name: "452 with 4.5.3", text: "452 4.5.3 Too many recipients", want: true },
    { name: "452 without enhanced code", text: "452 Too many", want: true },
    { name: "452 mailbox full", text: "452 4.2.2 Mailbox full", want: false },
    { name: "552 with 5.5.3", text: "552 5.5.3 Too many recipients", want: true },
    { name: "552 with the words", text: "552 too many recipients", want: true },
    { name: "552 mailbox full", text: "552 5.2.2 Mailbox full", want: false },
    { name: "550 with the words", text: "550 too many recipients", want: false },
  ])("recognises too-many-recipients: $name", ({ text, want }) => {
    expect(isTooManyRecipients(reply(`${text}\r\n`))).toBe(want);
  });
});

describe("codec", () => {
  it("encodes and decodes UTF-8 exactly like Node for well-formed strings", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 50 }), (s) => {
        const bytes = encodeUtf8(s);
        expect(Buffer.from(bytes)).toEqual(Buffer.from(s, "utf8"));
        expect(decodeUtf8(bytes)).toBe(s);
      }),
      { numRuns: 500 },
    );
  });

  it("decodes arbitrary bytes like Node's lenient decoder", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        expect(decodeUtf8(bytes)).toBe(new TextDecoder().decode(bytes));
      }),
      { numRuns: 2000 },
    );
  });

  it("turns lone surrogates into U+FFFD", () => {
    expect(decodeUtf8(encodeUtf8("a\ud800b"))).toBe("a\ufffdb");
  });

  it("encodes base64 like Node", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        expect(encodeBase64(bytes)).toBe(Buffer.from(bytes).toString("base64"));
      }),
      { numRuns: 500 },
    );
  });
});
