/**
 * Delivery status notifications (RFC 3464), composed purely: no Workers API, no I/O, no clock and
 * no randomness (the caller passes the time and a unique token).
 *
 * DESCRIPTION
 *   composeDsn(input)    the complete RFC 5322 text of a DSN to the original envelope sender:
 *                        `multipart/report; report-type=delivery-status` with three parts —
 *                        1. text/plain, for people (what happened to which recipient, why);
 *                        2. message/delivery-status: per-message fields (Reporting-MTA,
 *                           Original-Envelope-Id, Arrival-Date) and one block per recipient
 *                           (Original-Recipient, Final-Recipient, Action, Status, Remote-MTA,
 *                           Diagnostic-Code, Last-Attempt-Date, Will-Retry-Until);
 *                        3. text/rfc822-headers: the original message's header block.
 *                        From MAILER-DAEMON@<heloName>, To the envelope sender, Subject
 *                        "Undelivered Mail Returned to Sender" when any recipient failed, else
 *                        "Delayed Mail (still being retried)"; Auto-Submitted: auto-replied;
 *                        Message-ID <token@heloName>; Date from input.nowMs.
 *   shouldBounce(mailFrom)  false for the null sender ("" or "<>") and for MAILER-DAEMON (any
 *                        domain, any case): a bounce is never bounced (RFC 3464 §2, RFC 5321
 *                        §4.5.5). The DSN itself goes out with the null sender.
 *
 * INVARIANTS
 *   Output is 7-bit ASCII with CRLF line endings and no line longer than 998 octets. Non-ASCII
 *   text goes out as RFC 2047 words (headers), quoted-printable (parts 1 and 3), or, inside the
 *   delivery-status fields, as RFC 6533 `\x{HEX}` escapes (with address type utf-8 for a
 *   recipient that is not ASCII). Equal input gives equal output. The boundary occurs in no part.
 *
 * ERRORS
 *   RangeError for input that is a bug in the caller: no recipient, a status that does not fit
 *   the action (failed needs 5.x.x, delayed 4.x.x), an empty or CR/LF-bearing heloName, a null
 *   or MAILER-DAEMON sender (check shouldBounce first), or a sender whose local part is not ASCII
 *   (no 7-bit message can be addressed to it). A domain that is not a valid IDN throws the
 *   MailInputError of toAsciiDomain.
 */
import { toAsciiDomain } from "./address";
import { formatDate } from "./compose";
import { encodeQuotedPrintable } from "./encoding";
import { foldHeader, unstructuredTokens } from "./header";

/** One recipient's line in the report. */
export interface DsnRecipient {
  /** The address the relay tried (Final-Recipient). */
  address: string;
  /** The address as the sender gave it (ORCPT), when known and different. */
  originalRecipient?: string | null;
  /** "failed" (bounced or expired) or "delayed" (still being retried). */
  action: "failed" | "delayed";
  /** RFC 3463 enhanced status, e.g. "5.1.1" (failed) or "4.4.1" (delayed). */
  status: string;
  /** The remote MTA that answered, when one did (an MX host or the smarthost). */
  remoteMta?: string | null;
  /** The remote SMTP reply (code and text), or a local reason when no server answered. */
  diagnostic?: { code?: number | null; text: string } | null;
  /** When the last attempt ended, epoch ms. */
  lastAttemptMs: number;
  /** Delayed only: until when the relay keeps trying, epoch ms. */
  willRetryUntilMs?: number | null;
}

/** What a DSN is composed from. */
export interface DsnInput {
  /** The relay's name (HELO_NAME): Reporting-MTA and the From/Message-ID domain. */
  heloName: string;
  /** The original envelope sender: the DSN's recipient. */
  mailFrom: string;
  /** The original message's id in the relay (Original-Envelope-Id), optional. */
  envelopeId?: string | null;
  /** When the relay accepted the original message, epoch ms. */
  arrivalMs: number;
  /** The time the DSN is composed, epoch ms (its Date). */
  nowMs: number;
  /** A token unique to this DSN (e.g. "<message id>.<attempt>"): Message-ID and boundary. */
  token: string;
  recipients: DsnRecipient[];
  /** The original message's header block, as stored (CRLF or LF line ends; may lack the blank line). */
  originalHeaders: string;
}

const CRLF = "\r\n";

/** Whether a message from `mailFrom` may cause a DSN (never for a bounce). */
export function shouldBounce(mailFrom: string): boolean {
  const a = mailFrom
    .trim()
    .replace(/^<(.*)>$/, "$1")
    .trim();
  if (a === "") return false;
  const at = a.lastIndexOf("@");
  const local = (at < 0 ? a : a.slice(0, at)).toLowerCase();
  return local !== "mailer-daemon";
}

/** Composes the DSN (see header). */
export function composeDsn(input: DsnInput): string {
  checkInput(input);
  const failed = input.recipients.some((r) => r.action === "failed");
  const parts = [humanPart(input, failed), statusPart(input), headersPart(input.originalHeaders)];
  const boundary = pickBoundary(input, parts);
  const headers = [
    `From: Mail Delivery System <MAILER-DAEMON@${input.heloName}>`,
    `To: ${asciiAddress(input.mailFrom)}`,
    foldHeader(
      "Subject",
      unstructuredTokens(failed ? "Undelivered Mail Returned to Sender" : "Delayed Mail (still being retried)"),
    ),
    `Date: ${formatDate(new Date(input.nowMs))}`,
    `Message-ID: <${atomOf(input.token)}@${input.heloName}>`,
    "Auto-Submitted: auto-replied",
    "MIME-Version: 1.0",
    `Content-Type: multipart/report; report-type=delivery-status;${CRLF} boundary="${boundary}"`,
    "Content-Transfer-Encoding: 7bit",
  ];
  const body = parts.map((p) => `--${boundary}${CRLF}${p}`).join(CRLF);
  return `${headers.join(CRLF)}${CRLF}${CRLF}This is a MIME-encapsulated message.${CRLF}${CRLF}${body}${CRLF}--${boundary}--${CRLF}`;
}

/** Throws RangeError for caller bugs (see ERRORS). */
function checkInput(input: DsnInput): void {
  if (!input.heloName || /[\s\0<>@]/.test(input.heloName))
    throw new RangeError(`dsn: bad heloName ${JSON.stringify(input.heloName)}`);
  if (!shouldBounce(input.mailFrom)) throw new RangeError("dsn: never bounce a bounce (null or MAILER-DAEMON sender)");
  if (input.recipients.length === 0) throw new RangeError("dsn: no recipients");
  for (const r of input.recipients) {
    const want = r.action === "failed" ? "5" : "4";
    if (!/^[245]\.\d{1,3}\.\d{1,3}$/.test(r.status) || r.status[0] !== want) {
      throw new RangeError(`dsn: status ${JSON.stringify(r.status)} does not fit action ${r.action}`);
    }
  }
}

/** The sender as an ASCII address (IDN domain → punycode); throws for a non-ASCII local part. */
function asciiAddress(mailFrom: string): string {
  const a = mailFrom.trim().replace(/^<(.*)>$/, "$1");
  const at = a.lastIndexOf("@");
  const local = at < 0 ? a : a.slice(0, at);
  if (!/^[\x21-\x7e]+$/.test(local) || /[<>\r\n]/.test(local))
    throw new RangeError("dsn: the sender's local part is not ASCII; no 7-bit DSN can reach it");
  return at < 0 ? local : `${local}@${toAsciiDomain("mail_from", a.slice(at + 1))}`;
}

/** `token` reduced to dot-atom characters (for the Message-ID and the boundary). */
function atomOf(token: string): string {
  const t = token
    .replace(/[^A-Za-z0-9!#$%&'*+\-/=?^_`{|}~.]/g, "_")
    .replace(/^\.+|\.+$/g, "")
    .replace(/\.{2,}/g, ".");
  return t || "dsn";
}

/** RFC 6533 utf-8-addr-xtext style escaping: non-ASCII (and "\\") as \x{HEX}. */
function xtext(text: string): string {
  let out = "";
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    out += cp < 0x20 || cp > 0x7e || ch === "\\" ? `\\x{${cp.toString(16).toUpperCase()}}` : ch;
  }
  return out;
}

/** An address field value: `rfc822; addr`, or `utf-8; <escaped>` when not ASCII. */
function addressValue(address: string): string {
  return /^[\x21-\x7e]+$/.test(address) ? `rfc822; ${address}` : `utf-8; ${xtext(address)}`;
}

/** A delivery-status field, folded at spaces (values are 7-bit after xtext). */
function field(name: string, value: string): string {
  return foldHeader(name, value.split(" "));
}

/** Part 2: message/delivery-status. */
function statusPart(input: DsnInput): string {
  const perMessage = [
    field("Reporting-MTA", `dns; ${input.heloName}`),
    ...(input.envelopeId ? [field("Original-Envelope-Id", xtext(input.envelopeId))] : []),
    field("Arrival-Date", formatDate(new Date(input.arrivalMs))),
  ];
  const blocks = input.recipients.map((r) => recipientFields(r).join(CRLF));
  return [
    "Content-Description: Delivery report",
    "Content-Type: message/delivery-status",
    "",
    perMessage.join(CRLF),
    ...blocks.flatMap((b) => ["", b]),
    "",
  ].join(CRLF);
}

/** The per-recipient fields of one recipient. */
function recipientFields(r: DsnRecipient): string[] {
  const out: string[] = [];
  if (r.originalRecipient) out.push(field("Original-Recipient", addressValue(r.originalRecipient)));
  out.push(field("Final-Recipient", addressValue(r.address)), `Action: ${r.action}`, `Status: ${r.status}`);
  if (r.remoteMta) out.push(field("Remote-MTA", `dns; ${xtext(r.remoteMta)}`));
  const d = diagnosticOf(r);
  if (d) out.push(field("Diagnostic-Code", d));
  out.push(field("Last-Attempt-Date", formatDate(new Date(r.lastAttemptMs))));
  if (r.action === "delayed" && r.willRetryUntilMs)
    out.push(field("Will-Retry-Until", formatDate(new Date(r.willRetryUntilMs))));
  return out;
}

/** `smtp; <code> <text>` for a remote reply; `X-Cohort; <text>` for a local reason. */
function diagnosticOf(r: DsnRecipient): string | null {
  const d = r.diagnostic;
  if (!d) return null;
  const text = xtext(d.text.replace(/\s+/g, " ").trim());
  if (d.code) return `smtp; ${d.code}${text ? ` ${text}` : ""}`;
  return text ? `X-Cohort; ${text}` : null;
}

/** Part 1: the text for people. */
function humanPart(input: DsnInput, failed: boolean): string {
  const lines = [`This is the mail system at host ${input.heloName}.`, ""];
  if (failed) {
    lines.push(
      "Your message could not be delivered to one or more recipients.",
      "It is attached below; the reasons follow.",
    );
  } else {
    lines.push(
      "Your message has not been delivered yet to one or more recipients.",
      "It is still being retried; you do not need to send it again.",
    );
  }
  lines.push("", "                   The mail system", "");
  for (const r of input.recipients) {
    const why = r.diagnostic
      ? `${r.diagnostic.code ? `${r.diagnostic.code} ` : ""}${r.diagnostic.text}`
      : `status ${r.status}`;
    const host = r.remoteMta ? ` (host ${r.remoteMta} said: ${why})` : `: ${why}`;
    lines.push(`<${r.address}>${r.action === "failed" ? "" : " (delayed)"}${host}`);
    if (r.action === "delayed" && r.willRetryUntilMs)
      lines.push(`  It will be retried until ${formatDate(new Date(r.willRetryUntilMs))}.`);
  }
  return [
    "Content-Description: Notification",
    "Content-Type: text/plain; charset=utf-8",
    "Content-Transfer-Encoding: quoted-printable",
    "",
    encodeQuotedPrintable(lines.join("\n")),
    "",
  ].join(CRLF);
}

/** Part 3: the original header block (without its blank line), quoted-printable when not 7-bit. */
function headersPart(original: string): string {
  const block = original
    .replace(/\r\n|\r|\n/g, "\n")
    .replace(/\n\n[\s\S]*$/, "")
    .replace(/\n+$/, "");
  const ascii = /^[\x09\x20-\x7e\n]*$/.test(block) && block.split("\n").every((l) => l.length <= 998);
  const head = ["Content-Description: Undelivered Message Headers", "Content-Type: text/rfc822-headers"];
  if (ascii) return [...head, "Content-Transfer-Encoding: 7bit", "", block.split("\n").join(CRLF), ""].join(CRLF);
  return [
    ...head.slice(0, 1),
    "Content-Type: text/rfc822-headers; charset=utf-8",
    "Content-Transfer-Encoding: quoted-printable",
    "",
    encodeQuotedPrintable(block),
    "",
  ].join(CRLF);
}

/** A boundary that occurs in no part ("=_" cannot occur in quoted-printable either). */
function pickBoundary(input: DsnInput, parts: string[]): string {
  const base = `=_${atomOf(input.token)
    .replace(/[^A-Za-z0-9'()+_,\-./:=?]/g, "_")
    .slice(0, 40)}/${input.heloName}`.slice(0, 68);
  for (let n = 0; ; n++) {
    const b = n === 0 ? base : `${base}.${n}`;
    if (!parts.some((p) => p.includes(`--${b}`))) return b;
  }
}
