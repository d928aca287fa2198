import PostalMime from "postal-mime";
import { describe, expect, it } from "vitest";
import { envelopeOf, parseMailbox, toAsciiDomain } from "../../../worker/mail/address";
import { compose } from "../../../worker/mail/compose";
import { isMailInputError, MailInputError } from "../../../worker/mail/errors";

const NOW = new Date(Date.UTC(2026, 0, 2, 3, 4, 5));

function errorOf(fn: () => unknown): MailInputError {
  try {
    fn();
  } catch (e) {
    if (isMailInputError(e)) return e;
    throw e;
  }
  throw new Error("expected a MailInputError");
}

describe("IDN domains", () => {
  it("converts user@bücher.example to punycode in headers, Message-ID and envelope", async () => {
    const { raw, envelope, messageId } = compose(
      {
        from: "Bücher <shop@bücher.example>",
        to: "user@bücher.example",
        cc: "Ünï <u@BÜCHER.example>",
        subject: "s",
        text: "t",
      },
      { now: NOW, messageId: "id1" },
    );
    expect(raw).toContain("To: user@xn--bcher-kva.example\r\n");
    expect(raw).toContain("<u@xn--bcher-kva.example>");
    expect(raw).not.toMatch(/bücher/i);
    expect(messageId).toBe("<id1@xn--bcher-kva.example>");
    expect(envelope).toEqual({
      mailFrom: "shop@xn--bcher-kva.example",
      rcptTo: ["user@xn--bcher-kva.example", "u@xn--bcher-kva.example"],
    });
    const parsed = await PostalMime.parse(raw);
    expect(parsed.from).toEqual({ name: "Bücher", address: "shop@xn--bcher-kva.example" });
  });

  it.each([
    { name: "German umlaut", input: "bücher.example", want: "xn--bcher-kva.example" },
    { name: "Japanese", input: "例え.テスト", want: "xn--r8jz45g.xn--zckzah" },
    { name: "upper-case ASCII", input: "Example.COM", want: "example.com" },
    { name: "mixed case IDN", input: "BÜCHER.example", want: "xn--bcher-kva.example" },
  ])("maps a $name domain to $want", ({ input, want }) => {
    expect(toAsciiDomain("to", input)).toBe(want);
  });

  it.each([
    { name: "a single label", input: "localhost" },
    { name: "an empty label", input: "a..com" },
    { name: "a trailing dot", input: "a.com." },
    { name: "a leading hyphen", input: "-a.com" },
    { name: "a URL delimiter", input: "evil.com/x" },
    { name: "userinfo", input: "a@b.com" },
    { name: "a numeric TLD", input: "１２７.０.０.１" },
    { name: "an IPv4 literal", input: "127.0.0.1" },
    { name: "a space", input: "bü cher.example" },
  ])("rejects $name", ({ input }) => {
    expect(errorOf(() => toAsciiDomain("to", input)).status).toBe(422);
  });
});

describe("parseMailbox", () => {
  it.each([
    { name: "bare address", raw: "a@x.com", want: { name: "", address: "a@x.com" } },
    { name: "angle address", raw: "<a@x.com>", want: { name: "", address: "a@x.com" } },
    { name: "name and address", raw: "Acme Inc <a@x.com>", want: { name: "Acme Inc", address: "a@x.com" } },
    { name: "quoted name with comma", raw: '"Doe, Jane" <j@x.com>', want: { name: "Doe, Jane", address: "j@x.com" } },
    { name: "escaped quote", raw: '"Say \\"hi\\"" <j@x.com>', want: { name: 'Say "hi"', address: "j@x.com" } },
    { name: "surrounding spaces", raw: "  Ann   <  a@x.com >  ", want: { name: "Ann", address: "a@x.com" } },
    {
      name: "plus tag and dots",
      raw: "first.last+tag@sub.x.com",
      want: { name: "", address: "first.last+tag@sub.x.com" },
    },
    {
      name: "a quoted local part (RFC 5321 §4.1.2)",
      raw: 'John <"john doe"@x.com>',
      want: { name: "John", address: '"john doe"@x.com' },
    },
    {
      name: "a quoted local part with a quoted pair and an @",
      raw: '"a\\"b@c"@x.com',
      want: { name: "", address: '"a\\"b@c"@x.com' },
    },
    { name: "a UTF-8 local part (RFC 6531)", raw: "josé@x.com", want: { name: "", address: "josé@x.com" } },
    {
      name: "a UTF-8 local part and IDN domain",
      raw: "用户@例え.テスト",
      want: { name: "", address: "用户@xn--r8jz45g.xn--zckzah" },
    },
    {
      name: "an IPv4 address literal",
      raw: "postmaster@[93.184.216.34]",
      want: { name: "", address: "postmaster@[93.184.216.34]" },
    },
    {
      name: "an IPv6 address literal",
      raw: "a@[ipv6:2606:4700::AB]",
      want: { name: "", address: "a@[IPv6:2606:4700::ab]" },
    },
  ])("parses $name", ({ raw, want }) => {
    expect(parseMailbox("to", raw)).toEqual(want);
  });

  it.each([
    { name: "no @", raw: "nobody" },
    { name: "empty local part", raw: "@x.com" },
    { name: "double dot", raw: "a..b@x.com" },
    { name: "an unquoted space", raw: "john doe@x.com" },
    { name: "an unbalanced quote", raw: '"john@x.com' },
    { name: "a UTF-8 local part of more than 64 octets", raw: `${"é".repeat(33)}@x.com` },
    { name: "a loopback address literal", raw: "a@[127.0.0.1]" },
    { name: "a private address literal", raw: "a@[10.1.2.3]" },
    { name: "a short IPv4 literal", raw: "a@[1.2.3]" },
    { name: "an IPv6 literal without its tag", raw: "a@[2001:db8::1]" },
    { name: "comma-separated list", raw: "a@x.com, b@x.com" },
    { name: "64+ octet local part", raw: `${"a".repeat(65)}@x.com` },
  ])("rejects $name with 422", ({ raw }) => {
    const err = errorOf(() => parseMailbox("cc[2]", raw));
    expect(err.field).toBe("cc[2]");
    expect(err.errorName).toBe("validation_error");
  });

  it("composes such addresses as they are; a UTF-8 one makes the message 8-bit (RFC 6532)", () => {
    const ascii = compose(
      { from: "a@x.com", to: ['"john doe"@example.com', "b@[93.184.216.34]"], subject: "s", text: "t" },
      { now: NOW, messageId: "id2" },
    );
    expect(ascii.raw).toContain('To: "john doe"@example.com, b@[93.184.216.34]\r\n');
    expect(ascii.envelope.rcptTo).toEqual(['"john doe"@example.com', "b@[93.184.216.34]"]);
    expect(ascii.eightBit).toBe(false);
    const utf8 = compose(
      { from: "a@x.com", to: "josé@example.com", subject: "s", text: "t" },
      { now: NOW, messageId: "id3" },
    );
    expect(utf8.raw).toContain("To: josé@example.com\r\n");
    expect(utf8.eightBit).toBe(true);
  });

  it("reports a bad from address as invalid_from_address", () => {
    expect(errorOf(() => parseMailbox("from", "not an address")).errorName).toBe("invalid_from_address");
  });
});

describe("envelopeOf", () => {
  it("lists to, cc and bcc once each, comparing domains case-insensitively but local parts exactly", () => {
    const env = envelopeOf({
      from: "Acme <no-reply@Acme.com>",
      to: ["a@x.com", "A@x.com"],
      cc: "Dup <a@X.COM>",
      bcc: ["b@y.org", "a@x.com", "B@Y.org"],
    });
    expect(env).toEqual({ mailFrom: "no-reply@acme.com", rcptTo: ["a@x.com", "A@x.com", "b@y.org", "B@y.org"] });
  });

  it("matches the envelope compose returns", () => {
    const input = { from: "f@x.com", to: "t@x.com", cc: ["c@x.com"], bcc: "b@x.com", subject: "s", text: "t" };
    expect(compose(input, { now: NOW, messageId: "m" }).envelope).toEqual(envelopeOf(input));
  });
});
