/*
 * NAME
 *   state - the SMTP client session state record
 *
 * SUMMARY
 *   The plain, JSON-serialisable state that session.ts, transaction.ts and
 *   outcome.ts pass around, plus the small helpers they share.
 *
 * DESCRIPTION
 *   SessionState says which phase the conversation is in, what the session
 *   waits for (wait), what the server announced (caps), the message being
 *   sent (txn) and the results decided so far (results, one slot per input
 *   message, null until decided).
 *
 *   cloneState(s) copies everything a transition may change, so a handler
 *   can edit the copy and the caller's state stays untouched.
 *
 *   waitIn(s, step, cfg) sets s.wait to the step and its timeout.
 *
 *   buildRecipientResult(rcpt, reply) and applyTemplate(rcpt, t) build
 *   recipient results; classifyStatus(code) is 2xx delivered, 4xx deferred,
 *   5xx bounced.
 *
 * INVARIANTS
 *   phase "done" <=> outcome !== null && wait === null.
 *   phase "idle": every message so far is decided, outcome === null, wait === null.
 *   txn !== null only while a transaction is being set up or sent.
 *   results[i] is null until message i is decided, and never changes after.
 *
 * ERRORS
 *   None.
 */

import { selectTimeout, type SessionConfig, type SmtpStep } from "./config";
import type { EhloCapabilities } from "./ehlo";
import type { SmtpReply } from "./reply";
import type {
  MessageEnvelope,
  RecipientResult,
  RecipientStatus,
  ResultSource,
  SessionAction,
  SessionOutcome,
  TransactionResult,
  WaitSpec,
} from "./types";

/** Where the conversation is. */
export type SessionPhase =
  | "connecting"
  | "greeting"
  | "ehlo"
  | "helo"
  | "starttls"
  | "tls-handshake"
  | "auth-plain"
  | "auth-login-user"
  | "auth-login-pass"
  | "auth-login-result"
  | "rset"
  | "envelope"
  | "body"
  | "dot"
  | "quit"
  | "idle"
  | "done";

/** A reply the session still expects inside a transaction, in send order. */
export type PendingReply = { cmd: "mail" } | { cmd: "rcpt"; index: number } | { cmd: "data" } | { cmd: "dot-discard" };

/** Progress of the message being sent. */
export interface TransactionProgress {
  messageIndex: number;
  /** One slot per recipient of the message; null while undecided. */
  rcpt: (RecipientResult | null)[];
  /** Recipient got a 2xx to RCPT and waits for the DATA outcome. */
  accepted: boolean[];
  /** Recipient indexes that will be sent RCPT, in order. */
  toSend: number[];
  /** Position in toSend of the next RCPT to send (without PIPELINING). */
  nextSend: number;
  /** Replies still expected, oldest first. */
  pending: PendingReply[];
  /** MAIL FROM was rejected with this reply. */
  mailRejected: SmtpReply | null;
  /** A "too many recipients" reply; later recipients are deferred with it. */
  tooMany: SmtpReply | null;
}

/** The whole session state. */
export interface SessionState {
  v: 1;
  phase: SessionPhase;
  wait: WaitSpec | null;
  tls: boolean;
  /** STARTTLS must not be tried again (refused, or handshake failed once). */
  tlsFallback: boolean;
  /** TLS was reported up but no reply has come over it yet (a handshake error may still surface). */
  tlsUnconfirmed: boolean;
  /** Why an opportunistic session went on without TLS (not offered, refused, or the handshake's failure); absent otherwise. */
  tlsProblem?: string;
  /** The server accepted EHLO (not just HELO). */
  esmtp: boolean;
  caps: EhloCapabilities;
  authenticated: boolean;
  messages: MessageEnvelope[];
  /** Index of the next message not yet started. */
  nextMessage: number;
  txn: TransactionProgress | null;
  results: (TransactionResult | null)[];
  /** Transactions the server answered to the end (Postfix: a complete session). */
  completedTransactions: number;
  /** Commands of a transaction were sent since the last reset. */
  needsRset: boolean;
  /** After the last message the connection stays open (phase "idle") instead of QUIT. */
  keepOpen: boolean;
  /** Resumed from idle and the RSET that checks the cached connection has not succeeded yet. */
  probing: boolean;
  outcome: SessionOutcome | null;
}

/** A state transition: the new state and the actions to carry out, in order. */
export interface SessionStep {
  state: SessionState;
  actions: SessionAction[];
}

/** Fields of a recipient result that do not depend on the recipient. */
export interface ResultTemplate {
  code: number;
  enhanced: string | null;
  text: string;
  status: RecipientStatus;
  source: ResultSource;
}

/** Copies the parts of a state a transition may change. */
export function cloneState(s: SessionState): SessionState {
  const txn = s.txn && {
    ...s.txn,
    rcpt: [...s.txn.rcpt],
    accepted: [...s.txn.accepted],
    toSend: [...s.txn.toSend],
    pending: [...s.txn.pending],
  };
  return { ...s, results: [...s.results], txn };
}

/** Sets what the session waits for and its timeout. */
export function waitIn(s: SessionState, step: SmtpStep, cfg: SessionConfig): void {
  s.wait = { step, timeoutSec: selectTimeout(step, cfg.timeouts) };
}

/** Maps a reply code to delivered / deferred / bounced. */
export function classifyStatus(code: number): RecipientStatus {
  if (code < 400) return "delivered";
  return code < 500 ? "deferred" : "bounced";
}

/** Builds the result template for a server reply. */
export function buildTemplate(reply: SmtpReply, status = classifyStatus(reply.code)): ResultTemplate {
  return { code: reply.code, enhanced: reply.enhanced ?? null, text: reply.text, status, source: "remote" };
}

/** Builds one recipient's result from a server reply. */
export function buildRecipientResult(rcpt: string, reply: SmtpReply): RecipientResult {
  return { rcpt, ...buildTemplate(reply) };
}

/** Builds one recipient's result from a template. */
export function applyTemplate(rcpt: string, t: ResultTemplate): RecipientResult {
  return { rcpt, ...t };
}
