/**
 * What a message that came back by mail is: a delivery status notification, a feedback-loop
 * report, an automatic reply, or none of these.
 *
 * DESCRIPTION
 *   readInbound(mail)   classifies an inbound message (its header block, envelope sender, parts
 *                       and text; the shell parses the MIME), in this order:
 *     arf         a `message/feedback-report` part (RFC 5965; read with arf.ts readArf).
 *     dsn/rfc3464 a `message/delivery-status` (or RFC 6533 `message/global-delivery-status`)
 *                 part: one recipient per block after the per-message block, each with its
 *                 Final-Recipient (else Original-Recipient), Action, Status, Diagnostic-Code and
 *                 Remote-MTA; the original's Message-ID from its `message/rfc822` or
 *                 `text/rfc822-headers` part. Postfix, Exim, Sendmail, Gmail, Outlook.com and
 *                 Yahoo all send this form.
 *     auto-reply  RFC 3834's `Auto-Submitted: auto-replied`, the common `X-Autoreply`,
 *                 `X-Autorespond`, `Precedence: auto_reply`, or an out-of-office Subject
 *                 ("Automatic reply:", "Out of Office", "Auto:", "Autosvar", ...). Checked after
 *                 the DSN forms, which carry `Auto-Submitted: auto-replied` themselves.
 *     dsn/heuristic  a bounce without the RFC 3464 part (qmail, old Yahoo and Exchange forms):
 *                 from a null sender, MAILER-DAEMON or postmaster, with a bounce Subject
 *                 ("Undeliverable", "Delivery Status Notification (Failure)", "failure notice",
 *                 "Returned mail", "Mail delivery failed", ...). Its status is the first
 *                 enhanced status code (RFC 3463) in the text, else the first reply code, else
 *                 5.0.0; its action is `delayed` for a delay warning's Subject, else `failed`;
 *                 its recipients are the addresses the notice's text names before the copy of the
 *                 original (the shell prefers the VERP address's recipient).
 *     other       anything else.
 *   bounceReply(r)      a failed recipient's reply as the relay records replies: code (from an
 *                       `smtp;` Diagnostic-Code, else 550/450 by the status class), enhanced
 *                       status, text (the diagnostic, else the status) and mx (the Remote-MTA).
 *
 * INVARIANTS
 *   Pure: no I/O, no clock. Header names are matched case-insensitively and folded lines are
 *   unfolded (arf.ts fields).
 */
import { addresses, fields, type ReportPart } from "./arf";

/** An inbound message, as the shell hands it over. */
export interface InboundMail {
  /** The top of the raw message (its header block is read). */
  head: string;
  /** The envelope sender; "" for a null sender (`<>`). */
  envelopeFrom: string;
  /** The parsed parts that are not the text (postal-mime's attachments), as text. */
  parts: ReportPart[];
  /** The plain text (or text of the HTML) of the message. */
  text: string;
}

/** One recipient of a delivery status notification. */
export interface DsnRecipient {
  /** The address, without `rfc822;`; null when the notice names none. */
  address: string | null;
  action: string;
  /** RFC 3463 status, e.g. "5.1.1". */
  status: string;
  /** The remote server's reply (the Diagnostic-Code without its type), or "". */
  diagnostic: string;
  /** The Diagnostic-Code's type ("smtp", "x-unix"...), lower-case, or null. */
  diagnosticType: string | null;
  remoteMta: string | null;
}

/** What readInbound found. */
export type InboundKind =
  | { kind: "arf" }
  | { kind: "dsn"; format: "rfc3464" | "heuristic"; recipients: DsnRecipient[]; originalMessageId: string | null }
  | { kind: "auto-reply"; why: string }
  | { kind: "other" };

const DSN_TYPES = ["message/delivery-status", "message/global-delivery-status"];
const ORIGINAL_TYPES = ["message/rfc822", "text/rfc822-headers", "message/global", "message/global-headers"];
const OOO_SUBJECT = /^\s*(automatic reply|auto(matische)? ?(reply|antwort|response)|auto:|out of (the )?office|abwesenheitsnotiz|autosvar|r[ée]ponse automatique|risposta automatica|respuesta autom[áa]tica|vacation)/i;
const BOUNCE_SUBJECT = /undeliver|undelivered|delivery (status notification|failure|has failed|problem)|failure notice|returned mail|mail delivery (failed|failure|subsystem)|non[- ]?delivery|could not be delivered|delivery (notification|report)|warning: (could not send|message .* delayed)|delayed mail|returned to sender/i;
const DELAY_SUBJECT = /\(delay\)|delay(ed)? mail|warning|delayed|still being retried/i;

function first(f: Map<string, string[]>, name: string): string | null {
  return f.get(name)?.[0] ?? null;
}

/** `rfc822; a@b` → a@b; `<a@b>` → a@b. */
function typedAddress(value: string | null): string | null {
  if (value === null) return null;
  const v = value.replace(/^[^;]*;\s*/, "").trim().replace(/^<|>$/g, "");
  return /^[^\s@]+@[^\s@]+$/.test(v) ? v : null;
}

/** The blocks of a delivery-status part: per-message first, then one per recipient. */
function blocks(text: string): Map<string, string[]>[] {
  return text.replace(/\r\n/g, "\n").split(/\n[ \t]*\n/).filter((b) => b.trim() !== "").map((b) => fields(b));
}

function originalMessageId(parts: readonly ReportPart[]): string | null {
  const original = parts.find((p) => ORIGINAL_TYPES.includes(p.mimeType.toLowerCase()));
  return (first(fields(original?.text ?? ""), "message-id") ?? "").match(/<[^<>\s]+>/)?.[0] ?? null;
}

function rfc3464(part: ReportPart, parts: readonly ReportPart[]): InboundKind {
  const recipients = blocks(part.text).slice(1).flatMap((b): DsnRecipient[] => {
    const action = first(b, "action")?.toLowerCase().trim();
    if (!action) return [];
    const diag = first(b, "diagnostic-code");
    const semi = diag?.indexOf(";") ?? -1;
    return [{
      address: typedAddress(first(b, "final-recipient")) ?? typedAddress(first(b, "original-recipient")),
      action,
      status: (first(b, "status") ?? "").match(/[245]\.\d{1,3}\.\d{1,3}/)?.[0] ?? (action === "failed" ? "5.0.0" : "4.0.0"),
      diagnostic: diag === null ? "" : (semi >= 0 ? diag.slice(semi + 1) : diag).trim(),
      diagnosticType: diag !== null && semi >= 0 ? diag.slice(0, semi).trim().toLowerCase() : null,
      remoteMta: first(b, "remote-mta")?.replace(/^[^;]*;\s*/, "").trim() || null,
    }];
  });
  return { kind: "dsn", format: "rfc3464", recipients, originalMessageId: originalMessageId(parts) };
}

function autoReply(head: Map<string, string[]>): string | null {
  const auto = first(head, "auto-submitted")?.toLowerCase() ?? "";
  if (auto.startsWith("auto-replied")) return "Auto-Submitted: auto-replied";
  if (head.has("x-autoreply") || head.has("x-autorespond")) return head.has("x-autoreply") ? "X-Autoreply" : "X-Autorespond";
  if ((first(head, "precedence") ?? "").toLowerCase().trim() === "auto_reply") return "Precedence: auto_reply";
  if (OOO_SUBJECT.test(first(head, "subject") ?? "")) return "an out-of-office Subject";
  return null;
}

function heuristic(mail: InboundMail, head: Map<string, string[]>): InboundKind | null {
  const from = (first(head, "from") ?? "").toLowerCase();
  const subject = first(head, "subject") ?? "";
  const daemon = mail.envelopeFrom === "" || /mailer-daemon|postmaster|mail delivery (sub)?system/.test(from);
  if (!daemon || !BOUNCE_SUBJECT.test(subject)) return null;
  const all = [mail.text, ...mail.parts.filter((p) => p.mimeType.toLowerCase().startsWith("text/plain")).map((p) => p.text)].join("\n");
  const text = all.split(/^-+ ?(?:below this line|original message)|^the original message/im)[0]!;
  const enhanced = text.match(/\b[45]\.\d{1,3}\.\d{1,3}\b/)?.[0] ?? null;
  const code = text.match(/\b([45]\d\d)[ :-]/)?.[1] ?? null;
  const delayed = DELAY_SUBJECT.test(subject) && !/fail/i.test(subject);
  const status = enhanced ?? (code ? `${code[0]}.0.0` : delayed ? "4.0.0" : "5.0.0");
  const found0 = text.split(/\r?\n/).find((l) => enhanced !== null ? l.includes(enhanced) : code !== null && l.includes(code))?.trim() ?? "";
  const line = code !== null && found0.includes(code) ? found0.slice(found0.indexOf(code)) : found0;
  const found = [...new Set(text.split(/\s+/).flatMap((w) => addresses(w.replace(/^[(\[]+|[)\]:,;.]+$/g, ""))).map((a) => a.toLowerCase()))];
  const recipients = (found.length > 0 ? found : [null]).map((address): DsnRecipient => ({
    address, action: delayed ? "delayed" : "failed", status, diagnostic: line || subject, diagnosticType: code !== null ? "smtp" : null, remoteMta: null,
  }));
  const quoted = all.slice(text.length).match(/^message-id:\s*(<[^<>\s]+>)/im)?.[1] ?? null;
  return { kind: "dsn", format: "heuristic", recipients, originalMessageId: originalMessageId(mail.parts) ?? quoted };
}

/** See the header. */
export function readInbound(mail: InboundMail): InboundKind {
  if (mail.parts.some((p) => p.mimeType.toLowerCase() === "message/feedback-report")) return { kind: "arf" };
  const dsn = mail.parts.find((p) => DSN_TYPES.includes(p.mimeType.toLowerCase()));
  if (dsn) return rfc3464(dsn, mail.parts);
  const head = fields(mail.head);
  const why = autoReply(head);
  if (why !== null) return { kind: "auto-reply", why };
  return heuristic(mail, head) ?? { kind: "other" };
}

/** A failed recipient's reply as the relay records one (see the header). */
export function bounceReply(r: DsnRecipient): { code: number | null; enhanced: string; text: string; mx?: string } {
  const smtp = r.diagnosticType === "smtp" ? r.diagnostic.match(/^([245]\d\d)\b/)?.[1] : undefined;
  const code = smtp !== undefined ? Number(smtp) : r.status.startsWith("5") ? 550 : r.status.startsWith("4") ? 450 : null;
  return { code, enhanced: r.status, text: r.diagnostic || `status ${r.status}`, ...(r.remoteMta ? { mx: r.remoteMta } : {}) };
}
