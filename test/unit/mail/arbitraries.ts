/**
 * fast-check arbitraries for mail tests: Unicode text without CR/LF/NUL, multi-line bodies with
 * dot-leading and over-long lines, header-safe values, addresses and binary attachments.
 */
import fc from "fast-check";

const range = (min: number, max: number) => fc.integer({ min, max }).map((c) => String.fromCodePoint(c));

/** One "character" from the scripts and specials that stress header encoding. */
export const unicodeChar: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: range(0x20, 0x7e) },
  range(0xa0, 0x24f), // Latin-1 and Latin Extended
  range(0x4e00, 0x9fff), // CJK
  range(0x3040, 0x30ff), // kana
  range(0x05d0, 0x05ea), // Hebrew (RTL)
  range(0x0621, 0x064a), // Arabic (RTL)
  range(0x1f300, 0x1f64f), // emoji (astral plane: surrogate pairs)
  fc.constantFrom(
    "\t",
    '"',
    "\\",
    "<",
    ">",
    ",",
    ";",
    ":",
    "@",
    "(",
    ")",
    "=?",
    "?=",
    "=",
    "_",
    " ",
    "  ",
    "\u200f",
    "\u202e",
    "e\u0301",
    "👨‍👩‍👧",
    "🇫🇷",
    "\u00a0",
    "\u2028",
    "\x01",
    "\x7f",
    "\x1b",
  ),
);

/** Arbitrary single-line Unicode text (no CR, LF or NUL). */
export function unicodeText(maxLength: number): fc.Arbitrary<string> {
  return fc.string({ unit: unicodeChar, maxLength });
}

/** A very long single-line text, optionally over 998 characters with no break opportunity. */
export const longText: fc.Arbitrary<string> = fc.oneof(
  fc.integer({ min: 990, max: 2500 }).map((n) => "x".repeat(n)),
  fc.tuple(unicodeText(20), fc.integer({ min: 80, max: 400 })).map(([t, n]) => (t + " ").repeat(n)),
);

/** A body line: plain, dot-leading, "From "-leading, whitespace-trailing or over-long. */
const bodyLine: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: unicodeText(120) },
  unicodeText(40).map((t) => "." + t),
  fc.constant("."),
  unicodeText(40).map((t) => "From " + t),
  unicodeText(40).map((t) => t + "  \t"),
  fc.integer({ min: 999, max: 3000 }).map((n) => "y".repeat(n)),
  fc.integer({ min: 400, max: 1200 }).map((n) => "é世".repeat(n)),
);

/** A multi-line body joined with LF, CRLF or CR. */
export const body: fc.Arbitrary<string> = fc
  .tuple(fc.array(bodyLine, { maxLength: 12 }), fc.constantFrom("\n", "\r\n", "\r"))
  .map(([lines, nl]) => lines.join(nl));

/** A simple ASCII address; the domain is lower-case so it survives unchanged. */
export const address: fc.Arbitrary<string> = fc
  .tuple(
    fc.stringMatching(/^[a-z0-9][a-z0-9._+-]{0,20}[a-z0-9]$/).filter((s) => !s.includes("..")),
    fc.stringMatching(/^[a-z][a-z0-9-]{0,15}[a-z0-9]$/),
    fc.constantFrom("com", "org", "example", "io"),
  )
  .map(([l, d, t]) => `${l}@${d}.${t}`);

/** A mailbox as `"Name" <addr>` (quotes and backslashes escaped) plus the expected parse. */
export const mailbox: fc.Arbitrary<{ raw: string; name: string; address: string }> = fc
  .tuple(
    fc.oneof(
      unicodeText(40),
      longText.map((t) => [...t].slice(0, 300).join("")),
    ),
    address,
  )
  .map(([name, addr]) => ({
    raw: `"${name.replace(/(["\\])/g, "\\$1")}" <${addr}>`,
    name: name.trim(),
    address: addr,
  }));

/** Custom header names (unique case-insensitively) and values. */
export const customHeaders: fc.Arbitrary<Record<string, string>> = fc
  .uniqueArray(fc.tuple(fc.stringMatching(/^X-[A-Za-z0-9-]{1,20}$/), fc.oneof(unicodeText(80), longText)), {
    maxLength: 4,
    selector: ([k]) => k.toLowerCase(),
  })
  .map((entries) => Object.fromEntries(entries));

/** A binary attachment: random bytes, a Unicode filename, a media type and maybe a content id. */
export const attachment = fc.record({
  bytes: fc.uint8Array({ maxLength: 3000 }),
  filename: fc.oneof(
    unicodeText(30)
      .filter((s) => s.trim() !== "")
      .map((s) => s + ".bin"),
    fc.integer({ min: 70, max: 200 }).map((n) => "ü".repeat(n) + ".pdf"),
  ),
  contentType: fc.constantFrom(
    "application/octet-stream",
    "application/pdf",
    "image/png",
    "image/jpeg",
    "application/zip",
  ),
  contentId: fc.option(fc.stringMatching(/^[A-Za-z0-9._-]{1,30}(@[a-z]{1,10})?$/), { nil: undefined }),
});
