/**
 * Reading a delivery status notification (RFC 3464) as a postmaster reads one: each recipient's
 * most specific status, the reason in words, and whether the failure is an expiry.
 *
 * DESCRIPTION
 *   readDsnPart(statusText, humanText)  the recipients of a `message/delivery-status` part: one
 *       per block after the per-message block that has an Action, each with
 *         address     Final-Recipient (else Original-Recipient), without `rfc822;`;
 *         original    Original-Recipient, or null;
 *         status      the most specific RFC 3463 code among Status, the Diagnostic-Code and the
 *                     human-readable part's lines about the recipient (mostSpecific): Exim writes
 *                     `Status: 5.0.0` whatever the remote server said;
 *         diagnostic  the Diagnostic-Code without its type, else the reason the human-readable
 *                     part gives for the recipient (reasonFor), else "";
 *         expired     `failed` after retrying: a 4.x.x code, or words of a retry time that ran
 *                     out ("retry timeout exceeded", "too long in the queue").
 *   mostSpecific(codes)   of the enhanced codes given (null skipped), the one with the most
 *       non-zero subject and detail digits, the first of equals: 5.1.1 over 5.0.0, 4.3.2 over
 *       5.0.0 (a `failed` 4.x.x is an expiry), 5.1.10 over 5.1.0.
 *   reasonFor(text, address)  what the human-readable text says after the line naming the
 *       address: the rest of that line and the indented lines below it (Exim's "Unrouteable
 *       address", Sendmail's "(reason: 550 5.1.1 ...)"), at most 500 characters; null when the
 *       text does not name the address or says nothing more.
 *   isExpiry(action, status, words)  see `expired` above.
 *
 * INVARIANTS
 *   Pure: no I/O, no clock. Field names are matched case-insensitively, folded lines unfolded.
 */
import type { DsnRecipient } from "../model/inbound";

export type { DsnRecipient };
import { fields } from "./arf";

const ENHANCED_RE = /(?:^|[^\d.])([245])\.(\d{1,3})\.(\d{1,3})(?![\d.]*\d)/;
const EXPIRY_RE = new RegExp(
  [
    "retry time ?(out)? (was )?(exceeded|reached)",
    "retry timeout",
    "too long in (the )?queue",
    "been in the queue too long",
    "delivery time expired",
    "message expired",
    "could not be delivered within",
  ].join("|"),
  "i",
);

function first(f: Map<string, string[]>, name: string): string | null {
  return f.get(name)?.[0] ?? null;
}

/** The first enhanced code in `text`, or null. */
export function enhancedIn(text: string | null): string | null {
  const m = text === null ? null : ENHANCED_RE.exec(text);
  return m ? `${m[1]}.${Number(m[2])}.${Number(m[3])}` : null;
}

/** See the header. */
export function mostSpecific(codes: readonly (string | null)[]): string | null {
  let best: string | null = null;
  let bestScore = -1;
  for (const c of codes) {
    if (c === null) continue;
    const [, sub, detail] = c.split(".");
    const score = (sub !== "0" ? 1 : 0) + (detail !== "0" ? 1 : 0);
    if (score > bestScore) [best, bestScore] = [c, score];
  }
  return best;
}

/** `rfc822; a@b` → a@b; `<a@b>` → a@b. */
export function typedAddress(value: string | null): string | null {
  if (value === null) return null;
  const v = value
    .replace(/^[^;]*;\s*/, "")
    .trim()
    .replace(/^<|>$/g, "");
  return /^[^\s@]+@[^\s@]+$/.test(v) ? v : null;
}

/** See the header. */
export function reasonFor(text: string, address: string): string | null {
  const lines = text.replace(/\r\n/g, "\n").split("\n");
  const want = address.toLowerCase();
  const i = lines.findIndex((l) => l.toLowerCase().includes(want));
  if (i < 0) return null;
  const line = lines[i]!;
  const rest = line
    .slice(line.toLowerCase().indexOf(want) + want.length)
    .replace(/^[>\s:,;.)\]]+/, "")
    .trim();
  const below: string[] = [];
  for (let j = i + 1; j < lines.length && /^[ \t]+\S/.test(lines[j]!); j++) below.push(lines[j]!.trim());
  const reason = [rest, ...below]
    .filter((s) => s !== "")
    .join(" ")
    .replace(/^\(reason:\s*(.*?)\)?$/i, "$1")
    .trim();
  return reason === "" ? null : reason.slice(0, 500);
}

/** See the header. */
export function isExpiry(action: string, status: string, words: string): boolean {
  return action === "failed" && (status.startsWith("4.") || EXPIRY_RE.test(words));
}

/** The blocks of a delivery-status part: per-message first, then one per recipient. */
function blocks(text: string): Map<string, string[]>[] {
  return text
    .replace(/\r\n/g, "\n")
    .split(/\n[ \t]*\n/)
    .filter((b) => b.trim() !== "")
    .map((b) => fields(b));
}

/** See the header. */
export function readDsnPart(statusText: string, humanText: string): DsnRecipient[] {
  return blocks(statusText)
    .slice(1)
    .flatMap((b): DsnRecipient[] => {
      const action = first(b, "action")?.toLowerCase().trim();
      if (!action) return [];
      const address = typedAddress(first(b, "final-recipient")) ?? typedAddress(first(b, "original-recipient"));
      const original = typedAddress(first(b, "original-recipient"));
      const diag = first(b, "diagnostic-code");
      const semi = diag?.indexOf(";") ?? -1;
      const diagText = diag === null ? "" : (semi >= 0 ? diag.slice(semi + 1) : diag).trim();
      const reason =
        address === null
          ? null
          : (reasonFor(humanText, address) ?? (original === null ? null : reasonFor(humanText, original)));
      const status =
        mostSpecific([enhancedIn(first(b, "status")), enhancedIn(diagText), enhancedIn(reason)]) ??
        (action === "failed" ? "5.0.0" : "4.0.0");
      const diagnostic = diagText || reason || "";
      return [
        {
          address,
          original,
          action,
          status,
          diagnostic,
          diagnosticType: diag !== null && semi >= 0 ? diag.slice(0, semi).trim().toLowerCase() : null,
          remoteMta:
            first(b, "remote-mta")
              ?.replace(/^[^;]*;\s*/, "")
              .trim() || null,
          expired: isExpiry(action, status, `${diagText} ${reason ?? ""}`),
        },
      ];
    });
}
