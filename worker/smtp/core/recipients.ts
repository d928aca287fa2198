/*
 * NAME
 *   recipients - deciding the recipients of a transaction for the sans-I/O
 *   SMTP client
 *
 * SUMMARY
 *   The verdicts transaction.ts writes into a transaction: the ones decided
 *   locally before anything is sent, and the ones the server's RCPT, DATA and
 *   "." replies give, like Postfix's smtp_proto.c (smtp_loop).
 *
 * DESCRIPTION
 *   refuseBeforeSending(s, cfg, env) says why a message cannot be sent to
 *   this server at all: its sender address is unusable (5.1.7), it needs
 *   SMTPUTF8 and the server does not offer it (5.6.7), or it is larger than
 *   the server's announced SIZE (552 5.3.4). BAD_RCPT is the local bounce of
 *   a recipient with an unusable address (5.1.3).
 *
 *   Recipient outcome: RCPT 4xx defers, 5xx bounces (decideRcpt). A "too many
 *   recipients" reply (452, or 552 with x.5.3 / that text, RFC 5321
 *   §4.5.3.1.10; isTooManyRecipients) defers that recipient and every later
 *   one not accepted. A recipient accepted at RCPT gets the reply to DATA (if
 *   DATA is refused) or to the final "." (decideAccepted).
 *
 *   TxnContext is the session, its config, and the transaction in progress
 *   with its message.
 *
 * INVARIANTS
 *   decideAccepted decides only recipients accepted at RCPT and still open.
 *
 * ERRORS
 *   None.
 */

import { isSafeAddress, messageNeedsSmtpUtf8 } from "./commands";
import type { SessionConfig } from "./config";
import type { SmtpReply } from "./reply";
import {
  buildRecipientResult,
  applyTemplate,
  buildTemplate,
  type ResultTemplate,
  type SessionState,
  type TransactionProgress,
} from "./state";
import type { MessageEnvelope } from "./types";

export const BAD_RCPT: ResultTemplate = {
  code: 550,
  enhanced: "5.1.3",
  text: "bad recipient address syntax",
  status: "bounced",
  source: "local",
};

/** Returns why a message cannot be sent to this server at all, or null. */
export function refuseBeforeSending(s: SessionState, cfg: SessionConfig, env: MessageEnvelope): ResultTemplate | null {
  const local = (code: number, enhanced: string, text: string): ResultTemplate => ({
    code,
    enhanced,
    text,
    status: "bounced",
    source: "local",
  });
  if (!isSafeAddress(env.mailFrom)) return local(550, "5.1.7", "bad sender address syntax");
  if (messageNeedsSmtpUtf8(env) && !s.caps.smtpUtf8) {
    return local(550, "5.6.7", `SMTPUTF8 is required, but was not offered by host ${cfg.remoteHost}`);
  }
  const limit = s.caps.sizeLimitBytes;
  if (limit !== null && env.sizeBytes > limit) {
    const text = `message size ${env.sizeBytes} exceeds size limit ${limit} of server ${cfg.remoteHost}`;
    return local(552, "5.3.4", text);
  }
  return null;
}

/** The session, its config, and the transaction in progress with its message. */
export interface TxnContext {
  s: SessionState;
  cfg: SessionConfig;
  txn: TransactionProgress;
  env: MessageEnvelope;
}

/** Records a RCPT reply (see header for the too-many-recipients rule). */
export function decideRcpt({ txn, env }: TxnContext, i: number, reply: SmtpReply): void {
  const addr = env.rcptTo[i] ?? "";
  if (txn.mailRejected) {
    txn.rcpt[i] = buildRecipientResult(addr, txn.mailRejected);
  } else if (reply.code < 300) {
    txn.accepted[i] = true;
  } else if (txn.tooMany) {
    txn.rcpt[i] = applyTemplate(addr, buildTemplate(txn.tooMany, "deferred"));
  } else if (isTooManyRecipients(reply)) {
    txn.tooMany = reply;
    txn.rcpt[i] = applyTemplate(addr, buildTemplate(reply, "deferred"));
  } else {
    txn.rcpt[i] = buildRecipientResult(addr, reply);
  }
}

/** Says whether a RCPT reply means "too many recipients" rather than a verdict on this one. */
export function isTooManyRecipients(reply: SmtpReply): boolean {
  if (reply.code !== 452 && reply.code !== 552) return false;
  if (reply.enhanced?.endsWith(".5.3") || /too many recipients/i.test(reply.text)) return true;
  return reply.code === 452 && reply.enhanced === undefined;
}

/** Gives every recipient accepted at RCPT and still open the reply to DATA or to ".". */
export function decideAccepted({ txn, env }: TxnContext, reply: SmtpReply): void {
  txn.accepted.forEach((ok, i) => {
    if (ok && txn.rcpt[i] === null) txn.rcpt[i] = buildRecipientResult(env.rcptTo[i] ?? "", reply);
  });
}
