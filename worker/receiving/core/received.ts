/*
 * NAME
 *   received - what a received email is, as Resend's emails.receiving shows it
 *
 * SUMMARY
 *   Mail to a verified domain whose receiving is enabled is kept: its raw bytes in R2 and
 *   the fields below in D1. This module turns a parsed message into those fields, names
 *   it with a time-ordered id, and decides the daily quota; the shell does the I/O.
 *
 * DESCRIPTION
 *   ParsedMail               the part of a MIME parse (postal-mime's) that is read here.
 *   receivedFields(p, envelope)  from, to, cc, bcc, reply_to (address strings as written,
 *                            "Name <a@b>"), received_for (the envelope recipient), subject ("" when
 *                            none), message_id, headers (lower-cased name -> value; a repeated
 *                            field's values joined with ", " for Resend's Record<string, string>),
 *                            and the attachments' metadata in the parse's order, each with the
 *                            id `ids[i]`.
 *   uuidV7(ms, random)       a UUIDv7 (RFC 9562): 48 bits of ms, then 74 bits of `random` (16
 *                            bytes given). Its text sorts by time, so the primary key orders a
 *                            tenant's mail; idFloor(ms) is the least id of that ms.
 *   dayStart(ms)             00:00 UTC of the day of `ms`.
 *   quotaReply(quota)        the SMTP reply that refuses mail beyond the tenant's daily quota.
 *   withDataUris(html, atts) Resend's html_format "data_uri": every cid: reference to an inline
 *                            attachment replaced by a data: URI of its bytes (base64 given).
 *
 * INVARIANTS
 *   Pure: no I/O, no clock, no randomness of its own (the shell passes time and bytes).
 *   uuidV7(a, r) < uuidV7(b, r') as text whenever a < b.
 *
 * ERRORS
 *   RangeError from uuidV7 for fewer than 10 random bytes or a time outside 48 bits.
 */

/** A parsed address (postal-mime's). */
export interface ParsedAddress {
  name?: string;
  address?: string;
  group?: ParsedAddress[];
}

/** A parsed attachment's metadata (postal-mime's). */
export interface ParsedAttachment {
  filename: string | null;
  mimeType: string;
  disposition: string | null;
  contentId?: string;
  size: number;
}

/** What is read of a parsed message. */
export interface ParsedMail {
  headers: { key: string; value: string }[];
  from?: ParsedAddress;
  to?: ParsedAddress[];
  cc?: ParsedAddress[];
  bcc?: ParsedAddress[];
  replyTo?: ParsedAddress[];
  subject?: string;
  messageId?: string;
  attachments: ParsedAttachment[];
}

/** An attachment of a received email (Resend's InboundAttachment). */
export interface ReceivedAttachment {
  id: string;
  filename: string | null;
  size: number;
  content_type: string;
  content_id: string | null;
  content_disposition: string | null;
}

/** The fields kept in D1. */
export interface ReceivedFields {
  from: string;
  to: string[];
  cc: string[] | null;
  bcc: string[] | null;
  reply_to: string[] | null;
  received_for: string[];
  subject: string;
  message_id: string | null;
  headers: Record<string, string>;
  attachments: ReceivedAttachment[];
}

function one(a: ParsedAddress): string[] {
  if (a.group) return a.group.flatMap(one);
  if (!a.address) return [];
  return [a.name ? `${a.name} <${a.address}>` : a.address];
}

function list(as: ParsedAddress[] | undefined): string[] | null {
  if (!as || as.length === 0) return null;
  const out = as.flatMap(one);
  return out.length > 0 ? out : null;
}

/** The fields of a parsed message (see the header). */
export function receivedFields(
  p: ParsedMail,
  envelope: { from: string; to: string },
  ids: readonly string[],
): ReceivedFields {
  const headers: Record<string, string> = {};
  for (const h of p.headers) {
    const k = h.key.toLowerCase();
    headers[k] = headers[k] === undefined ? h.value : `${headers[k]}, ${h.value}`;
  }
  return {
    from: (p.from ? one(p.from)[0] : undefined) ?? envelope.from,
    to: list(p.to) ?? [envelope.to],
    cc: list(p.cc),
    bcc: list(p.bcc),
    reply_to: list(p.replyTo),
    received_for: [envelope.to],
    subject: p.subject ?? "",
    message_id: p.messageId ?? null,
    headers,
    attachments: p.attachments.map((a, i) => ({
      id: ids[i]!,
      filename: a.filename ?? null,
      size: a.size,
      content_type: a.mimeType,
      content_id: a.contentId ? a.contentId.replace(/^<|>$/g, "") : null,
      content_disposition: a.disposition,
    })),
  };
}

const hex = (b: number) => b.toString(16).padStart(2, "0");

/** A UUIDv7 of `ms` with the given random bytes (see the header). */
export function uuidV7(ms: number, random: Uint8Array): string {
  if (random.length < 10) throw new RangeError("uuidV7 needs 10 random bytes");
  if (!Number.isInteger(ms) || ms < 0 || ms >= 2 ** 48) throw new RangeError(`uuidV7: time ${ms} out of range`);
  const b = new Uint8Array(16);
  let t = ms;
  for (let i = 5; i >= 0; i--) {
    b[i] = t % 256;
    t = Math.floor(t / 256);
  }
  b.set(random.subarray(0, 10), 6);
  b[6] = 0x70 | (b[6]! & 0x0f);
  b[8] = 0x80 | (b[8]! & 0x3f);
  const h = [...b].map(hex).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** The least UUIDv7 of `ms` (every id of that ms or later sorts at or after it). */
export function idFloor(ms: number): string {
  return uuidV7(Math.max(0, Math.floor(ms)), new Uint8Array(10));
}

const DAY_MS = 86_400_000;

/** 00:00 UTC of the day of `ms`. */
export function dayStart(ms: number): number {
  return Math.floor(ms / DAY_MS) * DAY_MS;
}

/** The SMTP reply beyond the tenant's daily quota. */
export function quotaReply(quota: number): string {
  return `552 5.2.2 the receiving quota of this domain's owner is reached (${quota} messages a UTC day); send again after 00:00 UTC`;
}

/** html with cid: references to inline attachments as data: URIs (see the header). */
export function withDataUris(
  html: string,
  atts: readonly { content_id: string | null; content_type: string; base64: string }[],
): string {
  let out = html;
  for (const a of atts) {
    if (!a.content_id) continue;
    const cid = a.content_id.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    out = out.replace(new RegExp(`cid:${cid}(?=["')\\s>])`, "gi"), `data:${a.content_type};base64,${a.base64}`);
  }
  return out;
}
