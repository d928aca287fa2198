/*
 * NAME
 *   socket - cloudflare:sockets adapter for the sans-I/O SMTP client
 *
 * SUMMARY
 *   Carries out the actions of worker/smtp/core/session.ts on a TCP socket
 *   and feeds back what happened. It decides nothing: every protocol choice
 *   is the core's.
 *
 * DESCRIPTION
 *   deliverSession(request) opens a connection (through request.connect, by
 *   default cloudflare:sockets' connect), runs one SMTP session for all of
 *   request.messages, and resolves with the core's SessionOutcome. It never
 *   rejects for network, TLS, protocol or body-read failures: those become
 *   SmtpFailure values that the core turns into results.
 *
 *   CachedSmtpSession keeps one connection open across batches (the core's
 *   keepOpen session): send(messages, openBody) runs one batch and says
 *   whether the connection stays open; close() sends QUIT.
 *
 *   Every wait (connect, each reply, the TLS handshake, each body write) is
 *   raced against the timeout the core names in state.wait. close() is never
 *   awaited (workerd can hang in close after STARTTLS). startTls() returns a
 *   new socket; the old one is dropped. Bodies are read from a
 *   ReadableStream<Uint8Array> (an R2 object body) through the dot-stuffer.
 *
 * ERRORS
 *   Rejects only with InvariantError (a bug in the core or this adapter).
 */
import type { SessionConfig } from "./core/config";
import { InvariantError } from "./core/errors";
import {
  advanceSession,
  closeIdleSession,
  isSessionDone,
  isSessionIdle,
  resumeSession,
  startSession,
} from "./core/session";
import type { SessionState, SessionStep } from "./core/state";
import type { MessageEnvelope, SessionAction, SessionEvent, SessionOutcome } from "./core/types";
import { ConnectSocket, SmtpConnection, computeWaitMs } from "./connection";

export type { ConnectSocket, SmtpSocket } from "./connection";

/** One session's worth of work. */
export interface SmtpDeliveryRequest {
  hostname: string;
  port: number;
  /** Session settings; config.remoteHost is what results report. */
  config: SessionConfig;
  messages: MessageEnvelope[];
  /** Returns the raw (un-stuffed) body of a message. */
  openBody: (messageId: string) => ReadableStream<Uint8Array> | Promise<ReadableStream<Uint8Array>>;
  /** Name the server certificate must match. Default: hostname. */
  tlsServerName?: string;
  /** Socket factory. Default: connect from cloudflare:sockets. */
  connect?: ConnectSocket;
}

/** Runs one SMTP session and resolves with its outcome (see header). */
export async function deliverSession(request: SmtpDeliveryRequest): Promise<SessionOutcome> {
  const cfg = request.config;
  const conn = new SmtpConnection(request);
  const step = startSession(cfg, request.messages);
  try {
    const done = await drive(step, conn, request);
    if (!done.state.outcome) throw new InvariantError("session done without outcome");
    return done.state.outcome;
  } finally {
    conn.close();
  }
}

/** What one batch of a cached session produced. */
export interface CachedBatch {
  /** One result per message of the batch, in order. */
  transactions: SessionOutcome["transactions"];
  /** The session ended with a site failure (only before any transaction completed). */
  siteFailure: SessionOutcome["siteFailure"];
  /** The connection was cached and failed its reuse check: the batch was not sent, try a new one. */
  staleCache: boolean;
  /** The connection stays open for more (send again, or close). */
  open: boolean;
}

/**
 * One SMTP connection kept open across batches (Postfix's connection cache, smtp(8) with
 * smtp_connection_cache_on_demand): the first send() connects and says EHLO, every later one
 * sends RSET and the new transactions, close() sends QUIT. Batches run one at a time.
 */
export class CachedSmtpSession {
  private state: SessionState | null = null;
  private readonly conn: SmtpConnection;
  private request: SmtpDeliveryRequest;
  private ended = false;

  constructor(target: Omit<SmtpDeliveryRequest, "messages" | "openBody">) {
    this.request = { ...target, messages: [], openBody: () => Promise.reject(new Error("no batch")) };
    this.conn = new SmtpConnection(this.request);
  }

  /** The connection can take another batch. */
  get open(): boolean {
    return !this.ended;
  }

  /** Sends `messages` over the connection (opening it on first use). */
  async send(messages: MessageEnvelope[], openBody: SmtpDeliveryRequest["openBody"]): Promise<CachedBatch> {
    if (this.ended) throw new InvariantError("send on a closed cached session");
    this.request.openBody = openBody;
    const cfg = this.request.config;
    const from = this.state?.results.length ?? 0;
    let step = this.state ? resumeSession(this.state, messages, cfg) : startSession(cfg, messages, { keepOpen: true });
    try {
      step = await drive(step, this.conn, this.request);
    } catch (e) {
      this.ended = true;
      this.conn.close();
      throw e;
    }
    this.state = step.state;
    const outcome = step.state.outcome;
    if (outcome) {
      this.ended = true;
      this.conn.close();
    }
    return {
      transactions: step.state.results.slice(from).map((r) => {
        if (!r) throw new InvariantError("message undecided when the session rested");
        return r;
      }),
      siteFailure: outcome?.siteFailure ?? null,
      staleCache: outcome?.staleCache === true,
      open: !this.ended,
    };
  }

  /** QUIT and close, without waiting longer than the QUIT timeout; safe to call more than once. */
  async close(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    const cfg = this.request.config;
    try {
      if (this.state && isSessionIdle(this.state)) {
        await drive(closeIdleSession(this.state, cfg), this.conn, this.request);
      }
    } catch {
      // A session that fails while saying goodbye is gone either way.
    } finally {
      this.conn.close();
    }
  }
}

/**
 * Carries out each step's actions and feeds back the event they produced (or the next reply)
 * until the session is done or, kept open, idle; returns that step.
 */
async function drive(step: SessionStep, conn: SmtpConnection, request: SmtpDeliveryRequest): Promise<SessionStep> {
  const cfg = request.config;
  for (;;) {
    const event = await perform(step.actions, step.state, conn, request);
    if (isSessionDone(step.state) || isSessionIdle(step.state)) return step;
    step = advanceSession(step.state, event ?? (await conn.nextReply(computeWaitMs(step.state, cfg))), cfg);
  }
}

/** Carries out actions in order; returns the event one of them produced, if any. */
async function perform(
  actions: SessionAction[],
  state: SessionState,
  conn: SmtpConnection,
  request: SmtpDeliveryRequest,
): Promise<SessionEvent | null> {
  const ms = computeWaitMs(state, request.config);
  for (const action of actions) {
    switch (action.kind) {
      case "connect":
        return conn.open(action.secureTransport, ms);
      case "send": {
        const failed = await conn.send(action.data, ms);
        if (failed) return failed;
        break;
      }
      case "starttls":
        return conn.startTls(ms);
      case "stream-body":
        return conn.streamBody(() => request.openBody(action.messageId), ms);
      case "close":
        conn.close();
        break;
      case "idle":
      case "done":
        break;
    }
  }
  return null;
}
