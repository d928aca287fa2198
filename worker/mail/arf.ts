/**
 * Reading an Abuse Reporting Format report (RFC 5965): a feedback loop's complaint about a
 * message this relay sent.
 *
 * DESCRIPTION
 *   readArf(parts, lenient?)  takes the parts of a parsed `multipart/report; report-type=feedback-report`
 *                    (mime type and text of each; postal-mime's attachments) and returns the
 *                    complaint: the Feedback-Type (lower-cased; "abuse" when absent), the
 *                    Original-Rcpt-To addresses (the original's To when the report has none and
 *                    it names exactly one), and the original's Message-ID, from its
 *                    `message/rfc822` or `text/rfc822-headers` part. `lenient` (a report to a
 *                    VERP address, which names the email and recipient itself): no recipient
 *                    (feedback loops often redact it) and no Message-ID are errors, [] and "".
 *   fields(text)     the first header block of `text`, unfolded: lower-cased name → values.
 *   addresses(value) the bare addresses of an address field (or an Original-Rcpt-To value).
 *   COMPLAINT_FEEDBACK_TYPES  the Feedback-Types that are complaints (RFC 5965 §7.3): abuse,
 *                    fraud, virus, other; not-spam and auth-failure (RFC 6591) are not.
 *   emailIdOf(messageId, isId)  the relay's email id in a Message-ID it generated,
 *                    `<email id@from-domain>`, or null (a custom or foreign Message-ID).
 *
 * INVARIANTS
 *   Pure: no I/O. Header names are matched case-insensitively, folded lines are unfolded, and
 *   only the first header block of the original is read.
 *
 * ERRORS
 *   ArfError (brand isArfError) with a stable `code`: "not_arf" (no message/feedback-report
 *   part), "no_original" (no Message-ID in the original part), "no_recipient" (no
 *   Original-Rcpt-To and no single To address).
 */

/** See the header. */
export const COMPLAINT_FEEDBACK_TYPES = ["abuse", "fraud", "virus", "other"] as const;

/** One part of the report. */
export interface ReportPart {
  mimeType: string;
  text: string;
}

/** What a report says. */
export interface ArfComplaint {
  feedbackType: string;
  recipients: string[];
  messageId: string;
}

/** A report that cannot be used; `code` is stable. */
export class ArfError extends Error {
  readonly isArfError = true;
  constructor(
    readonly code: "not_arf" | "no_original" | "no_recipient",
    message: string,
  ) {
    super(message);
    this.name = "ArfError";
  }
}

/** The fields of the first header block of `text` (unfolded), name lower-cased → values. */
export function fields(text: string): Map<string, string[]> {
  const block = text.replace(/\r\n/g, "\n").split(/\n\n/, 1)[0] ?? "";
  const out = new Map<string, string[]>();
  for (const line of block.replace(/\n[ \t]+/g, " ").split("\n")) {
    const i = line.indexOf(":");
    if (i <= 0) continue;
    const name = line.slice(0, i).trim().toLowerCase();
    out.set(name, [...(out.get(name) ?? []), line.slice(i + 1).trim()]);
  }
  return out;
}

/** The bare addresses of an address field or an Original-Rcpt-To value. */
export function addresses(value: string): string[] {
  const bracketed = [...value.matchAll(/<([^<>\s]+@[^<>\s]+)>/g)].map((m) => m[1]!);
  if (bracketed.length > 0) return bracketed;
  return value
    .split(",")
    .map((v) => v.trim().replace(/^rfc822;\s*/i, ""))
    .filter((v) => /^[^\s@]+@[^\s@]+$/.test(v));
}

/** The complaint in a report's parts (see the header). */
export function readArf(parts: readonly ReportPart[], lenient = false): ArfComplaint {
  const report = parts.find((p) => p.mimeType.toLowerCase() === "message/feedback-report");
  if (!report) throw new ArfError("not_arf", "no message/feedback-report part: not an ARF report (RFC 5965)");
  const f = fields(report.text);
  const original = parts.find((p) => ["message/rfc822", "text/rfc822-headers"].includes(p.mimeType.toLowerCase()));
  const o = fields(original?.text ?? "");
  const messageId = (o.get("message-id")?.[0] ?? "").match(/<[^<>\s]+>/)?.[0];
  if (!messageId && !lenient)
    throw new ArfError("no_original", "the report does not carry the original message's Message-ID");
  let recipients = (f.get("original-rcpt-to") ?? []).flatMap(addresses);
  if (recipients.length === 0) {
    const to = (o.get("to") ?? []).flatMap(addresses);
    if (to.length === 1) recipients = to;
  }
  if (recipients.length === 0 && !lenient)
    throw new ArfError(
      "no_recipient",
      "the report names no Original-Rcpt-To, and the original has no single To address",
    );
  return {
    feedbackType: (f.get("feedback-type")?.[0] ?? "abuse").toLowerCase(),
    recipients: [...new Set(recipients)],
    messageId: messageId ?? "",
  };
}

/** The email id in a Message-ID the relay generated, or null. */
export function emailIdOf(messageId: string, isId: (s: string) => boolean): string | null {
  const left = /^<([^@<>]+)@[^<>]+>$/.exec(messageId.trim())?.[1];
  return left !== undefined && isId(left) ? left : null;
}
