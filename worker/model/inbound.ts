/** What mail that came in is, as worker/mail/inbound.ts reads it: the vocabulary the inbound stage and its pure core share. */

/** One recipient of a delivery status notification. */
export interface DsnRecipient {
  /** The address, without `rfc822;`; null when the notice names none. */
  address: string | null;
  /** Original-Recipient (the address as the relay gave it), or null. */
  original: string | null;
  action: string;
  /** RFC 3463 status, the most specific one the notice gives, e.g. "5.1.1". */
  status: string;
  /** The remote server's reply (the Diagnostic-Code without its type), else the text's reason, or "". */
  diagnostic: string;
  /** The Diagnostic-Code's type ("smtp", "x-unix"...), lower-case, or null. */
  diagnosticType: string | null;
  remoteMta: string | null;
  /** A failure after retrying: Action failed with a 4.x.x status, or the text says the retries ran out (mail/dsn-read.ts). */
  expired: boolean;
}

/** What readInbound found. */
export type InboundKind =
  | { kind: "arf" }
  | {
      kind: "dsn";
      format: "rfc3464" | "heuristic";
      recipients: DsnRecipient[];
      originalMessageId: string | null;
      references: string[];
    }
  | { kind: "auto-reply"; why: string }
  | { kind: "other" };
