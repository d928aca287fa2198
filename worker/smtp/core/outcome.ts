/*
 * NAME
 *   outcome - ending an SMTP session: normal QUIT, aborts, site failures
 *
 * SUMMARY
 *   Decides every recipient not decided yet when a session ends, and whether
 *   the ending is a site failure in the sense of Postfix's destination status
 *   (scheduler.md §6.1), which drives negative concurrency feedback.
 *
 * DESCRIPTION
 *   finishSession(s, cfg) ends a session whose messages are all decided:
 *   QUIT, then close (or wait for the QUIT reply when skipQuitResponse is
 *   false), and the outcome with siteFailure null.
 *
 *   abortSession(s, cfg, end) decides every open recipient with a template
 *   (end.current for the message in progress, end.rest for messages not yet
 *   started), records end.siteFailure, optionally sends QUIT, closes.
 *
 *   failConnection(s, cfg, failure, timedOut) handles an adapter failure or
 *   a timeout in the current wait. A site failure is reported when the
 *   failure is soft and on the network/protocol level and no transaction has
 *   completed in this session; a connect failure is 4.4.1. A TLS handshake
 *   failure is a site failure under the "required" policy; under
 *   "opportunistic" it closes and reconnects once without TLS. A failure
 *   after "tls-established" but before the first reply over TLS counts as a
 *   handshake failure (the runtime may surface it only then). Recipients
 *   whose final "." was sent before the failure are marked possibleDuplicate.
 *
 *   softenDsn(status) turns "5.x.y" into "4.x.y" (site failures are soft).
 *
 * INVARIANTS
 *   After finishSession or abortSession, phase is "done" (or "quit" while
 *   the QUIT reply is awaited), every results slot is filled and the last
 *   action is {kind:"done"} (except while waiting for the QUIT reply).
 *
 * ERRORS
 *   InvariantError if finishSession finds an undecided message (a bug).
 */

import type { SessionConfig, SmtpStep } from "./config";
import { InvariantError, type SmtpFailure } from "./errors";
import { applyTemplate, waitIn, type ResultTemplate, type SessionState } from "./state";
import type { SessionAction, SessionOutcome, SiteFailure, TransactionResult } from "./types";

/** How to end a session early. */
export interface SessionEnd {
  /** Result for open recipients of the message in progress. */
  current: ResultTemplate;
  /** Result for messages not started yet. */
  rest: ResultTemplate;
  siteFailure: SiteFailure | null;
  /** Send QUIT before closing (not after a 421 or a broken connection). */
  quit: boolean;
  /** The final "." of the message in progress was sent. */
  possibleDuplicate: boolean;
}

/** Statuses that depend on the step rather than on the failure (RFC 3463). */
const STEP_DSN: Partial<Record<SmtpStep, string>> = { connect: "4.4.1", "tls-handshake": "4.7.5" };

const ACTIVITY: Record<SmtpStep, string> = {
  connect: "connecting",
  greeting: "receiving the initial server greeting",
  ehlo: "performing the EHLO handshake",
  helo: "performing the HELO handshake",
  starttls: "sending STARTTLS",
  "tls-handshake": "performing the TLS handshake",
  auth: "authenticating",
  mail: "sending MAIL FROM",
  rcpt: "sending RCPT TO",
  data: "sending DATA command",
  body: "sending message body",
  dot: "sending end of data -- message may be sent more than once",
  rset: "sending RSET",
  quit: "sending QUIT",
};

/** Turns a 5.x.y status into 4.x.y. */
export function softenDsn(status: string): string {
  return status.startsWith("5.") ? `4.${status.slice(2)}` : status;
}

/** Ends a session whose messages are all decided: QUIT and close. */
export function finishSession(s: SessionState, cfg: SessionConfig): SessionAction[] {
  s.outcome = buildOutcome(s, cfg, null);
  s.txn = null;
  if (cfg.skipQuitResponse) return closeWith(s, [{ kind: "send", data: "QUIT\r\n" }]);
  s.phase = "quit";
  waitIn(s, "quit", cfg);
  return [{ kind: "send", data: "QUIT\r\n" }];
}

/** Ends the wait for the QUIT reply. */
export function endQuitWait(s: SessionState): SessionAction[] {
  return closeWith(s, []);
}

/** Decides every open recipient with the given templates and ends the session. */
export function abortSession(s: SessionState, cfg: SessionConfig, end: SessionEnd): SessionAction[] {
  const txn = s.txn;
  if (txn) {
    const env = s.messages[txn.messageIndex];
    if (!env) throw new InvariantError(`no message ${txn.messageIndex}`);
    const rcpt = txn.rcpt.map((r, i) => r ?? applyTemplate(env.rcptTo[i] ?? "", end.current));
    s.results[txn.messageIndex] = buildTransactionResult(s, cfg, txn.messageIndex, rcpt, end.possibleDuplicate);
    s.txn = null;
  }
  s.messages.forEach((env, i) => {
    if (s.results[i]) return;
    const rcpt = env.rcptTo.map((addr) => applyTemplate(addr, end.rest));
    s.results[i] = buildTransactionResult(s, cfg, i, rcpt, false);
  });
  s.outcome = buildOutcome(s, cfg, end.siteFailure);
  if (s.probing) s.outcome.staleCache = true;
  return closeWith(s, end.quit ? [{ kind: "send", data: "QUIT\r\n" }] : []);
}

/** Handles a failure reported by the adapter, or a timeout of the current wait. */
export function failConnection(
  s: SessionState,
  cfg: SessionConfig,
  failure: SmtpFailure,
  timedOut: boolean,
): SessionAction[] {
  // Some runtimes report a failed handshake only on the first read or write over TLS.
  const step = s.tlsUnconfirmed ? "tls-handshake" : (s.wait?.step ?? "connect");
  if (s.phase === "quit") return endQuitWait(s);
  if (step === "tls-handshake" && cfg.tlsPolicy === "opportunistic" && !s.tlsFallback) {
    s.tlsProblem = describeFailure(cfg.remoteHost, step, failure, timedOut);
    return reconnectWithoutTls(s, cfg);
  }
  // A handshake that failed never encrypted anything: the results must not say TLS was used.
  if (step === "tls-handshake") s.tls = false;
  const reason = describeFailure(cfg.remoteHost, step, failure, timedOut);
  const template: ResultTemplate = {
    code: failure.code,
    enhanced: failure.class === "permanent" ? failure.enhanced : (STEP_DSN[step] ?? failure.enhanced),
    text: reason,
    status: failure.class === "permanent" ? "bounced" : "deferred",
    source: "local",
  };
  const soft = failure.class === "network" || failure.class === "protocol" || timedOut;
  const siteFailure =
    soft && s.completedTransactions === 0 ? { dsnStatus: softenDsn(template.enhanced ?? "4.4.2"), reason } : null;
  const rest: ResultTemplate = { ...template, status: "deferred" };
  const possibleDuplicate = step === "dot";
  return abortSession(s, cfg, { current: template, rest, siteFailure, quit: false, possibleDuplicate });
}

/** Opportunistic TLS failed in the handshake: close and try once more in plaintext. */
function reconnectWithoutTls(s: SessionState, cfg: SessionConfig): SessionAction[] {
  s.phase = "connecting";
  s.tls = false;
  s.tlsFallback = true;
  s.tlsUnconfirmed = false;
  s.esmtp = false;
  waitIn(s, "connect", cfg);
  return [{ kind: "close" }, { kind: "connect", secureTransport: "off" }];
}

/** Writes the diagnostic for a failure, in Postfix's words. */
function describeFailure(host: string, step: SmtpStep, failure: SmtpFailure, timedOut: boolean): string {
  const activity = ACTIVITY[step];
  if (timedOut) return `conversation with ${host} timed out while ${activity}`;
  switch (failure.class) {
    case "network":
      return step === "connect"
        ? `connect to ${host}: ${failure.text}`
        : `lost connection with ${host} while ${activity}: ${failure.text}`;
    case "protocol":
      return `remote protocol error from ${host} while ${activity}: ${failure.text}`;
    default:
      return `${failure.text} (while ${activity} with ${host})`;
  }
}

/** Marks the session done with a close and the outcome as the last actions. */
function closeWith(s: SessionState, actions: SessionAction[]): SessionAction[] {
  if (!s.outcome) throw new InvariantError("closing without an outcome");
  s.phase = "done";
  s.wait = null;
  return [...actions, { kind: "close" }, { kind: "done", outcome: s.outcome }];
}

/** Builds the result of one message. */
export function buildTransactionResult(
  s: SessionState,
  cfg: SessionConfig,
  messageIndex: number,
  recipients: TransactionResult["recipients"],
  possibleDuplicate: boolean,
): TransactionResult {
  const env = s.messages[messageIndex];
  if (!env) throw new InvariantError(`no message ${messageIndex}`);
  return {
    messageId: env.id,
    recipients,
    remoteHost: cfg.remoteHost,
    tls: s.tls,
    possibleDuplicate,
    ...(!s.tls && s.tlsProblem ? { tlsProblem: s.tlsProblem } : {}),
  };
}

/** Collects the results; every message must be decided. */
function buildOutcome(s: SessionState, cfg: SessionConfig, siteFailure: SiteFailure | null): SessionOutcome {
  const transactions = s.results.map((r, i) => {
    if (!r) throw new InvariantError(`message ${i} undecided at end of session`);
    return r;
  });
  return { siteFailure, transactions, remoteHost: cfg.remoteHost, tls: s.tls };
}
