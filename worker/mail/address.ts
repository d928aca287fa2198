/**
 * Mailbox parsing, IDN → punycode, address-header rendering and the SMTP envelope.
 *
 * DESCRIPTION
 *   toAsciiDomain   a domain (U-labels allowed) → lower-case A-labels via WHATWG URL's IDNA
 *                   (UTS #46), which both workerd and Node implement; validates LDH labels.
 *   parseMailbox    "Name <local@domain>", "\"Quoted, Name\" <addr>", "<addr>" or a bare "addr" →
 *                   { name, address } with the domain in punycode. The local part is a dot-atom
 *                   (with UTF-8 characters, RFC 6531: delivered only to a server offering SMTPUTF8,
 *                   else bounced 5.6.7 by the SMTP client) or a quoted string (RFC 5321 §4.1.2,
 *                   `"john doe"@example.com`); the domain a name or an address literal of a public
 *                   address (`[192.0.2.1]`, `[IPv6:2001:db8::1]`, RFC 5321 §4.1.3).
 *   isAddressLiteral(domain)  whether a domain part is an address literal.
 *   parseMailboxes  string | string[] | undefined → Mailbox[] (fields named `to[0]`, `to[1]`…).
 *   mailboxTokens   a mailbox list as foldable header tokens (names quoted or RFC 2047-encoded).
 *   dedupeRecipients  mailboxes → RCPT TO addresses without duplicates.
 *   envelopeOf      MAIL FROM (the From address) and RCPT TO (to + cc + bcc, deduplicated with the
 *                   domain compared case-insensitively, first occurrence kept, in request order).
 *
 * INVARIANTS
 *   Local parts are at most 64 octets; domains are LDH names with a non-numeric TLD (≤ 253) or
 *   address literals of public addresses. Display names are trimmed; rendered names are 7-bit
 *   ASCII (an address with a UTF-8 local part is rendered as it is: RFC 6532).
 *
 * ERRORS
 *   MailInputError (422) naming the field for CR/LF/NUL, a malformed local part, an invalid domain,
 *   or an address literal that is not a public address. `from` errors use the Resend name
 *   `invalid_from_address`.
 */
import { MailInputError, type MailErrorName } from "./errors";
import { assertHeaderSafe, encodeWords, isPlainAscii } from "./header";
import { classifyIp } from "../net/core/ip-address";

/** A parsed mailbox; `address` is `local@ascii-domain`. */
export type Mailbox = { name: string; address: string };

/** The SMTP envelope of a message. */
export type Envelope = { mailFrom: string; rcptTo: string[] };

const ATEXT = "A-Za-z0-9!#$%&'*+\\-/=?^_`{|}~";
const DOT_ATOM_RE = new RegExp(`^[${ATEXT}]+(?:\\.[${ATEXT}]+)*$`);
/** RFC 6531 §3.3: atext extended with UTF-8 non-ASCII characters. */
const UTF8_DOT_ATOM_RE = new RegExp(`^[${ATEXT}\\u0080-\\u{10FFFF}]+(?:\\.[${ATEXT}\\u0080-\\u{10FFFF}]+)*$`, "u");
/** RFC 5321 §4.1.2 Quoted-string: qtextSMTP or quoted-pairSMTP between quotes. */
const QUOTED_LOCAL_RE = /^"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"$/;
const LITERAL_RE = /^\[(?:(IPv6:)([0-9A-Fa-f:.]+)|(\d{1,3}(?:\.\d{1,3}){3}))\]$/i;
const PHRASE_RE = new RegExp(`^[${ATEXT}]+(?: [${ATEXT}]+)*$`);
const LABEL_RE = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
/** Characters that would make `http://<domain>` mean something other than a host name. */
const URL_UNSAFE_RE = /[\s/\\?#@:%[\]<>^|"`{}]/u;

/** Converts a domain to lower-case ASCII (punycode A-labels) and validates it. */
export function toAsciiDomain(field: string, domain: string, errorName: MailErrorName = "validation_error"): string {
  const bad = (why: string) => new MailInputError(field, `has an invalid domain: ${why}`, errorName);
  let ascii: string;
  if (/^[A-Za-z0-9.-]+$/.test(domain)) {
    ascii = domain.toLowerCase();
  } else {
    if (URL_UNSAFE_RE.test(domain)) throw bad("unexpected character");
    try {
      ascii = new URL(`http://${domain}`).hostname;
    } catch {
      throw bad("not a valid internationalised domain name");
    }
  }
  const labels = ascii.split(".");
  if (ascii.length > 253 || labels.length < 2 || !labels.every((l) => LABEL_RE.test(l))) {
    throw bad("expected labels of letters, digits and hyphens separated by dots");
  }
  if (/^[0-9]+$/.test(labels[labels.length - 1] as string)) throw bad("the top-level label is numeric");
  return ascii;
}

/** See the header. */
export function isAddressLiteral(domain: string): boolean {
  return domain.startsWith("[");
}

/** An address literal of a public address, normalised ("[IPv6:2001:db8::1]"), or a reason. */
function addressLiteral(domain: string): { ok: true; literal: string } | { ok: false; why: string } {
  const m = LITERAL_RE.exec(domain);
  const ip = m?.[2] ?? m?.[3];
  const c = ip === undefined ? null : classifyIp(ip);
  if (c === null || (m![1] !== undefined) !== (c.family === 6)) {
    return { ok: false, why: "has an invalid address literal (use [192.0.2.1] or [IPv6:2001:db8::1])" };
  }
  if (c.range !== "public")
    return { ok: false, why: `has an address literal that is not a public address (${c.range})` };
  return { ok: true, literal: c.family === 6 ? `[IPv6:${ip!.toLowerCase()}]` : `[${ip}]` };
}

/** Parses one mailbox; the domain is converted to punycode. */
export function parseMailbox(field: string, raw: string): Mailbox {
  const errorName: MailErrorName = field === "from" ? "invalid_from_address" : "validation_error";
  assertHeaderSafe(field, raw, errorName);
  const m = /^(.*)<([^<>]*)>\s*$/s.exec(raw);
  let name = m ? (m[1] as string).trim() : "";
  const addr = (m ? (m[2] as string) : raw).trim();
  if (name.length >= 2 && name.startsWith('"') && name.endsWith('"')) {
    name = name.slice(1, -1).replace(/\\(.)/gs, "$1").trim();
  }
  const at = addr.lastIndexOf("@");
  if (at <= 0 || at === addr.length - 1) {
    throw new MailInputError(
      field,
      "must be an email address like user@example.com or Name <user@example.com>",
      errorName,
    );
  }
  const local = addr.slice(0, at);
  const valid =
    DOT_ATOM_RE.test(local) || QUOTED_LOCAL_RE.test(local) || (!isPlainAscii(local) && UTF8_DOT_ATOM_RE.test(local));
  if (!valid || new TextEncoder().encode(local).length > 64) {
    throw new MailInputError(field, "has an invalid local part (before the @)", errorName);
  }
  const domain = addr.slice(at + 1);
  if (isAddressLiteral(domain)) {
    const lit = addressLiteral(domain);
    if (!lit.ok) throw new MailInputError(field, lit.why, errorName);
    return { name, address: `${local}@${lit.literal}` };
  }
  return { name, address: `${local}@${toAsciiDomain(field, domain, errorName)}` };
}

/** Parses a string-or-array address field; an absent field is an empty list. */
export function parseMailboxes(field: string, value: string | readonly string[] | undefined): Mailbox[] {
  if (value === undefined) return [];
  if (typeof value === "string") return [parseMailbox(field, value)];
  return value.map((v, i) => parseMailbox(`${field}[${i}]`, v));
}

/** Header tokens for a display name: atoms, one quoted-string, or RFC 2047 encoded-words. */
function nameTokens(name: string): string[] {
  if (PHRASE_RE.test(name) && !name.includes("=?") && name.length <= 200) return name.split(" ");
  if (isPlainAscii(name) && name.length <= 64) return [`"${name.replace(/(["\\])/g, "\\$1")}"`];
  return encodeWords(name);
}

/** Foldable header tokens for a comma-separated mailbox list. */
export function mailboxTokens(list: readonly Mailbox[]): string[] {
  const tokens: string[] = [];
  list.forEach((mb, i) => {
    const parts = mb.name === "" ? [mb.address] : [...nameTokens(mb.name), `<${mb.address}>`];
    if (i < list.length - 1) parts[parts.length - 1] += ",";
    tokens.push(...parts);
  });
  return tokens;
}

/** Lower-cases the domain only: local parts are case-sensitive (RFC 5321 §2.4). */
function recipientKey(address: string): string {
  const at = address.lastIndexOf("@");
  return address.slice(0, at) + address.slice(at).toLowerCase();
}

/** RCPT TO list: recipients in order, deduplicated with domains compared case-insensitively. */
export function dedupeRecipients(list: readonly Mailbox[]): string[] {
  const seen = new Set<string>();
  const rcptTo: string[] = [];
  for (const mb of list) {
    const key = recipientKey(mb.address);
    if (!seen.has(key)) {
      seen.add(key);
      rcptTo.push(mb.address);
    }
  }
  return rcptTo;
}

/** The envelope for a send request: From address, then to + cc + bcc deduplicated. */
export function envelopeOf(input: {
  from: string;
  to?: string | readonly string[];
  cc?: string | readonly string[];
  bcc?: string | readonly string[];
}): Envelope {
  const from = parseMailbox("from", input.from);
  const all = [
    ...parseMailboxes("to", input.to),
    ...parseMailboxes("cc", input.cc),
    ...parseMailboxes("bcc", input.bcc),
  ];
  return { mailFrom: from.address, rcptTo: dedupeRecipients(all) };
}
