/*
 * NAME
 *   transaction - MAIL, RCPT, DATA and RSET for the sans-I/O SMTP client
 *
 * SUMMARY
 *   Sends each message of a session as one mail transaction and decides its
 *   recipients, like the message half of Postfix's smtp_proto.c (smtp_loop);
 *   the verdicts themselves are recipients.ts.
 *
 * DESCRIPTION
 *   beginTransaction(s, cfg) starts the next message, or QUITs when none is
 *   left. A message is refused here, without sending anything, when
 *   recipients.ts's refuseBeforeSending says so; a recipient with an unusable
 *   address bounces locally (BAD_RCPT, 5.1.3). RSET precedes every
 *   transaction after the first one sent.
 *
 *   With PIPELINING, MAIL, every RCPT and DATA go out in one send (RFC 2920:
 *   DATA ends the group) and the replies are matched in order; without it,
 *   one command per reply.
 *
 *   onTransactionEvent(s, event, cfg) handles replies in the "rset",
 *   "envelope" and "dot" phases and the adapter's "body-sent".
 *
 *   Recipient outcome (recipients.ts): RCPT 4xx defers, 5xx bounces; a "too
 *   many recipients" reply defers that recipient and every later one not
 *   accepted. A 421 at any point ends the session: open recipients are
 *   deferred.
 *
 * INVARIANTS
 *   A message's result is written once, when its transaction ends; a
 *   transaction that the server answered to the end counts as completed.
 *
 * ERRORS
 *   A reply with no command outstanding is a protocol failure (outcome.ts).
 *   InvariantError if a transaction ends with an undecided recipient.
 */

import { formatMailFrom, formatRcptTo, isSafeAddress } from "./commands";
import type { SessionConfig, SmtpStep } from "./config";
import { InvariantError, createProtocolFailure } from "./errors";
import { abortSession, failConnection, finishSession, buildTransactionResult } from "./outcome";
import { BAD_RCPT, decideAccepted, decideRcpt, refuseBeforeSending, type TxnContext } from "./recipients";
import { formatReply, type SmtpReply } from "./reply";
import {
  buildRecipientResult,
  applyTemplate,
  buildTemplate,
  waitIn,
  type PendingReply,
  type SessionState,
} from "./state";
import type { SessionAction } from "./types";

type TransactionEvent = { kind: "reply"; reply: SmtpReply } | { kind: "body-sent" };

/** Starts the next message (skipping messages refused locally), or ends the session. */
export function beginTransaction(s: SessionState, cfg: SessionConfig): SessionAction[] {
  while (s.nextMessage < s.messages.length) {
    const index = s.nextMessage++;
    const env = s.messages[index];
    if (!env) throw new InvariantError(`no message ${index}`);
    const refusal = refuseBeforeSending(s, cfg, env);
    const rcpt = env.rcptTo.map((addr) =>
      refusal ? applyTemplate(addr, refusal) : isSafeAddress(addr) ? null : applyTemplate(addr, BAD_RCPT),
    );
    const toSend = rcpt.flatMap((r, i) => (r === null ? [i] : []));
    if (toSend.length === 0) {
      s.results[index] = buildTransactionResult(
        s,
        cfg,
        index,
        rcpt.filter((r) => r !== null),
        false,
      );
      continue;
    }
    s.txn = {
      messageIndex: index,
      rcpt,
      accepted: rcpt.map(() => false),
      toSend,
      nextSend: 0,
      pending: [],
      mailRejected: null,
      tooMany: null,
    };
    if (!s.needsRset) return sendEnvelope({ s, cfg, txn: s.txn, env });
    s.phase = "rset";
    waitIn(s, "rset", cfg);
    return [{ kind: "send", data: "RSET\r\n" }];
  }
  if (s.keepOpen) return goIdle(s);
  return finishSession(s, cfg);
}

/** Every message so far is decided and the connection is kept for more (resumeSession). */
function goIdle(s: SessionState): SessionAction[] {
  s.phase = "idle";
  s.wait = null;
  s.txn = null;
  s.probing = false;
  return [{ kind: "idle" }];
}

/** Sends MAIL (and with PIPELINING every RCPT and DATA in the same write). */
function sendEnvelope(c: TxnContext): SessionAction[] {
  const { s, txn, env } = c;
  s.needsRset = true;
  s.phase = "envelope";
  let data = formatMailFrom(env, s.caps);
  txn.pending = [{ cmd: "mail" }];
  if (s.caps.pipelining) {
    for (const i of txn.toSend) {
      data += formatRcptTo(env.rcptTo[i] ?? "");
      txn.pending.push({ cmd: "rcpt", index: i });
    }
    data += "DATA\r\n";
    txn.pending.push({ cmd: "data" });
    txn.nextSend = txn.toSend.length;
  }
  waitForPending(c);
  return [{ kind: "send", data }];
}

/** Handles a reply or body-sent inside a transaction. */
export function onTransactionEvent(s: SessionState, event: TransactionEvent, cfg: SessionConfig): SessionAction[] {
  const txn = s.txn;
  const env = txn && s.messages[txn.messageIndex];
  if (!txn || !env) throw new InvariantError(`transaction event in phase ${s.phase} without a transaction`);
  const c: TxnContext = { s, cfg, txn, env };
  if (event.kind === "body-sent") {
    s.phase = "dot";
    waitIn(s, "dot", cfg);
    return [];
  }
  const reply = event.reply;
  if (reply.code === 421) {
    // The server is closing the channel: nothing more will be answered.
    const t = buildTemplate(reply, "deferred");
    return abortSession(s, cfg, { current: t, rest: t, siteFailure: null, quit: false, possibleDuplicate: false });
  }
  if (s.phase === "rset") return onRsetReply(c, reply);
  if (s.phase === "dot") {
    decideAccepted(c, reply);
    return endTransaction(c);
  }
  const head = txn.pending.shift();
  if (!head) return failConnection(s, cfg, createProtocolFailure(`unexpected reply "${formatReply(reply)}"`), false);
  const actions = onEnvelopeReply(c, head, reply);
  if (s.txn === txn && s.phase === "envelope") waitForPending(c);
  return actions;
}

/** RSET: 2xx sends the next envelope; anything else ends the session (the rest is deferred). */
function onRsetReply(c: TxnContext, reply: SmtpReply): SessionAction[] {
  if (reply.code < 300) {
    c.s.probing = false;
    return sendEnvelope(c);
  }
  const t = { ...buildTemplate(reply, "deferred"), text: `RSET failed: ${formatReply(reply)}` };
  return abortSession(c.s, c.cfg, { current: t, rest: t, siteFailure: null, quit: true, possibleDuplicate: false });
}

/** Matches a reply to the command it answers. */
function onEnvelopeReply(c: TxnContext, head: PendingReply, reply: SmtpReply): SessionAction[] {
  const { txn, env } = c;
  switch (head.cmd) {
    case "mail":
      if (reply.code >= 300) txn.mailRejected = reply;
      if (txn.pending.length > 0) return [];
      if (txn.mailRejected) {
        for (const i of txn.toSend) txn.rcpt[i] = buildRecipientResult(env.rcptTo[i] ?? "", reply);
        return endTransaction(c);
      }
      return sendNextRcpt(c);
    case "rcpt":
      decideRcpt(c, head.index, reply);
      return txn.pending.length > 0 ? [] : afterRcptReply(c);
    case "data":
      return onDataReply(c, reply);
    case "dot-discard":
      return endTransaction(c);
  }
}

/** Without PIPELINING: next RCPT, or DATA, or end when nobody was accepted. */
function afterRcptReply(c: TxnContext): SessionAction[] {
  const { txn, env } = c;
  if (txn.tooMany) {
    // Do not offer more recipients in this transaction; they wait for the next attempt.
    for (const i of txn.toSend.slice(txn.nextSend)) {
      txn.rcpt[i] = applyTemplate(env.rcptTo[i] ?? "", buildTemplate(txn.tooMany, "deferred"));
    }
    txn.nextSend = txn.toSend.length;
  }
  if (txn.nextSend < txn.toSend.length) return sendNextRcpt(c);
  if (!txn.accepted.some(Boolean)) return endTransaction(c);
  txn.pending.push({ cmd: "data" });
  return [{ kind: "send", data: "DATA\r\n" }];
}

/** Sends the next RCPT (no PIPELINING). */
function sendNextRcpt({ txn, env }: TxnContext): SessionAction[] {
  const i = txn.toSend[txn.nextSend++];
  if (i === undefined) throw new InvariantError("no recipient left to send");
  txn.pending.push({ cmd: "rcpt", index: i });
  return [{ kind: "send", data: formatRcptTo(env.rcptTo[i] ?? "") }];
}

/** DATA: 354 streams the body (or just "." when nobody was accepted); else accepted recipients get the reply. */
function onDataReply(c: TxnContext, reply: SmtpReply): SessionAction[] {
  const { s, txn } = c;
  if (reply.code !== 354) {
    decideAccepted(c, reply);
    return endTransaction(c);
  }
  if (!txn.mailRejected && txn.accepted.some(Boolean)) {
    s.phase = "body";
    waitIn(s, "body", c.cfg);
    return [{ kind: "stream-body", messageId: c.env.id }];
  }
  // RFC 2920 §3.1: DATA was accepted although no recipient was; end it with an empty message.
  txn.pending.push({ cmd: "dot-discard" });
  return [{ kind: "send", data: ".\r\n" }];
}

/** Records the finished message and moves on to the next one. */
function endTransaction({ s, cfg, txn }: TxnContext): SessionAction[] {
  const rcpt = txn.rcpt.map((r, i) => {
    if (!r) throw new InvariantError(`recipient ${i} undecided at end of transaction`);
    return r;
  });
  s.results[txn.messageIndex] = buildTransactionResult(s, cfg, txn.messageIndex, rcpt, false);
  s.completedTransactions += 1;
  s.txn = null;
  return beginTransaction(s, cfg);
}

/** Points s.wait at the oldest outstanding reply. */
function waitForPending({ s, cfg, txn }: TxnContext): void {
  const head = txn.pending[0];
  if (head) waitIn(s, STEP_FOR[head.cmd], cfg);
}

const STEP_FOR: Record<PendingReply["cmd"], SmtpStep> = {
  mail: "mail",
  rcpt: "rcpt",
  data: "data",
  "dot-discard": "dot",
};
