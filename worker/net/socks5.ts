/*
 * NAME
 *   socks5 - a cloudflare:sockets-shaped connect() that tunnels through a
 *            SOCKS5 egress bridge
 *
 * SUMMARY
 *   Workers cannot connect to port 25. createSocks5Connect(proxy) returns a
 *   ConnectSocket (worker/smtp/socket.ts) that reaches host:port through a
 *   SOCKS5 proxy (RFC 1928, RFC 1929 username/password), so the SMTP adapter
 *   runs unchanged over the tunnel, STARTTLS included.
 *
 * DESCRIPTION
 *   The returned factory connects to the proxy with the injected connect
 *   (default cloudflare:sockets), runs the pure handshake of
 *   core/socks5-handshake.ts over it, and hands back a socket at once:
 *   `opened` settles when the tunnel is up (or fails), and `readable` and
 *   `writable` carry the tunnelled stream once it is. Bytes that came with
 *   the CONNECT reply are delivered first.
 *
 *   The proxy connection is opened with secureTransport "starttls" unless
 *   "off" was asked for, because TLS to the target is started on it:
 *   startTls({expectedServerHostname}) wraps the existing stream, so the
 *   certificate is verified against the target (MX) name, never the
 *   proxy's. "on" (implicit TLS, port 465) does the same right after CONNECT.
 *   As with cloudflare:sockets, startTls returns a new socket and this one
 *   must not be used after.
 *
 *   createEgressConnect(path) picks a direct connect or a SOCKS5 one.
 *
 *   Every step (TCP connect to the proxy, each write and read of the
 *   handshake, implicit TLS) is raced against one handshake deadline.
 *   close() never waits.
 *
 * INVARIANTS
 *   No tunnelled byte is readable before the handshake succeeded. Credentials
 *   appear in no error text.
 *
 * ERRORS
 *   The factory throws only what the injected connect throws synchronously.
 *   `opened` rejects with a Socks5Error (core/socks5.ts) for a proxy that
 *   cannot be reached ("proxy-unreachable"), refuses ("not-allowed",
 *   "connection-refused", ...), breaks the protocol, closes, or is too slow
 *   ("timeout"). startTls throws if called before `opened` resolved, twice,
 *   or with unread tunnel bytes pending (possible command injection).
 */

import { connect as cloudflareConnect } from "cloudflare:sockets";
import type { ConnectSocket, SmtpSocket } from "../smtp/socket";
import type { SecureTransport } from "../smtp/core/types";
import {
  endSocks5Handshake,
  feedSocks5Handshake,
  startSocks5Handshake,
  type Socks5Credentials,
  type Socks5Step,
} from "./core/socks5-handshake";
import { Socks5Error, isSocks5Error, type Socks5Target } from "./core/socks5";

/** Default for the whole handshake: Postfix's smtp_connect_timeout (30 s). */
export const DEFAULT_SOCKS5_HANDSHAKE_TIMEOUT_MS = 30_000;

/** Where the SOCKS5 proxy is and how to use it. */
export interface Socks5ProxyConfig {
  hostname: string;
  port: number;
  /** RFC 1929 credentials; null or absent offers "no authentication" only. */
  credentials?: Socks5Credentials | null;
  /** Deadline for everything before the tunnel is usable. Default 30000. */
  handshakeTimeoutMs?: number;
  /** Socket factory for the hop to the proxy. Default cloudflare:sockets' connect. */
  connect?: ConnectSocket;
}

/** How connections leave: straight to the target, or through a SOCKS5 bridge. */
export type EgressPath = { kind: "direct"; connect?: ConnectSocket } | ({ kind: "socks5" } & Socks5ProxyConfig);

/** Returns a ConnectSocket that tunnels every connection through `proxy`. */
export function createSocks5Connect(proxy: Socks5ProxyConfig): ConnectSocket {
  return (address, options) => new Socks5TunnelSocket(proxy, address, options.secureTransport, options.allowHalfOpen);
}

/** Returns the ConnectSocket for an egress path. */
export function createEgressConnect(path: EgressPath): ConnectSocket {
  if (path.kind === "socks5") return createSocks5Connect(path);
  return path.connect ?? (cloudflareConnect as ConnectSocket);
}

const TIMED_OUT = Symbol("timed out");

/** Resolves with the promise's value or TIMED_OUT at `deadline` (epoch ms). */
function raceDeadline<T>(promise: Promise<T>, deadline: number): Promise<T | typeof TIMED_OUT> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), Math.max(0, deadline - Date.now()));
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Text of an unknown thrown value. */
function describeError(e: unknown): string {
  return e instanceof Error ? e.message || e.name : String(e);
}

/** A socket whose stream is the far end of a SOCKS5 CONNECT. */
class Socks5TunnelSocket implements SmtpSocket {
  readonly readable: ReadableStream<Uint8Array>;
  readonly writable: WritableStream<Uint8Array>;
  readonly opened: Promise<unknown>;
  private readonly target: Socks5Target;
  /** Every socket opened for this tunnel, closed together. */
  private readonly sockets: SmtpSocket[] = [];
  /** The socket the tunnelled bytes flow on (the proxy socket, or TLS over it). */
  private inner: SmtpSocket;
  private reader: ReadableStreamDefaultReader<Uint8Array> | null = null;
  private writer: WritableStreamDefaultWriter<Uint8Array> | null = null;
  private pending: Uint8Array = new Uint8Array(0);
  private established = false;
  private handedOver = false;

  constructor(
    private readonly proxy: Socks5ProxyConfig,
    address: { hostname: string; port: number },
    secureTransport: SecureTransport,
    allowHalfOpen: boolean,
  ) {
    this.target = { hostname: address.hostname, port: address.port };
    const connect = proxy.connect ?? (cloudflareConnect as ConnectSocket);
    const hop = secureTransport === "off" ? "off" : "starttls";
    this.inner = connect({ hostname: proxy.hostname, port: proxy.port }, { secureTransport: hop, allowHalfOpen });
    this.sockets.push(this.inner);
    this.opened = this.establish(secureTransport === "on");
    this.opened.catch(() => undefined);
    this.readable = new ReadableStream<Uint8Array>(
      { pull: (controller) => this.pull(controller), cancel: () => void this.close() },
      { highWaterMark: 0 },
    );
    this.writable = new WritableStream<Uint8Array>({
      write: async (chunk) => {
        await this.opened;
        await this.ensureWriter().write(chunk);
      },
      close: async () => {
        await this.opened;
        await this.ensureWriter().close();
      },
      abort: () => void this.close(),
    });
  }

  /** Connects to the proxy, runs the handshake, and for "on" starts TLS to the target. */
  private async establish(implicitTls: boolean): Promise<unknown> {
    const deadline = Date.now() + (this.proxy.handshakeTimeoutMs ?? DEFAULT_SOCKS5_HANDSHAKE_TIMEOUT_MS);
    try {
      await this.openProxyHop(deadline);
      this.pending = await this.handshake(deadline);
      if (implicitTls) await this.startImplicitTls(deadline);
      this.established = true;
      return {};
    } catch (e) {
      void this.close();
      throw isSocks5Error(e) ? e : new Socks5Error("protocol", `SOCKS5 tunnel failed: ${describeError(e)}`);
    }
  }

  /** Waits for the TCP connection to the proxy. */
  private async openProxyHop(deadline: number): Promise<void> {
    const where = `${this.proxy.hostname}:${this.proxy.port}`;
    let opened: unknown;
    try {
      opened = await raceDeadline(this.inner.opened, deadline);
    } catch (e) {
      throw new Socks5Error("proxy-unreachable", `cannot connect to SOCKS5 proxy ${where}: ${describeError(e)}`);
    }
    if (opened === TIMED_OUT) throw new Socks5Error("timeout", `connect to SOCKS5 proxy ${where} timed out`);
  }

  /** Runs the pure handshake over the proxy socket; returns bytes that followed the CONNECT reply. */
  private async handshake(deadline: number): Promise<Uint8Array> {
    const reader = this.ensureReader();
    const writer = this.ensureWriter();
    let step: Socks5Step = startSocks5Handshake(this.target, this.proxy.credentials ?? null);
    for (;;) {
      if (step.result?.kind === "established") return step.result.rest;
      if (step.result?.kind === "failed") throw step.result.error;
      if (step.send) await this.timed(writer.write(step.send), deadline, step);
      const chunk = await this.timed(reader.read(), deadline, step);
      if (chunk.done) throw endSocks5Handshake(step.state, "closed");
      step = feedSocks5Handshake(step.state, chunk.value);
    }
  }

  /** Races one handshake I/O against the deadline, mapping failures to Socks5Error. */
  private async timed<T>(promise: Promise<T>, deadline: number, step: Socks5Step): Promise<T> {
    let value: T | typeof TIMED_OUT;
    try {
      value = await raceDeadline(promise, deadline);
    } catch (e) {
      const closed = endSocks5Handshake(step.state, "closed");
      throw new Socks5Error("closed", `${closed.message}: ${describeError(e)}`);
    }
    if (value === TIMED_OUT) throw endSocks5Handshake(step.state, "timeout");
    return value;
  }

  /** Implicit TLS to the target over the tunnel (secureTransport "on"). */
  private async startImplicitTls(deadline: number): Promise<void> {
    const tls = this.upgrade(this.target.hostname);
    this.inner = tls;
    let opened: unknown;
    try {
      opened = await raceDeadline(tls.opened, deadline);
    } catch (e) {
      throw new Socks5Error(
        "protocol",
        `TLS handshake with ${this.target.hostname} through SOCKS5 proxy failed: ${describeError(e)}`,
      );
    }
    if (opened === TIMED_OUT)
      throw new Socks5Error("timeout", `TLS handshake with ${this.target.hostname} through SOCKS5 proxy timed out`);
  }

  /** Gives up this socket's locks and starts TLS on the tunnelled stream. */
  private upgrade(expectedServerHostname: string): SmtpSocket {
    if (this.pending.length > 0) {
      throw new Socks5Error("protocol", `${this.pending.length} bytes received through the tunnel before TLS started`);
    }
    this.reader?.releaseLock();
    this.writer?.releaseLock();
    this.reader = null;
    this.writer = null;
    const tls = this.inner.startTls({ expectedServerHostname });
    this.sockets.push(tls);
    return tls;
  }

  /** Source for `readable`: bytes left from the handshake, then the tunnel. */
  private async pull(controller: ReadableStreamDefaultController<Uint8Array>): Promise<void> {
    try {
      await this.opened;
      if (this.pending.length > 0) {
        controller.enqueue(this.pending);
        this.pending = new Uint8Array(0);
        return;
      }
      const chunk = await this.ensureReader().read();
      if (chunk.done) controller.close();
      else controller.enqueue(chunk.value);
    } catch (e) {
      controller.error(e);
    }
  }

  /** The reader of the current inner socket, taken on first use. */
  private ensureReader(): ReadableStreamDefaultReader<Uint8Array> {
    this.reader ??= this.inner.readable.getReader();
    return this.reader;
  }

  /** The writer of the current inner socket, taken on first use. */
  private ensureWriter(): WritableStreamDefaultWriter<Uint8Array> {
    this.writer ??= this.inner.writable.getWriter();
    return this.writer;
  }

  /** STARTTLS to the target through the tunnel; returns the new socket (see header). */
  startTls(options?: { expectedServerHostname?: string }): SmtpSocket {
    if (!this.established || this.handedOver) {
      throw new Socks5Error("protocol", "startTls on a SOCKS5 tunnel that is not open, or was already upgraded");
    }
    const tls = this.upgrade(options?.expectedServerHostname ?? this.target.hostname);
    this.handedOver = true;
    return tls;
  }

  /** Closes every socket of the tunnel without waiting. */
  close(): Promise<void> {
    for (const socket of this.sockets) {
      try {
        void socket.close().catch(() => undefined);
      } catch {
        // A socket that throws on close is closed enough.
      }
    }
    return Promise.resolve();
  }
}
