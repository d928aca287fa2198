/*
 * NAME
 *   codec - UTF-8 and base64 conversions for the pure SMTP core
 *
 * SUMMARY
 *   The core compiles against lib ES2022 only, where TextEncoder, TextDecoder,
 *   btoa and Buffer do not exist. These few conversions are all it needs.
 *
 * DESCRIPTION
 *   encodeUtf8(text) returns the UTF-8 bytes of a string. A lone surrogate is
 *   encoded as U+FFFD, so the output is always well-formed UTF-8.
 *
 *   decodeUtf8(bytes) decodes UTF-8 leniently, exactly as the WHATWG decoder
 *   (TextDecoder) does: each maximal invalid subsequence becomes one U+FFFD,
 *   overlong forms and surrogates are invalid, and decoding never fails.
 *
 *   encodeBase64(bytes) returns RFC 4648 base64 with padding and no line
 *   breaks, as SASL (RFC 4954) wants it.
 *
 * INVARIANTS
 *   decodeUtf8(encodeUtf8(s)) === s for every string without lone surrogates.
 *
 * ERRORS
 *   None; every input has a defined output.
 */

const REPLACEMENT = 0xfffd;
const BASE64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/** Encodes a string as UTF-8 bytes (lone surrogates become U+FFFD). */
export function encodeUtf8(text: string): Uint8Array {
  const out: number[] = [];
  for (const ch of text) {
    let cp = ch.codePointAt(0) ?? REPLACEMENT;
    if (cp >= 0xd800 && cp <= 0xdfff) cp = REPLACEMENT;
    if (cp < 0x80) {
      out.push(cp);
    } else if (cp < 0x800) {
      out.push(0xc0 | (cp >> 6), 0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out.push(0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f));
    } else {
      out.push(0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 0x3f), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f));
    }
  }
  return Uint8Array.from(out);
}

/** Decodes UTF-8 bytes leniently; invalid sequences become U+FFFD (WHATWG decoder). */
export function decodeUtf8(bytes: Uint8Array): string {
  const codePoints: number[] = [];
  // The WHATWG Encoding Standard's UTF-8 decoder: the bounds for the next byte
  // exclude overlong forms, surrogates and values above U+10FFFF, and a bad byte
  // ends the sequence (one U+FFFD) and is then looked at again on its own.
  let needed = 0;
  let seen = 0;
  let cp = 0;
  let lower = 0x80;
  let upper = 0xbf;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i] ?? 0;
    if (needed === 0) {
      if (b < 0x80) codePoints.push(b);
      else if (b >= 0xc2 && b <= 0xdf) [needed, cp] = [1, b & 0x1f];
      else if (b >= 0xe0 && b <= 0xef) {
        [needed, cp] = [2, b & 0x0f];
        if (b === 0xe0) lower = 0xa0;
        if (b === 0xed) upper = 0x9f;
      } else if (b >= 0xf0 && b <= 0xf4) {
        [needed, cp] = [3, b & 0x07];
        if (b === 0xf0) lower = 0x90;
        if (b === 0xf4) upper = 0x8f;
      } else codePoints.push(REPLACEMENT);
      continue;
    }
    const inRange = b >= lower && b <= upper;
    lower = 0x80;
    upper = 0xbf;
    if (!inRange) {
      [needed, seen, cp] = [0, 0, 0];
      codePoints.push(REPLACEMENT);
      i--;
      continue;
    }
    cp = (cp << 6) | (b & 0x3f);
    if (++seen === needed) {
      codePoints.push(cp);
      [needed, seen, cp] = [0, 0, 0];
    }
  }
  if (needed !== 0) codePoints.push(REPLACEMENT);
  return joinCodePoints(codePoints);
}

/** Builds a string in slices, staying under the engine's argument-count limit. */
function joinCodePoints(codePoints: number[]): string {
  let text = "";
  for (let k = 0; k < codePoints.length; k += 4096) {
    text += String.fromCodePoint(...codePoints.slice(k, k + 4096));
  }
  return text;
}

/** Encodes bytes as padded base64 without line breaks (RFC 4648 §4). */
export function encodeBase64(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const a = bytes[i] ?? 0;
    const b = bytes[i + 1];
    const c = bytes[i + 2];
    const n = (a << 16) | ((b ?? 0) << 8) | (c ?? 0);
    out += BASE64_ALPHABET[(n >> 18) & 63];
    out += BASE64_ALPHABET[(n >> 12) & 63];
    out += b === undefined ? "=" : BASE64_ALPHABET[(n >> 6) & 63];
    out += c === undefined ? "=" : BASE64_ALPHABET[n & 63];
  }
  return out;
}
