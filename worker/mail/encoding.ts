/**
 * Byte and body encodings for MIME: UTF-8, base64 (76-column), quoted-printable, binary strings.
 *
 * DESCRIPTION
 *   utf8Encode            string → UTF-8 bytes (lone surrogates become U+FFFD, as TextEncoder does).
 *   bytesToBase64         bytes → unwrapped base64; safe for multi-megabyte inputs (chunked btoa).
 *   base64Lines           bytes → base64 split into lines of at most 76 characters (RFC 2045 §6.8).
 *   base64ToBytes         strict base64 → bytes (whitespace ignored); null when malformed.
 *   normalizeNewlines     CRLF, lone CR and lone LF → LF.
 *   encodeQuotedPrintable text → RFC 2045 §6.7 quoted-printable of its UTF-8 bytes, CRLF line breaks.
 *   encodeTextBody        text → the shorter of quoted-printable and base64, with its CTE name.
 *   bytesToBinary / binaryToBytes   bytes ↔ "binary string" (one char per byte), used by DKIM.
 *
 * INVARIANTS
 *   Every encoder here outputs 7-bit ASCII only, and no output line exceeds 76 characters.
 *   Quoted-printable output never contains "=_" (so "=_"-prefixed MIME boundaries cannot collide with
 *   it), never ends a line with whitespace, and never starts a line with "." (it is written "=2E").
 *   Text bodies are canonicalised to CRLF line breaks before encoding (RFC 2046 §4.1.1).
 *
 * ERRORS
 *   None thrown: base64ToBytes signals malformed input with null.
 */

const CRLF = "\r\n";
const QP_MAX = 76;

/** Encodes a string as UTF-8 bytes. */
export function utf8Encode(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

/** Base64 of `bytes` without line breaks. */
export function bytesToBase64(bytes: Uint8Array): string {
  // 0x7ffe is a multiple of 3, so each chunk encodes without padding except the last one.
  const chunk = 0x7ffe;
  let out = "";
  for (let i = 0; i < bytes.length; i += chunk) {
    out += btoa(bytesToBinary(bytes.subarray(i, i + chunk)));
  }
  return out;
}

/** Base64 of `bytes` as lines of at most 76 characters. */
export function base64Lines(bytes: Uint8Array): string[] {
  const b64 = bytesToBase64(bytes);
  const lines: string[] = [];
  for (let i = 0; i < b64.length; i += 76) lines.push(b64.slice(i, i + 76));
  return lines;
}

/** Decodes strict base64 (standard alphabet, optional padding, whitespace ignored); null if malformed. */
export function base64ToBytes(b64: string): Uint8Array | null {
  const clean = b64.replace(/[ \t\r\n]+/g, "");
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean) || clean.length % 4 === 1) return null;
  try {
    return binaryToBytes(atob(clean));
  } catch {
    return null;
  }
}

/** Converts CRLF, lone CR and lone LF to LF. */
export function normalizeNewlines(text: string): string {
  return text.replace(/\r\n|\r|\n/g, "\n");
}

/** Quoted-printable encoding of `text` (as UTF-8) with CRLF hard breaks. */
export function encodeQuotedPrintable(text: string): string {
  return normalizeNewlines(text).split("\n").map(encodeQpLine).join(CRLF);
}

/** A line QP leaves as it is: printable ASCII but "=", no whitespace at its end, short enough for one physical line. */
const QP_LITERAL = /^[\x21-\x3c\x3e-\x7e]([\x20-\x3c\x3e-\x7e]*[\x21-\x3c\x3e-\x7e])?$/;

/** Encodes one logical line, inserting soft line breaks ("=" CRLF) to stay within 76 columns. */
function encodeQpLine(line: string): string {
  // Most lines of a text part come out unchanged: skip the byte-by-byte walk for them.
  if (line.length < QP_MAX && QP_LITERAL.test(line) && line.charCodeAt(0) !== 0x2e && !line.startsWith("From "))
    return line;
  const bytes = utf8Encode(line);
  const out: string[] = [];
  let cur = "";
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i] as number;
    const last = i === bytes.length - 1;
    let tok = qpToken(b, last);
    // A physical line starting with "." would need SMTP dot-stuffing; "From " would be mangled by mbox.
    if (cur === "" && (b === 0x2e || (b === 0x46 && i === 0 && line.startsWith("From ")))) tok = hex(b);
    if (cur.length + tok.length > QP_MAX - 1) {
      out.push(cur + "=");
      cur = "";
      if (b === 0x2e) tok = hex(b);
    }
    cur += tok;
  }
  out.push(cur);
  return out.join(CRLF);
}

/** The QP representation of one byte; whitespace is literal unless it would end the line. */
function qpToken(b: number, lastOfLine: boolean): string {
  if ((b === 0x20 || b === 0x09) && !lastOfLine) return String.fromCharCode(b);
  if (b >= 0x21 && b <= 0x7e && b !== 0x3d) return String.fromCharCode(b);
  return hex(b);
}

function hex(b: number): string {
  return "=" + b.toString(16).toUpperCase().padStart(2, "0");
}

/** A text body encoded for a MIME leaf: quoted-printable unless base64 is shorter. */
export function encodeTextBody(text: string): { cte: "quoted-printable" | "base64"; body: string } {
  const qp = encodeQuotedPrintable(text);
  const bytes = utf8Encode(normalizeNewlines(text).replace(/\n/g, CRLF));
  const b64Len = Math.ceil(bytes.length / 3) * 4 * (78 / 76);
  if (qp.length <= b64Len) return { cte: "quoted-printable", body: qp };
  return { cte: "base64", body: base64Lines(bytes).join(CRLF) };
}

/** Bytes → string with one UTF-16 unit per byte (0x00–0xFF). */
export function bytesToBinary(bytes: Uint8Array): string {
  let out = "";
  const step = 0x2000;
  for (let i = 0; i < bytes.length; i += step) {
    out += String.fromCharCode(...bytes.subarray(i, i + step));
  }
  return out;
}

/** String of 0x00–0xFF units → bytes (higher units are truncated to their low byte). */
export function binaryToBytes(bin: string): Uint8Array {
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i) & 0xff;
  return out;
}
