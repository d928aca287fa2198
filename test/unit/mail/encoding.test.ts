import fc from "fast-check";
import { decodeWords } from "postal-mime";
import { describe, expect, it } from "vitest";
import { base64Lines, base64ToBytes, encodeQuotedPrintable, normalizeNewlines } from "../../../worker/mail/encoding";
import { encodeWords, foldHeader, paramTokens, unstructuredTokens } from "../../../worker/mail/header";
import { body, unicodeText } from "./arbitraries";

/** A strict RFC 2045 quoted-printable decoder, independent of the encoder under test. */
function decodeQp(qp: string): Uint8Array {
  const out: number[] = [];
  const lines = qp.split("\r\n");
  lines.forEach((line, i) => {
    const soft = line.endsWith("=");
    const content = soft ? line.slice(0, -1) : line;
    for (let j = 0; j < content.length; j++) {
      if (content[j] === "=") {
        const hex = content.slice(j + 1, j + 3);
        if (!/^[0-9A-F]{2}$/.test(hex)) throw new Error(`bad escape in ${JSON.stringify(line)}`);
        out.push(parseInt(hex, 16));
        j += 2;
      } else {
        out.push(content.charCodeAt(j));
      }
    }
    if (!soft && i < lines.length - 1) out.push(0x0d, 0x0a);
  });
  return new Uint8Array(out);
}

describe("quoted-printable", () => {
  it("round-trips any text as CRLF UTF-8 with ≤ 76-column lines, no trailing whitespace, no leading dot", () => {
    fc.assert(
      fc.property(body, (text) => {
        const qp = encodeQuotedPrintable(text);
        expect(qp).toMatch(/^[\x21-\x7e \t\r\n]*$/);
        expect(qp).not.toContain("=_");
        const bad = qp.split("\r\n").filter((l) => l.length > 76 || /[ \t]$/.test(l) || l.startsWith("."));
        expect(bad).toEqual([]);
        const want = new TextEncoder().encode(normalizeNewlines(text).replace(/\n/g, "\r\n"));
        expect(decodeQp(qp)).toEqual(want);
      }),
      { numRuns: Number(process.env.MAIL_FC_RUNS ?? 300) },
    );
  }, 60_000);

  it.each([
    { name: "a trailing space", text: "a ", want: "a=20" },
    { name: "a leading dot", text: ".x", want: "=2Ex" },
    { name: "an mbox From line", text: "From me", want: "=46rom me" },
    { name: "an equals sign", text: "a=b", want: "a=3Db" },
    { name: "UTF-8", text: "é", want: "=C3=A9" },
    { name: "a 75-column line as it is", text: "a".repeat(75), want: "a".repeat(75) },
    { name: "a 76-column line with a soft break", text: "a".repeat(76), want: `${"a".repeat(75)}=\r\na` },
    { name: "a leading dot on a short line", text: ".hello world", want: "=2Ehello world" },
  ])("encodes $name", ({ text, want }) => {
    expect(encodeQuotedPrintable(text)).toBe(want);
  });
});

describe("base64", () => {
  it("wraps at 76 columns and decodes back to the same bytes", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 5000 }), (bytes) => {
        const lines = base64Lines(bytes);
        for (const l of lines) expect(l.length).toBeLessThanOrEqual(76);
        expect(base64ToBytes(lines.join("\r\n"))).toEqual(bytes);
      }),
    );
  });

  it.each(["abc$", "a", "ab=c", "====", "YQ==="])("rejects malformed base64 %j", (s) => {
    expect(base64ToBytes(s)).toBeNull();
  });
});

describe("header encoding", () => {
  it("splits encoded-words on code points, each ≤ 75 chars, decoding back to the text", () => {
    fc.assert(
      fc.property(unicodeText(300), (text) => {
        const words = encodeWords(text);
        for (const w of words) expect(w.length).toBeLessThanOrEqual(75);
        expect(decodeWords(words.join(" "))).toBe(text);
      }),
    );
  });

  it("folds unstructured values so unfolding restores them and short tokens stay within 78 columns", () => {
    fc.assert(
      fc.property(unicodeText(400), (text) => {
        const field = foldHeader("Subject", unstructuredTokens(text));
        for (const line of field.split("\r\n")) expect(line.length).toBeLessThanOrEqual(78);
        const value = field.replace(/\r\n/g, "").slice("Subject: ".length);
        expect(decodeWords(value)).toBe(text);
      }),
    );
  });

  it("folds before a first encoded word that would pass 78 columns after the field name (found by the property above)", () => {
    const text = "א 👨‍👩‍👧ء👨‍👩‍👧\t\t";
    const field = foldHeader("Subject", unstructuredTokens(text));
    expect(field.startsWith("Subject:\r\n =?UTF-8?B?")).toBe(true);
    for (const line of field.split("\r\n")) expect(line.length).toBeLessThanOrEqual(78);
    expect(decodeWords(field.replace(/\r\n/g, "").slice("Subject: ".length))).toBe(text);
    expect(foldHeader("Subject", ["x".repeat(100)])).toBe(`Subject: ${"x".repeat(100)}`); // nothing gained by folding
  });

  it.each([
    { name: "short ASCII", value: "a.pdf", want: ['filename="a.pdf"'] },
    { name: "quotes and backslashes", value: 'a"b\\c', want: ['filename="a\\"b\\\\c"'] },
    { name: "non-ASCII", value: "é.pdf", want: ["filename*=UTF-8''%C3%A9.pdf"] },
  ])("renders a $name filename parameter", ({ value, want }) => {
    expect(paramTokens("filename", value)).toEqual(want);
  });

  it("continues long parameters per RFC 2231 without splitting percent escapes", () => {
    const tokens = paramTokens("filename", "é".repeat(40));
    expect(tokens.length).toBeGreaterThan(1);
    tokens.forEach((t, i) => {
      expect(t.startsWith(`filename*${i}*=`)).toBe(true);
      expect(t).toMatch(/^[^%]*(%[0-9A-F]{2}[^%]*)*$/);
    });
  });
});
