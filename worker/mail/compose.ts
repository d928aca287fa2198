/**
 * Composes a Resend-style send request into RFC 5322 / MIME message text (7-bit ASCII, CRLF).
 *
 * DESCRIPTION
 *   compose(input, opts)  validates every header-bearing field and returns { raw, messageId,
 *                         envelope }. Structure: text/plain | text/html | multipart/alternative;
 *                         cid attachments wrap the html in multipart/related; other attachments
 *                         wrap everything in multipart/mixed. An empty request body (no text, no
 *                         html) becomes an empty text/plain part.
 *   formatDate(now)       RFC 5322 date-time in UTC ("Tue, 05 Aug 2026 11:52:01 +0000").
 *
 *   Fields: From, To, Cc, Reply-To, Subject, Date, Message-ID (`<id@from-domain>`), MIME-Version,
 *   then custom headers in request order. Bcc recipients are only in the envelope, never a header.
 *   `tags` are relay metadata and are deliberately not rendered (no X-Tags), so they do not leak to
 *   recipients. Custom headers: Message-ID may be overridden; From/To/Cc/Bcc/Reply-To/Subject/Date,
 *   MIME-Version, every Content-*, DKIM/ARC/Authentication-Results, Received, Return-Path and
 *   Delivered-To are refused (see header.ts); anything else valid is added.
 *
 *   Why not mimetext: its default entry imports `node:os` and `mime-types`, it draws boundaries from
 *   Math.random (not injectable), writes Subject/display names as one unfolded encoded-word (long
 *   subjects exceed 998 octets), copies attachment data without 76-column wrapping, puts filenames
 *   unescaped inside quotes, and has no quoted-printable. Those are exactly our requirements.
 *
 * INVARIANTS
 *   Same input and options → same bytes. Output is 7-bit ASCII (but for a message/rfc822 or
 *   multipart attachment of UTF-8 text, sent as 8bit: `eightBit`), CRLF only, every line ≤ 998
 *   octets (headers fold at 78 where possible; bodies are ≤ 76-column QP/base64, composite
 *   attachments as they are), and it ends with CRLF.
 *   No request value can introduce a line break into a header.
 *
 * ERRORS
 *   MailInputError (422) naming the field, from address.ts, header.ts and mime.ts, or for a request
 *   with no recipient. RangeError for invalid options (a caller bug, not client input).
 */
import { dedupeRecipients, mailboxTokens, parseMailbox, parseMailboxes, type Envelope } from "./address";
import { MailInputError } from "./errors";
import { assertHeaderSafe, checkCustomHeader, foldHeader, unstructuredTokens } from "./header";
import {
  attachmentLeaf,
  multipart,
  renderEntity,
  resolveAttachment,
  textLeaf,
  type AttachmentInput,
  type Entity,
} from "./mime";

export type { AttachmentInput } from "./mime";

/** A validated Resend send request (only the fields that shape the message). */
export type SendRequest = {
  from: string;
  to?: string | readonly string[];
  cc?: string | readonly string[];
  bcc?: string | readonly string[];
  reply_to?: string | readonly string[];
  subject?: string;
  html?: string;
  text?: string;
  headers?: Readonly<Record<string, string>>;
  attachments?: readonly AttachmentInput[];
  tags?: readonly { name: string; value: string }[];
};

/** Injected clock and identifiers, so composing is deterministic. */
export type ComposeOptions = {
  /** Value of the Date header. */
  now: Date;
  /** Left-hand side of the Message-ID (e.g. the API email id). Default: crypto.randomUUID(). */
  messageId?: string;
  /** Seed for MIME boundaries. Default: the Message-ID left-hand side. */
  boundarySeed?: string;
};

/** The composed message and its SMTP envelope. */
export type ComposedMessage = { raw: string; messageId: string; envelope: Envelope; eightBit: boolean };

const CRLF = "\r\n";
const DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/** RFC 5322 §3.3 date-time in UTC. */
export function formatDate(now: Date): string {
  if (Number.isNaN(now.getTime())) throw new RangeError("compose: `now` is an invalid Date");
  const p2 = (n: number) => String(n).padStart(2, "0");
  return (
    `${DAYS[now.getUTCDay()]}, ${p2(now.getUTCDate())} ${MONTHS[now.getUTCMonth()]} ${now.getUTCFullYear()} ` +
    `${p2(now.getUTCHours())}:${p2(now.getUTCMinutes())}:${p2(now.getUTCSeconds())} +0000`
  );
}

/** Builds the RFC 5322 message for a send request. */
export function compose(input: SendRequest, opts: ComposeOptions): ComposedMessage {
  const from = parseMailbox("from", input.from);
  const to = parseMailboxes("to", input.to);
  const cc = parseMailboxes("cc", input.cc);
  const bcc = parseMailboxes("bcc", input.bcc);
  const replyTo = parseMailboxes("reply_to", input.reply_to);
  if (to.length + cc.length + bcc.length === 0) throw new MailInputError("to", "must contain at least one recipient");
  if (input.subject !== undefined) assertHeaderSafe("subject", input.subject);
  const custom = Object.entries(input.headers ?? {}).map(([k, v]) => checkCustomHeader(k, v));

  const left = opts.messageId ?? crypto.randomUUID();
  if (!/^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~.]{1,200}$/.test(left)) {
    throw new RangeError("compose: `messageId` must be 1–200 dot-atom characters");
  }
  const domain = from.address.slice(from.address.lastIndexOf("@") + 1);
  const messageId = custom.find((h) => h.overrides)?.value ?? `<${left}@${domain}>`;

  const fields = [foldHeader("From", mailboxTokens([from]))];
  if (to.length > 0) fields.push(foldHeader("To", mailboxTokens(to)));
  if (cc.length > 0) fields.push(foldHeader("Cc", mailboxTokens(cc)));
  if (replyTo.length > 0) fields.push(foldHeader("Reply-To", mailboxTokens(replyTo)));
  if (input.subject !== undefined) fields.push(foldHeader("Subject", unstructuredTokens(input.subject)));
  fields.push(`Date: ${formatDate(opts.now)}`, foldHeader("Message-ID", [messageId]), "MIME-Version: 1.0");
  for (const h of custom) if (!h.overrides) fields.push(foldHeader(h.name, unstructuredTokens(h.value)));

  const built = buildBody(input);
  // An address with a UTF-8 local part (RFC 6531) is written as it is (RFC 6532): the text is 8-bit.
  const utf8Address = [from, ...to, ...cc, ...replyTo].some((m) => /[^\x00-\x7f]/.test(m.address));
  const entity = renderEntity(built.entity, boundaries(opts.boundarySeed ?? left));
  const raw = [...fields, ...entity.headers].join(CRLF) + CRLF + CRLF + entity.body + CRLF;
  return {
    raw,
    messageId,
    envelope: { mailFrom: from.address, rcptTo: dedupeRecipients([...to, ...cc, ...bcc]) },
    eightBit: built.eightBit || utf8Address,
  };
}

/** Chooses the MIME tree: alternative for text+html, related for cid images, mixed for attachments. */
function buildBody(input: SendRequest): { entity: Entity; eightBit: boolean } {
  for (const k of ["text", "html"] as const) {
    if (input[k] !== undefined && typeof input[k] !== "string") throw new MailInputError(k, "must be a string");
  }
  const atts = (input.attachments ?? []).map((a, i) => resolveAttachment(a, i));
  const hasHtml = input.html !== undefined;
  const inline = atts.filter((a) => hasHtml && a.contentId !== undefined);
  const regular = atts.filter((a) => !inline.includes(a));

  let html: Entity | undefined = hasHtml ? textLeaf("html", input.html as string) : undefined;
  if (html !== undefined && inline.length > 0) {
    html = multipart("related", [html, ...inline.map((a) => attachmentLeaf(a, true))]);
  }
  let body: Entity;
  if (html !== undefined && input.text !== undefined) {
    body = multipart("alternative", [textLeaf("plain", input.text), html]);
  } else {
    body = html ?? textLeaf("plain", input.text ?? "");
  }
  if (regular.length > 0) body = multipart("mixed", [body, ...regular.map((a) => attachmentLeaf(a, false))]);
  return { entity: body, eightBit: atts.some((a) => a.composite?.cte === "8bit") };
}

/** A deterministic boundary generator: "=_cohort_<seed>_<n>" (≤ 70 chars, never in QP/base64 text). */
function boundaries(seed: string): () => string {
  const clean = seed.replace(/[^A-Za-z0-9]/g, "").slice(0, 40);
  let n = 0;
  return () => `=_cohort_${clean}_${n++}`;
}
