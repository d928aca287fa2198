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

import { connect as cloudflareConnect } from "cloudflare:sockets";
import type { SessionConfig } from "./core/config";
import { createDotStuffer, finishDotStuffing, stuffChunk } from "./core/dot-stuff";
import { InvariantError, createLocalFailure, createNetworkFailure, createProtocolFailure } from "./core/errors";
import { createReplyParser, feedReplyParser, hasBufferedInput, type SmtpReply } from "./core/reply";
import { advanceSession, closeIdleSession, isSessionDone, isSessionIdle, resumeSession, startSession } from "./core/session";
import type { SessionState, SessionStep } from "./core/state";
import type { MessageEnvelope, SecureTransport, SessionAction, SessionEvent, SessionOutcome } from "./core/types";

/** The part of a cloudflare:sockets Socket this adapter uses. */
export interface SmtpSocket {
  readonly readable: ReadableStream<Uint8Array>;
  readonly writable: WritableStream<Uint8Array>;
  readonly opened: Promise<unknown>;
  close(): Promise<void>;
  startTls(options?: { expectedServerHostname?: string }): SmtpSocket;
}

/** A socket factory with cloudflare:sockets' connect() signature. */
export type ConnectSocket = (
  address: { hostname: string; port: number },
  options: { secureTransport: SecureTransport; allowHalfOpen: boolean },
) => SmtpSocket;

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

/** Milliseconds the adapter may wait in the current step. */
function computeWaitMs(state: SessionState, cfg: SessionConfig): number {
  return (state.wait?.timeoutSec ?? cfg.timeouts.quitTimeoutSec) * 1000;
}

const TIMED_OUT = Symbol("timed out");

/**
 * The step timeouts of one connection, on one timer. Each wait used to arm and clear a timer of
 * its own (about ten per message); here a wait only moves the deadline, and the timer is armed
 * again only when it would fire too late for the new deadline, or when it fires early (the wait
 * it was armed for ended) while another wait is still running. A connection waits for one thing
 * at a time (drive() is sequential), so one deadline serves.
 */
class StepTimer {
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** When the armed timer fires, ms since the epoch. */
  private firesAt = 0;
  private deadline = 0;
  /** Ends the running wait with TIMED_OUT; null when no wait runs. */
  private expire: (() => void) | null = null;

  /** Resolves with the promise's value, or TIMED_OUT after `ms`; rejects as the promise does. */
  race<T>(promise: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
    const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
      this.expire = () => resolve(TIMED_OUT);
    });
    const expire = this.expire;
    this.deadline = Date.now() + ms;
    if (this.timer === undefined || this.firesAt > this.deadline) this.arm(ms);
    return Promise.race([promise, timeout]).finally(() => {
      if (this.expire === expire) this.expire = null;
    });
  }

  /** Stops the timer (the connection is closed). */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.expire = null;
  }

  private arm(ms: number): void {
    clearTimeout(this.timer);
    this.firesAt = Date.now() + ms;
    this.timer = setTimeout(() => this.fired(), ms);
  }

  private fired(): void {
    this.timer = undefined;
    if (this.expire === null) return; // no wait runs: the next one arms the timer again
    const left = this.deadline - Date.now();
    if (left > 0) return this.arm(left);
    const expire = this.expire;
    this.expire = null;
    expire();
  }
}

/** Text of an unknown thrown value. */
function describeError(e: unknown): string {
  return e instanceof Error ? e.message || e.name : String(e);
}

/** One TCP (then maybe TLS) connection with its reply parser. */
class SmtpConnection {
  private socket: SmtpSocket | null = null;
  private reader: ReadableStreamDefaultReader<Uint8Array> | null = null;
  private writer: WritableStreamDefaultWriter<Uint8Array> | null = null;
  private parser = createReplyParser();
  private replies: SmtpReply[] = [];
  private readonly timer = new StepTimer();
  private readonly encoder = new TextEncoder();

  constructor(private readonly request: SmtpDeliveryRequest) {}

  /** Connects and waits until the socket is open. */
  async open(secureTransport: SecureTransport, ms: number): Promise<SessionEvent> {
    this.close();
    this.parser = createReplyParser();
    this.replies = [];
    const { hostname, port } = this.request;
    const connect = this.request.connect ?? cloudflareConnect;
    try {
      const socket = connect({ hostname, port }, { secureTransport, allowHalfOpen: false });
      this.socket = socket;
      return await this.attach(socket, ms, () => ({ kind: "connected" }));
    } catch (e) {
      return { kind: "failed", failure: createNetworkFailure(describeError(e), "4.4.1") };
    }
  }

  /** Waits for `opened`, then takes the reader and writer of a socket. */
  private async attach(socket: SmtpSocket, ms: number, ok: () => SessionEvent): Promise<SessionEvent> {
    const opened = await this.timer.race(socket.opened, ms);
    if (opened === TIMED_OUT) return { kind: "timeout" };
    this.reader = socket.readable.getReader();
    this.writer = socket.writable.getWriter();
    return ok();
  }

  /** Writes command text; returns a failure event, or null when written. */
  async send(text: string, ms: number): Promise<SessionEvent | null> {
    return this.write(this.encoder.encode(text), ms);
  }

  /** Writes bytes, raced against the step timeout. */
  private async write(bytes: Uint8Array, ms: number): Promise<SessionEvent | null> {
    if (!this.writer) return { kind: "failed", failure: createNetworkFailure("not connected") };
    try {
      const done = await this.timer.race(this.writer.write(bytes), ms);
      return done === TIMED_OUT ? { kind: "timeout" } : null;
    } catch (e) {
      return { kind: "failed", failure: createNetworkFailure(describeError(e)) };
    }
  }

  /** Returns the next complete reply, reading more bytes as needed. */
  async nextReply(ms: number): Promise<SessionEvent> {
    while (this.replies.length === 0) {
      if (this.parser.error) return { kind: "failed", failure: createProtocolFailure(this.parser.error.text) };
      if (!this.reader) return { kind: "failed", failure: createNetworkFailure("not connected") };
      let chunk: ReadableStreamReadResult<Uint8Array> | typeof TIMED_OUT;
      try {
        chunk = await this.timer.race(this.reader.read(), ms);
      } catch (e) {
        return { kind: "failed", failure: createNetworkFailure(describeError(e)) };
      }
      if (chunk === TIMED_OUT) return { kind: "timeout" };
      if (chunk.done) return { kind: "failed", failure: createNetworkFailure("connection closed by server") };
      const fed = feedReplyParser(this.parser, chunk.value);
      this.parser = fed.parser;
      this.replies.push(...fed.replies);
    }
    const reply = this.replies.shift() as SmtpReply;
    return { kind: "reply", reply };
  }

  /** Upgrades to TLS: the old socket is given up and a new one takes its place. */
  async startTls(ms: number): Promise<SessionEvent> {
    if (!this.socket) return { kind: "failed", failure: createNetworkFailure("not connected") };
    if (hasBufferedInput(this.parser) || this.replies.length > 0) {
      // Plaintext that arrived after the 220 could be injected commands (CVE-2011-0411 class).
      return { kind: "failed", failure: createProtocolFailure("data received after the STARTTLS reply") };
    }
    try {
      this.reader?.releaseLock();
      this.writer?.releaseLock();
      this.reader = null;
      this.writer = null;
      const tlsSocket = this.socket.startTls({
        expectedServerHostname: this.request.tlsServerName ?? this.request.hostname,
      });
      this.socket = tlsSocket;
      return await this.attach(tlsSocket, ms, () => ({ kind: "tls-established" }));
    } catch (e) {
      return { kind: "failed", failure: createNetworkFailure(`TLS handshake failed: ${describeError(e)}`, "4.7.5") };
    }
  }

  /** Streams a body through the dot-stuffer and writes the terminator. */
  async streamBody(
    open: () => ReadableStream<Uint8Array> | Promise<ReadableStream<Uint8Array>>,
    ms: number,
  ): Promise<SessionEvent> {
    let body: ReadableStreamDefaultReader<Uint8Array>;
    try {
      body = (await open()).getReader();
    } catch (e) {
      return { kind: "failed", failure: createLocalFailure(`cannot read message body: ${describeError(e)}`) };
    }
    const event = await this.pumpBody(body, ms);
    if (event.kind !== "body-sent") void body.cancel().catch(() => undefined);
    return event;
  }

  /**
   * Copies body chunks to the socket, dot-stuffed, each read and write raced against `ms`.
   * The last chunk is held back and written together with the terminator: written apart,
   * Nagle's algorithm and the server's delayed ACK stall every message by ~40 ms.
   */
  private async pumpBody(body: ReadableStreamDefaultReader<Uint8Array>, ms: number): Promise<SessionEvent> {
    let stuffer = createDotStuffer();
    let held: Uint8Array | null = null;
    for (;;) {
      let chunk: ReadableStreamReadResult<Uint8Array> | typeof TIMED_OUT;
      try {
        chunk = await this.timer.race(body.read(), ms);
      } catch (e) {
        return { kind: "failed", failure: createLocalFailure(`cannot read message body: ${describeError(e)}`) };
      }
      if (chunk === TIMED_OUT) return { kind: "failed", failure: createLocalFailure("timed out reading message body") };
      if (chunk.done) break;
      const stuffed = stuffChunk(stuffer, chunk.value);
      stuffer = stuffed.state;
      if (stuffed.bytes.length === 0) continue;
      const failed = held ? await this.write(held, ms) : null;
      if (failed) return failed;
      held = stuffed.bytes;
    }
    const tail = finishDotStuffing(stuffer);
    return (await this.write(held ? concatBytes(held, tail) : tail, ms)) ?? { kind: "body-sent" };
  }

  /** Closes without waiting (fire and forget); safe to call more than once. */
  close(): void {
    this.timer.stop();
    const socket = this.socket;
    this.socket = null;
    this.reader = null;
    this.writer = null;
    if (!socket) return;
    try {
      void socket.close().catch(() => undefined);
    } catch {
      // A socket that throws on close is closed enough.
    }
  }
}

/** Two byte arrays as one. */
function concatBytes(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}
