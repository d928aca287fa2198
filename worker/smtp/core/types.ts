/*
 * NAME
 *   types - messages in, events in, actions out, and results of an SMTP session
 *
 * SUMMARY
 *   The vocabulary shared by the pure session (session.ts, transaction.ts,
 *   outcome.ts) and the adapter that drives it (socket.ts).
 *
 * DESCRIPTION
 *   MessageEnvelope is one message to deliver: sender, recipients, size, and
 *   whether it needs 8BITMIME or SMTPUTF8. The body itself never enters the
 *   core; the adapter streams it when told to.
 *
 *   SessionEvent is what the adapter reports: the connection opened, a reply
 *   arrived, TLS is up, the body was written, the current wait timed out, or
 *   a failure happened (an SmtpFailure value, see errors.ts).
 *
 *   SessionAction is what the core asks for: connect, send command text,
 *   start TLS, stream a body, close, and finally done with the outcome (or,
 *   for a session kept open, idle once its messages are decided).
 *
 *   SessionOutcome is the end result: one TransactionResult per message in
 *   input order, one RecipientResult per recipient in input order, and
 *   siteFailure, non-null only for a soft connection or handshake failure
 *   before any transaction completed (scheduler.md §6.1 negative feedback).
 *
 * INVARIANTS
 *   All of these are plain JSON-serialisable data.
 *
 * ERRORS
 *   None.
 */

import type { SmtpStep } from "./config";
import type { SmtpFailure } from "./errors";
import type { SmtpReply } from "./reply";

/** One message to send in the session. */
export interface MessageEnvelope {
  /** Caller's id, echoed in the result. */
  id: string;
  /** Envelope sender; "" for the null sender "<>". */
  mailFrom: string;
  /** Envelope recipients, in order. */
  rcptTo: string[];
  /** Body size in bytes after CRLF normalisation (RFC 1870 SIZE estimate). */
  sizeBytes: number;
  /** Body has 8-bit content: send BODY=8BITMIME when the server offers it. */
  eightBitMime: boolean;
  /** Message needs SMTPUTF8 (also implied by a non-ASCII envelope address). */
  smtpUtf8: boolean;
}

/** Final state of one recipient after this attempt. */
export type RecipientStatus = "delivered" | "deferred" | "bounced";

/** Who produced a recipient's result. */
export type ResultSource = "remote" | "local";

/** Result for one recipient. */
export interface RecipientResult {
  rcpt: string;
  /** Server reply code, or a synthesised code when source is "local". */
  code: number;
  /** RFC 3463 status, or null when the server gave none. */
  enhanced: string | null;
  text: string;
  status: RecipientStatus;
  /** "remote": the server's reply; "local": decided here (size, timeout, lost connection). */
  source: ResultSource;
}

/** Result for one message (one mail transaction). */
export interface TransactionResult {
  messageId: string;
  recipients: RecipientResult[];
  remoteHost: string;
  /** The session was encrypted when the transaction ran. */
  tls: boolean;
  /** The connection was lost after the final "." was sent: the server may have the message. */
  possibleDuplicate: boolean;
  /**
   * Why the session was not encrypted although TLS was allowed: STARTTLS not offered or refused,
   * or the handshake's failure (opportunistic TLS then went on in plaintext). For TLS reporting.
   */
  tlsProblem?: string;
}

/** Destination-level failure for concurrency feedback (Postfix's destination status). */
export interface SiteFailure {
  /** Always a 4.x.x status. */
  dsnStatus: string;
  reason: string;
}

/** What a whole session produced. */
export interface SessionOutcome {
  siteFailure: SiteFailure | null;
  transactions: TransactionResult[];
  remoteHost: string;
  /** The session ended encrypted. */
  tls: boolean;
  /**
   * A cached connection failed its reuse check (the RSET before the first resumed message):
   * nothing of the resumed messages reached the server, and they may go on a new connection.
   */
  staleCache?: boolean;
}

/** Which way the adapter should open the connection (cloudflare:sockets secureTransport). */
export type SecureTransport = "off" | "on" | "starttls";

/** An input to the session. */
export type SessionEvent =
  | { kind: "connected" }
  | { kind: "reply"; reply: SmtpReply }
  | { kind: "tls-established" }
  | { kind: "body-sent" }
  | { kind: "timeout" }
  | { kind: "failed"; failure: SmtpFailure };

/** An output of the session, carried out by the adapter in order. */
export type SessionAction =
  | { kind: "connect"; secureTransport: SecureTransport }
  | { kind: "send"; data: string }
  | { kind: "starttls" }
  | { kind: "stream-body"; messageId: string }
  | { kind: "close" }
  /** A kept-open session finished its messages: the connection stays, resumeSession adds more. */
  | { kind: "idle" }
  | { kind: "done"; outcome: SessionOutcome };

/** What the session is waiting for and how long the adapter may wait. */
export interface WaitSpec {
  step: SmtpStep;
  timeoutSec: number;
}
