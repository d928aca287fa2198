/**
 * DKIM "relaxed" canonicalisation and signed-header selection (RFC 6376 §3.4.2, §3.4.4, §5.4.2).
 *
 * DESCRIPTION
 *   splitMessage          binary message string (one char per byte, CRLF) → header fields + body.
 *   canonHeaderRelaxed    one header field → "name:value" with the name lower-cased, unfolded, runs of
 *                         WSP collapsed to one SP, WSP around the colon and at the end removed.
 *   canonBodyRelaxed      body → WSP runs collapsed, trailing WSP per line and trailing empty lines
 *                         removed, CRLF-terminated when non-empty (an empty body stays empty).
 *   selectHeaders         the `h=` list for a message (present names only, optionally oversigned)
 *                         and the fields it selects, picking repeated names from the bottom up.
 *
 * INVARIANTS
 *   Pure string functions over "binary strings" (UTF-16 units 0x00–0xFF), so 8-bit header or body
 *   bytes are hashed exactly as they travel.
 *
 * ERRORS
 *   None.
 */

/** A header field as it appears in the message, with its lower-cased name. */
export type HeaderField = { key: string; raw: string };

/** Headers signed by default when present (lower-case). */
export const DEFAULT_SIGNED_HEADERS: readonly string[] = [
  "from",
  "sender",
  "reply-to",
  "subject",
  "date",
  "message-id",
  "to",
  "cc",
  "mime-version",
  "content-type",
  "content-transfer-encoding",
  "content-language",
  "in-reply-to",
  "references",
  "list-id",
  "list-help",
  "list-unsubscribe",
  "list-unsubscribe-post",
  "list-subscribe",
  "list-post",
  "list-owner",
  "list-archive",
  "feedback-id",
  "cfbl-address",
  "cfbl-feedback-id",
];

/** Headers listed once more than they occur, so a later-added instance breaks the signature. */
export const OVERSIGNED_HEADERS: ReadonlySet<string> = new Set([
  "from",
  "reply-to",
  "subject",
  "date",
  "message-id",
  "to",
  "cc",
  "mime-version",
  "content-type",
  "content-transfer-encoding",
  "list-unsubscribe",
  "list-unsubscribe-post",
  "cfbl-address",
]);

/** Splits a CRLF message into header fields and body (everything after the first empty line). */
export function splitMessage(message: string): { fields: HeaderField[]; body: string } {
  const sep = message.startsWith("\r\n") ? 0 : message.indexOf("\r\n\r\n");
  const head = sep < 0 ? message : message.slice(0, sep);
  const body = sep < 0 ? "" : message.slice(sep === 0 ? 2 : sep + 4);
  const fields: HeaderField[] = [];
  for (const line of head.split("\r\n")) {
    if (line === "") continue;
    const prev = fields[fields.length - 1];
    if ((line.startsWith(" ") || line.startsWith("\t")) && prev !== undefined) {
      prev.raw += "\r\n" + line;
    } else {
      const colon = line.indexOf(":");
      fields.push({ key: (colon < 0 ? line : line.slice(0, colon)).trim().toLowerCase(), raw: line });
    }
  }
  return { fields, body };
}

/** Relaxed canonical form of one header field, without the trailing CRLF. */
export function canonHeaderRelaxed(raw: string): string {
  const colon = raw.indexOf(":");
  const name = raw
    .slice(0, colon)
    .replace(/[ \t]+$/, "")
    .toLowerCase();
  const value = raw
    .slice(colon + 1)
    .replace(/\r\n/g, "")
    .replace(/[ \t]+/g, " ")
    .replace(/^ | $/g, "");
  return `${name}:${value}`;
}

/** Relaxed canonical form of a body. */
export function canonBodyRelaxed(body: string): string {
  const lines = body.split("\r\n").map((l) => l.replace(/[ \t]+/g, " ").replace(/ $/, ""));
  while (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  return lines.length === 0 ? "" : lines.join("\r\n") + "\r\n";
}

/**
 * The `h=` names and the selected fields in signing order. Each listed occurrence of a name takes
 * the next unused instance from the bottom (RFC 6376 §5.4.2); oversigned names get one extra entry
 * that selects nothing.
 */
export function selectHeaders(
  fields: readonly HeaderField[],
  names: readonly string[],
  oversign: boolean,
): { h: string[]; selected: HeaderField[] } {
  const h: string[] = [];
  const selected: HeaderField[] = [];
  for (const name of new Set(names.map((n) => n.toLowerCase()))) {
    const present = fields.filter((f) => f.key === name);
    if (present.length === 0) continue;
    for (let i = present.length - 1; i >= 0; i--) {
      h.push(name);
      selected.push(present[i] as HeaderField);
    }
    if (oversign && OVERSIGNED_HEADERS.has(name)) h.push(name);
  }
  return { h, selected };
}
