// Test-only: a node:net / node:tls socket factory with the shape of cloudflare:sockets'
// connect(), so worker/smtp/socket.ts (and through it the pure session) runs unchanged
// against real SMTP servers in Node. It records every byte written, for assertions.

import net from "node:net";
import tls from "node:tls";
import type { ConnectSocket, SmtpSocket } from "../../../worker/smtp/socket";

/** Options for the Node socket factory. */
export interface NodeConnectOptions {
  /** Certificates to trust for TLS (the only trust anchors when given). */
  ca?: string | Buffer;
  /** Receives each chunk the client writes, decoded as latin1 (byte-exact). */
  onWrite?: (text: string) => void;
}

/** Returns a connect() for Node that behaves like cloudflare:sockets for this adapter. */
export function createNodeConnect(options: NodeConnectOptions = {}): ConnectSocket {
  return (address, { secureTransport }) => {
    if (secureTransport === "on") {
      const raw = tls.connect({ ...tlsTarget(address.hostname, options), port: address.port });
      return new NodeSocket(raw, "secureConnect", options);
    }
    const raw = net.connect({ host: address.hostname, port: address.port });
    return new NodeSocket(raw, "connect", options);
  };
}

/** TLS options that verify the server as `hostname` (SNI only for names, not IPs). */
function tlsTarget(hostname: string, options: NodeConnectOptions): tls.ConnectionOptions {
  return {
    host: hostname,
    ...(net.isIP(hostname) ? {} : { servername: hostname }),
    ...(options.ca ? { ca: options.ca } : {}),
    checkServerIdentity: (_host, cert) => tls.checkServerIdentity(hostname, cert),
  };
}

/** Runs a stream-controller call that may throw because the stream already ended. */
function settle(fn: () => void): void {
  try {
    fn();
  } catch {
    // Already closed or errored.
  }
}

/** A Node socket dressed as a cloudflare:sockets Socket. */
class NodeSocket implements SmtpSocket {
  readonly readable: ReadableStream<Uint8Array>;
  readonly writable: WritableStream<Uint8Array>;
  readonly opened: Promise<unknown>;
  private detach: () => void = () => undefined;

  constructor(
    private readonly raw: net.Socket,
    openEvent: "connect" | "secureConnect",
    private readonly options: NodeConnectOptions,
  ) {
    this.opened = new Promise((resolve, reject) => {
      raw.once(openEvent, () => resolve({}));
      raw.once("error", reject);
    });
    this.opened.catch(() => undefined);
    // Errors reach the adapter through `opened` and the readable; never crash the test process.
    raw.on("error", () => undefined);
    this.readable = new ReadableStream<Uint8Array>({
      start: (controller) => {
        const onData = (d: Buffer) => settle(() => controller.enqueue(new Uint8Array(d)));
        const onEnd = () => settle(() => controller.close());
        const onError = (e: Error) => settle(() => controller.error(e));
        raw.on("data", onData);
        raw.on("end", onEnd);
        raw.on("close", onEnd);
        raw.on("error", onError);
        this.detach = () => {
          raw.off("data", onData);
          raw.off("end", onEnd);
          raw.off("close", onEnd);
          raw.off("error", onError);
        };
      },
      cancel: () => {
        raw.destroy();
      },
    });
    this.writable = new WritableStream<Uint8Array>({
      write: (chunk) =>
        new Promise<void>((resolve, reject) => {
          this.options.onWrite?.(Buffer.from(chunk).toString("latin1"));
          raw.write(chunk, (err) => (err ? reject(err) : resolve()));
        }),
      close: () => {
        raw.end();
      },
    });
  }

  close(): Promise<void> {
    this.raw.destroy();
    return Promise.resolve();
  }

  startTls(tlsOptions?: { expectedServerHostname?: string }): SmtpSocket {
    this.detach();
    const name = tlsOptions?.expectedServerHostname ?? "localhost";
    const secure = tls.connect({ ...tlsTarget(name, this.options), socket: this.raw });
    return new NodeSocket(secure, "secureConnect", this.options);
  }
}
