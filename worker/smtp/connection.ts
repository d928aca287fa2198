/*
 * NAME
 *   connection - one SMTP connection on a cloudflare:sockets socket
 *
 * DESCRIPTION
 *   SmtpConnection carries out the session core's socket actions: connect, write, read replies,
 *   upgrade to TLS, stream a body through the dot-stuffer; every wait is raced against the
 *   timeout the core names (StepTimer). close() is never awaited (workerd can hang in close
 *   after STARTTLS). startTls() returns a new socket; the old one is dropped. socket.ts drives it.
 *
 * ERRORS
 *   Socket, TLS and read failures are returned as the core's failure values, never thrown.
 */
import { connect as cloudflareConnect } from "cloudflare:sockets";
import type { SessionConfig } from "./core/config";
import { createDotStuffer, finishDotStuffing, stuffChunk } from "./core/dot-stuff";
import { createLocalFailure, createNetworkFailure, createProtocolFailure } from "./core/errors";
import { createReplyParser, feedReplyParser, hasBufferedInput, type SmtpReply } from "./core/reply";
import type { SessionState } from "./core/state";
import type { SecureTransport, SessionEvent } from "./core/types";
import { SmtpDeliveryRequest } from "./socket";

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

/** Milliseconds the adapter may wait in the current step. */
export function computeWaitMs(state: SessionState, cfg: SessionConfig): number {
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
export class SmtpConnection {
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
      // Raced as every other wait is: a body that never opened (an R2 read that hangs) would hold
      // the server's session after its 354, and the entry in its agent until its lease ran out.
      const opening = Promise.resolve(open());
      const opened = await this.timer.race(opening, ms);
      if (opened === TIMED_OUT) {
        void opening.then((s) => s.cancel()).catch(() => undefined);
        return { kind: "failed", failure: createLocalFailure("timed out opening the message body") };
      }
      body = opened.getReader();
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
