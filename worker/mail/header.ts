/**
 * Header-field rendering: injection checks, RFC 2047 encoded-words, folding, MIME parameters,
 * and the policy for caller-supplied custom headers.
 *
 * DESCRIPTION
 *   assertHeaderSafe     rejects a value containing CR, LF or NUL (header injection) with a 422.
 *   encodeWords          text → RFC 2047 "=?UTF-8?B?…?=" words, each ≤ 75 chars, split on code points.
 *   isPlainAscii         true when text may appear literally (printable ASCII/tab, no "=?").
 *   unstructuredTokens   text → foldable tokens: plain words when safe printable ASCII without
 *                        leading/trailing whitespace, else encoded-words.
 *   foldHeader           name + tokens → one header field folded at token boundaries (≤ 78 preferred).
 *   paramTokens          a MIME parameter (RFC 2045) as tokens; non-ASCII or long values use RFC 2231
 *                        extended, continued values (`filename*0*=UTF-8''…`).
 *   withParams           joins a value and its parameter tokens with ";" separators.
 *   parseMediaType       validates a caller's `type/subtype[; attr=value]*` media type.
 *   checkCustomHeader    validates one custom header (name syntax, refused names, value safety) and
 *                        reports whether it overrides a generated field (only Message-ID does).
 *
 * INVARIANTS
 *   Rendered fields are 7-bit ASCII and contain no CR/LF except as CRLF + SP folds; no physical line
 *   exceeds 998 octets (tokens are bounded so this holds even when 78 cannot be met).
 *   Refused custom headers (REFUSED_HEADERS, every Content-* and every Resent-*) are structural,
 *   come from a dedicated request field, or name senders and recipients (Sender, Resent-From,
 *   Resent-Bcc…), so a caller can never change the MIME structure, speak for another sender or
 *   add a hidden Bcc.
 *
 * ERRORS
 *   MailInputError (422) naming the field for CR/LF/NUL, a bad header name, a refused header, a bad
 *   Message-ID override or a malformed media type.
 */
import { bytesToBase64, utf8Encode } from "./encoding";
import { MailInputError, type MailErrorName } from "./errors";

/** Preferred maximum line length (RFC 5322 §2.1.1 "SHOULD"). */
export const PREFERRED_LINE = 78;
/** Longest ASCII word kept literal; longer words are encoded so lines stay far below 998 octets. */
const MAX_PLAIN_WORD = 900;
/** Payload bytes per encoded-word: 45 bytes → 60 base64 chars + 12 framing = 72 ≤ 75. */
const WORD_BYTES = 45;

/** Custom header names that are refused (lower-case); any `content-*` name is refused as well. */
export const REFUSED_HEADERS: ReadonlySet<string> = new Set([
  "from",
  "to",
  "cc",
  "bcc",
  "reply-to",
  "subject",
  "date",
  "mime-version",
  "dkim-signature",
  "arc-seal",
  "arc-message-signature",
  "arc-authentication-results",
  "authentication-results",
  "received",
  "return-path",
  "delivered-to",
  // Who sent it is the verified From's business: no second sender, and no hidden copies.
  "sender",
]);

/** Custom header names that replace the generated field instead of being added (lower-case). */
export const OVERRIDABLE_HEADERS: ReadonlySet<string> = new Set(["message-id"]);

/** Throws a 422 naming `field` when `value` contains CR, LF or NUL. */
export function assertHeaderSafe(field: string, value: string, errorName: MailErrorName = "validation_error"): void {
  if (/[\r\n\0]/.test(value)) {
    throw new MailInputError(field, "must not contain CR, LF or NUL characters", errorName);
  }
}

/** RFC 2047 B-encoded words for `text`; never splits a code point across two words. */
export function encodeWords(text: string): string[] {
  const words: string[] = [];
  let pending: number[] = [];
  for (const ch of text) {
    const bytes = utf8Encode(ch);
    if (pending.length + bytes.length > WORD_BYTES) {
      words.push(encodedWord(pending));
      pending = [];
    }
    pending.push(...bytes);
  }
  if (pending.length > 0 || words.length === 0) words.push(encodedWord(pending));
  return words;
}

function encodedWord(bytes: number[]): string {
  return `=?UTF-8?B?${bytesToBase64(Uint8Array.from(bytes))}?=`;
}

/** True when `text` can appear literally in a header: printable ASCII/tab, no encoded-word lookalike. */
export function isPlainAscii(text: string): boolean {
  return /^[\x20-\x7e\t]*$/.test(text) && !text.includes("=?");
}

/**
 * Tokens for an unstructured value (Subject, custom headers); joined by single spaces they unfold to
 * it. Leading or trailing whitespace is encoded too, because parsers trim it from literal values.
 */
export function unstructuredTokens(text: string): string[] {
  if (isPlainAscii(text) && !/^[ \t]|[ \t]$/.test(text)) {
    const words = text.split(" ");
    if (words.every((w) => w.length <= MAX_PLAIN_WORD)) return words;
  }
  return encodeWords(text);
}

/**
 * Renders `Name: tok tok …`, folding (CRLF SP) before a token when the line would pass 78 columns,
 * also before the first one (`Name:` alone on its line; a full 72-column encoded word after
 * `Subject: ` would make 81). Empty tokens never start a continuation line (a whitespace-only
 * line is obsolete syntax).
 */
export function foldHeader(name: string, tokens: readonly string[]): string {
  const lines: string[] = [];
  let cur = `${name}:`;
  let hasToken = false;
  for (const tok of tokens) {
    // Before the first token only when that makes it fit (a long literal word stays after the name).
    if (tok !== "" && cur.length + 1 + tok.length > PREFERRED_LINE && (hasToken || 1 + tok.length <= PREFERRED_LINE)) {
      lines.push(cur);
      cur = ` ${tok}`;
    } else {
      cur += ` ${tok}`;
    }
    hasToken = true;
  }
  lines.push(cur);
  return lines.join("\r\n");
}

/** RFC 2231 attribute-char: characters that may stay unescaped in an extended value. */
const ATTR_CHAR_RE = /[A-Za-z0-9!#$&+\-.^_`|~]/;

/**
 * A `; attr=value` parameter as tokens. Short printable ASCII values are quoted; anything else is
 * percent-encoded UTF-8 in RFC 2231 continuations of at most ~60 characters each.
 */
export function paramTokens(attr: string, value: string): string[] {
  if (isPlainAscii(value) && !value.includes("\t") && value.length <= 60) {
    return [`${attr}="${value.replace(/(["\\])/g, "\\$1")}"`];
  }
  const pieces = percentPieces(value, 56);
  if (pieces.length === 1) return [`${attr}*=UTF-8''${pieces[0]}`];
  return pieces.map((p, i) => `${attr}*${i}*=${i === 0 ? "UTF-8''" : ""}${p}`);
}

/** Percent-encodes UTF-8 `value` into pieces of at most `max` chars, never splitting an escape. */
function percentPieces(value: string, max: number): string[] {
  const pieces: string[] = [];
  let cur = "";
  for (const b of utf8Encode(value)) {
    const ch = String.fromCharCode(b);
    const tok = ATTR_CHAR_RE.test(ch) ? ch : "%" + b.toString(16).toUpperCase().padStart(2, "0");
    if (cur.length + tok.length > max) {
      pieces.push(cur);
      cur = "";
    }
    cur += tok;
  }
  pieces.push(cur);
  return pieces;
}

/** Joins `value; p1; p2` tokens so that every parameter but the last carries its ";" separator. */
export function withParams(value: string, params: readonly string[][]): string[] {
  const flat = [value, ...params.flat()];
  return flat.map((t, i) => (i < flat.length - 1 ? `${t};` : t));
}

// type/subtype, then the parameters: `; attribute=value`, the value a token or a quoted string.
const MEDIA_TYPE_RE = new RegExp(
  /^([A-Za-z0-9!#$&^_.+-]{1,127}\/[A-Za-z0-9!#$&^_.+-]{1,127})/.source +
    /((?:\s*;\s*[A-Za-z0-9!#$&^_.+*'%-]+=(?:[A-Za-z0-9!#$&^_.+%'*-]+|"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"))*)\s*;?$/
      .source,
);

/** Validates `type/subtype[; attr=value]*`; returns the media type and its parameters as tokens. */
export function parseMediaType(field: string, raw: string): { type: string; params: string[] } {
  assertHeaderSafe(field, raw, "invalid_attachment");
  const m = MEDIA_TYPE_RE.exec(raw.trim());
  if (m === null || raw.length > 500) {
    throw new MailInputError(field, "must be a MIME type such as application/pdf", "invalid_attachment");
  }
  const params = (m[2] ?? "").split(/\s*;\s*/).filter((p) => p !== "");
  return { type: (m[1] as string).toLowerCase(), params };
}

/** Outcome of checking one custom header: added as an extra field, or overriding a generated one. */
export type CustomHeader = { name: string; value: string; overrides: boolean };

/** Validates a custom header; throws a 422 for bad names, refused names, or unsafe values. */
export function checkCustomHeader(name: string, value: unknown): CustomHeader {
  const field = `headers.${name}`;
  assertHeaderSafe("headers", name);
  if (!/^[\x21-\x39\x3b-\x7e]{1,76}$/.test(name)) {
    throw new MailInputError(field, "is not a valid header name (printable ASCII without ':' and spaces, ≤ 76 chars)");
  }
  if (typeof value !== "string") throw new MailInputError(field, "must be a string");
  assertHeaderSafe(field, value);
  const lower = name.toLowerCase();
  if (REFUSED_HEADERS.has(lower) || lower.startsWith("content-") || lower.startsWith("resent-")) {
    throw new MailInputError(field, "cannot be set as a custom header (it is generated or has its own field)");
  }
  if (
    lower === "message-id" &&
    !/^<[\x21-\x3b\x3d\x3f-\x7e]{1,250}@[\x21-\x3b\x3d\x3f-\x7e]{1,250}>$/.test(value.trim())
  ) {
    throw new MailInputError(field, "must look like <id@domain> in printable ASCII");
  }
  return { name, value: lower === "message-id" ? value.trim() : value, overrides: OVERRIDABLE_HEADERS.has(lower) };
}
