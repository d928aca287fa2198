/**
 * MIME entities: text leaves, attachment leaves, multiparts, and their rendering to CRLF text.
 *
 * DESCRIPTION
 *   textLeaf           text/plain or text/html, UTF-8, quoted-printable or base64 (whichever is shorter).
 *   resolveAttachment  validates one request attachment (content base64, filename, content_type,
 *                      content_id) and decodes its bytes.
 *   attachmentLeaf     an attachment or inline (cid) part, base64 in 76-column lines, with
 *                      Content-Type `name=` and Content-Disposition `filename=` (RFC 2231 if needed);
 *                      a composite one (message/rfc822, message/partial, message/external-body,
 *                      multipart/*) as it is, 7bit, or 8bit when it is UTF-8 text: RFC 2045 §6.4
 *                      and RFC 2046 §5.2.1 allow those no other encoding.
 *   multipart          a multipart/{mixed,alternative,related} entity.
 *   renderEntity       an entity → its header fields and body text; boundaries come from `boundary()`.
 *
 * INVARIANTS
 *   Every body line of a text or discrete leaf is ≤ 76 characters (base64 or quoted-printable), so
 *   no such line can start with a "--=_" boundary delimiter; boundaries are "=_"-prefixed (see
 *   encoding.ts) and carry the message's id, which a composite attachment cannot know in advance.
 *   Rendered output has CRLF line breaks, no line over 998 octets and no trailing CRLF; it is 7-bit
 *   ASCII but for a composite attachment that is UTF-8 text (ResolvedAttachment.composite "8bit").
 *
 * ERRORS
 *   MailInputError (422, `invalid_attachment`) naming `attachments[i].<field>` for missing or
 *   malformed content, unsafe filename/content_id, or a malformed content_type; for a composite
 *   attachment that is not 7-bit or UTF-8 text, has a NUL or a line over 998 octets, or is a
 *   multipart without its boundary parameter.
 */
import { base64Lines, base64ToBytes, encodeTextBody } from "./encoding";
import { MailInputError } from "./errors";
import { assertHeaderSafe, foldHeader, paramTokens, parseMediaType, withParams } from "./header";

/** A request attachment in Resend's shape; `content` may also be raw bytes (e.g. a fetched `path`). */
export type AttachmentInput = {
  content?: string | Uint8Array;
  filename?: string;
  path?: string;
  content_type?: string;
  content_id?: string;
};

/** A validated attachment ready to render. */
export type ResolvedAttachment = {
  filename: string | undefined;
  type: string;
  params: string[];
  contentId: string | undefined;
  bytes: Uint8Array;
  /** A composite type's body as text with CRLF line ends, and its encoding; null for the others. */
  composite: { cte: "7bit" | "8bit"; text: string } | null;
};

/** Types whose body may only be 7bit, 8bit or binary (RFC 2045 §6.4, RFC 2046 §5.2.1, §5.2.2, §5.2.3). */
function isComposite(type: string): boolean {
  return type.startsWith("multipart/") || ["message/rfc822", "message/partial", "message/external-body"].includes(type);
}

/** The body of a composite attachment as it travels, or why it cannot. */
function compositeBody(
  bytes: Uint8Array,
  type: string,
  params: readonly string[],
): { cte: "7bit" | "8bit"; text: string } | string {
  if (type.startsWith("multipart/") && !params.some((p) => /^boundary=/i.test(p)))
    return "must name its boundary for a multipart content_type";
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return `must be 7-bit or UTF-8 text for ${type}, which may not be base64-encoded (RFC 2045 §6.4)`;
  }
  if (text.includes("\0")) return `must not contain a NUL for ${type}`;
  text = text.replace(/\r\n|\r|\n/g, "\r\n");
  const long = text.split("\r\n").some((l) => new TextEncoder().encode(l).length > 998);
  if (long) return `has a line over 998 octets, which ${type} cannot carry (RFC 5322 §2.1.1)`;
  return { cte: /^[\x00-\x7f]*$/.test(text) ? "7bit" : "8bit", text };
}

/** A single-part entity: header fields plus an already-encoded body. */
export type Leaf = { kind: "leaf"; headers: string[]; body: string };
/** A multipart entity. */
export type Multipart = { kind: "multipart"; subtype: "mixed" | "alternative" | "related"; children: Entity[] };
/** Any MIME entity. */
export type Entity = Leaf | Multipart;

const CRLF = "\r\n";

/** A text/plain or text/html leaf in UTF-8. */
export function textLeaf(subtype: "plain" | "html", text: string): Leaf {
  const { cte, body } = encodeTextBody(text);
  return {
    kind: "leaf",
    headers: [`Content-Type: text/${subtype}; charset=utf-8`, `Content-Transfer-Encoding: ${cte}`],
    body,
  };
}

const TYPE_BY_EXTENSION: Readonly<Record<string, string>> = {
  pdf: "application/pdf",
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  svg: "image/svg+xml",
  txt: "text/plain",
  csv: "text/csv",
  html: "text/html",
  json: "application/json",
  zip: "application/zip",
  ics: "text/calendar",
};

/** Validates and decodes attachment `i`. */
export function resolveAttachment(att: AttachmentInput, i: number): ResolvedAttachment {
  const field = (k: string) => `attachments[${i}].${k}`;
  const fail = (k: string, why: string) => new MailInputError(field(k), why, "invalid_attachment");
  if (att.filename !== undefined) assertHeaderSafe(field("filename"), att.filename, "invalid_attachment");
  if (att.content_id !== undefined) assertHeaderSafe(field("content_id"), att.content_id, "invalid_attachment");
  let bytes: Uint8Array | null;
  if (att.content === undefined) {
    throw fail("content", "is required (a remote `path` must be fetched before composing)");
  } else if (typeof att.content === "string") {
    bytes = base64ToBytes(att.content);
    if (bytes === null) throw fail("content", "must be valid base64");
  } else {
    bytes = att.content;
  }
  const filename = att.filename === "" ? undefined : att.filename;
  if (filename !== undefined && filename.length > 255) throw fail("filename", "must be at most 255 characters");
  const media =
    att.content_type !== undefined && att.content_type !== ""
      ? parseMediaType(field("content_type"), att.content_type)
      : { type: guessType(filename), params: [] };
  let contentId: string | undefined;
  if (att.content_id !== undefined && att.content_id !== "") {
    contentId = att.content_id.replace(/^<(.*)>$/s, "$1");
    if (!/^[\x21-\x3b\x3d\x3f-\x7e]{1,250}$/.test(contentId)) {
      throw fail("content_id", "must be 1–250 printable ASCII characters without spaces or angle brackets");
    }
  }
  let composite: ResolvedAttachment["composite"] = null;
  if (isComposite(media.type)) {
    const c = compositeBody(bytes, media.type, media.params);
    if (typeof c === "string") throw fail("content", c);
    composite = c;
  }
  return { filename, type: media.type, params: media.params, contentId, bytes, composite };
}

function guessType(filename: string | undefined): string {
  const ext = filename?.toLowerCase().match(/\.([a-z0-9]+)$/)?.[1];
  return (ext !== undefined ? TYPE_BY_EXTENSION[ext] : undefined) ?? "application/octet-stream";
}

/** A base64 leaf for an attachment (a composite one as it is); `inline` marks a cid image inside multipart/related. */
export function attachmentLeaf(a: ResolvedAttachment, inline: boolean): Leaf {
  const nameParam = a.filename !== undefined ? [paramTokens("name", a.filename)] : [];
  const fileParam = a.filename !== undefined ? [paramTokens("filename", a.filename)] : [];
  const headers = [
    foldHeader("Content-Type", withParams(a.type, [...a.params.map((p) => [p]), ...nameParam])),
    `Content-Transfer-Encoding: ${a.composite?.cte ?? "base64"}`,
    foldHeader("Content-Disposition", withParams(inline ? "inline" : "attachment", fileParam)),
  ];
  if (a.contentId !== undefined) headers.push(foldHeader("Content-ID", [`<${a.contentId}>`]));
  return { kind: "leaf", headers, body: a.composite?.text ?? base64Lines(a.bytes).join(CRLF) };
}

/** A multipart entity of the given subtype. */
export function multipart(subtype: Multipart["subtype"], children: Entity[]): Multipart {
  return { kind: "multipart", subtype, children };
}

/** Renders an entity's header fields and body; `boundary()` yields a fresh boundary per multipart. */
export function renderEntity(e: Entity, boundary: () => string): { headers: string[]; body: string } {
  if (e.kind === "leaf") return { headers: e.headers, body: e.body };
  const b = boundary();
  const parts = e.children.map((child) => {
    const r = renderEntity(child, boundary);
    return `--${b}${CRLF}${r.headers.join(CRLF)}${CRLF}${CRLF}${r.body}`;
  });
  return {
    headers: [foldHeader("Content-Type", withParams(`multipart/${e.subtype}`, [[`boundary="${b}"`]]))],
    body: `${parts.join(CRLF)}${CRLF}--${b}--`,
  };
}
