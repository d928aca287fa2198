/*
 * NAME
 *   session - sans-I/O ESMTP client state machine (handshake part)
 *
 * SUMMARY
 *   Events in, actions out. Mirrors the connection half of Postfix's
 *   smtp_proto.c (smtp_helo, STARTTLS, SASL), whose reply handlers are
 *   handshake.ts; transaction.ts does MAIL, RCPT, DATA and RSET; outcome.ts
 *   ends the session. No I/O, no clock.
 *
 * DESCRIPTION
 *   startSession(cfg, messages) returns the initial state and a connect
 *   action. The adapter opens the connection (racing cfg's connect timeout)
 *   and reports {kind:"connected"} or {kind:"failed"}.
 *
 *   advanceSession(state, event, cfg) returns the next state and the actions
 *   to carry out in order. state.wait names the step being waited on and the
 *   timeout that applies (Postfix's smtp_*_timeout); when it expires the
 *   adapter reports {kind:"timeout"}. The last action of a session is
 *   {kind:"done", outcome}.
 *
 *   The handshake (handshake.ts): greeting; EHLO or HELO; STARTTLS; AUTH;
 *   then the transactions, one per message, with RSET between them, then QUIT.
 *
 *   isSessionDone(state) says whether the outcome is final.
 *
 *   With startSession(cfg, messages, {keepOpen: true}) the session does not
 *   QUIT after its last message: it goes idle (action "idle", every result
 *   so far decided) and keeps the connection, as Postfix's connection cache
 *   does. resumeSession(state, more, cfg) sends RSET, which checks that the
 *   cached connection still works, then the new transactions;
 *   closeIdleSession(state, cfg) sends QUIT. isSessionIdle(state) says
 *   whether it waits for more.
 *
 * INVARIANTS
 *   advanceSession never mutates its input state. Every message and every
 *   recipient gets exactly one result. A site failure is reported only for a
 *   soft failure while connecting, at the greeting, at EHLO/HELO (421 or HELO
 *   4xx), when mandatory TLS fails, or for a lost connection, timeout or
 *   protocol error before any transaction completed (scheduler.md §6.1).
 *
 * ERRORS
 *   Expected failures are results. InvariantError means the caller broke
 *   the contract: duplicate message ids, or an event the phase cannot have
 *   (e.g. "tls-established" when no STARTTLS was asked for).
 */

import type { SessionConfig } from "./config";
import { createEmptyCapabilities } from "./ehlo";
import { InvariantError, createNetworkFailure, createProtocolFailure } from "./errors";
import { onAuthReply, onEhloReply, onHeloReply, onStarttlsReply, rejectGreeting, sendHello } from "./handshake";
import { endQuitWait, failConnection, finishSession } from "./outcome";
import { formatReply, type SmtpReply } from "./reply";
import { cloneState, waitIn, type SessionState, type SessionStep } from "./state";
import { beginTransaction, onTransactionEvent } from "./transaction";
import type { MessageEnvelope, SessionAction, SessionEvent } from "./types";

/**
 * Creates the state for delivering `messages` in one session and asks to connect. With
 * `keepOpen` the session goes idle after its last message instead of QUIT (a cached
 * connection): resumeSession sends more, closeIdleSession ends it.
 */
export function startSession(
  cfg: SessionConfig,
  messages: readonly MessageEnvelope[],
  options: { keepOpen?: boolean } = {},
): SessionStep {
  if (new Set(messages.map((m) => m.id)).size !== messages.length) {
    throw new InvariantError("message ids in one session must be unique");
  }
  const state: SessionState = {
    v: 1,
    phase: "connecting",
    wait: null,
    tls: false,
    tlsFallback: false,
    tlsUnconfirmed: false,
    esmtp: false,
    caps: createEmptyCapabilities(),
    authenticated: false,
    messages: [...messages],
    nextMessage: 0,
    txn: null,
    results: messages.map(() => null),
    completedTransactions: 0,
    needsRset: false,
    keepOpen: options.keepOpen === true,
    probing: false,
    outcome: null,
  };
  if (messages.length === 0) {
    state.phase = "done";
    state.outcome = { siteFailure: null, transactions: [], remoteHost: cfg.remoteHost, tls: false };
    return { state, actions: [{ kind: "done", outcome: state.outcome }] };
  }
  waitIn(state, "connect", cfg);
  const secureTransport = cfg.implicitTls ? "on" : cfg.tlsPolicy === "off" ? "off" : "starttls";
  return { state, actions: [{ kind: "connect", secureTransport }] };
}

/** Says whether the session has its final outcome. */
export function isSessionDone(state: SessionState): boolean {
  return state.phase === "done";
}

/** Says whether a kept-open session has decided every message so far and waits for more. */
export function isSessionIdle(state: SessionState): boolean {
  return state.phase === "idle";
}

/**
 * Sends more messages over an idle session (Postfix's connection cache): RSET first, which
 * checks that the cached connection still works. Should that check fail, the outcome says
 * staleCache and none of the new messages reached the server.
 */
export function resumeSession(
  state: SessionState,
  messages: readonly MessageEnvelope[],
  cfg: SessionConfig,
): SessionStep {
  if (state.phase !== "idle") throw new InvariantError(`resume in phase ${state.phase}`);
  const ids = new Set(state.messages.map((m) => m.id));
  for (const m of messages) {
    if (ids.has(m.id)) throw new InvariantError("message ids in one session must be unique");
    ids.add(m.id);
  }
  const s = cloneState(state);
  s.messages = [...s.messages, ...messages];
  s.results = [...s.results, ...messages.map(() => null)];
  s.needsRset = true;
  s.probing = messages.length > 0;
  return { state: s, actions: beginTransaction(s, cfg) };
}

/** Ends an idle session: QUIT, and the outcome of every message it carried. */
export function closeIdleSession(state: SessionState, cfg: SessionConfig): SessionStep {
  if (state.phase !== "idle") throw new InvariantError(`close in phase ${state.phase}`);
  const s = cloneState(state);
  s.keepOpen = false;
  return { state: s, actions: finishSession(s, cfg) };
}

/** Applies one event and returns the next state and actions. */
export function advanceSession(state: SessionState, event: SessionEvent, cfg: SessionConfig): SessionStep {
  if (state.phase === "done") return { state, actions: [] };
  const s = cloneState(state);
  return { state: s, actions: dispatch(s, event, cfg) };
}

/** Routes an event to the handler for the current phase. */
function dispatch(s: SessionState, event: SessionEvent, cfg: SessionConfig): SessionAction[] {
  switch (event.kind) {
    case "failed":
      return failConnection(s, cfg, event.failure, false);
    case "timeout":
      return failConnection(s, cfg, createNetworkFailure("timeout"), true);
    case "connected":
      expectPhase(s, "connecting", event.kind);
      s.tls = cfg.implicitTls;
      s.phase = "greeting";
      waitIn(s, "greeting", cfg);
      return [];
    case "tls-established":
      expectPhase(s, "tls-handshake", event.kind);
      s.tls = true;
      s.tlsUnconfirmed = true;
      s.caps = createEmptyCapabilities();
      return sendHello(s, cfg, "ehlo");
    case "body-sent":
      expectPhase(s, "body", event.kind);
      return onTransactionEvent(s, event, cfg);
    case "reply":
      s.tlsUnconfirmed = false;
      return onReply(s, event.reply, cfg);
  }
}

/** Throws InvariantError when the adapter reports an event the phase cannot have. */
function expectPhase(s: SessionState, phase: SessionState["phase"], kind: string): void {
  if (s.phase !== phase) throw new InvariantError(`event ${kind} in phase ${s.phase}`);
}

/** Handles a server reply according to the phase. */
function onReply(s: SessionState, reply: SmtpReply, cfg: SessionConfig): SessionAction[] {
  switch (s.phase) {
    case "greeting":
      return reply.code < 300 ? sendHello(s, cfg, "ehlo") : rejectGreeting(s, cfg, reply);
    case "ehlo":
      return onEhloReply(s, reply, cfg);
    case "helo":
      return onHeloReply(s, reply, cfg);
    case "starttls":
      return onStarttlsReply(s, reply, cfg);
    case "auth-plain":
    case "auth-login-user":
    case "auth-login-pass":
    case "auth-login-result":
      return onAuthReply(s, reply, cfg);
    case "quit":
      return endQuitWait(s);
    case "rset":
    case "envelope":
    case "dot":
      return onTransactionEvent(s, { kind: "reply", reply }, cfg);
    default:
      return failConnection(s, cfg, createProtocolFailure(`unexpected reply "${formatReply(reply)}"`), false);
  }
}
