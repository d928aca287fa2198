// End to end through a real SOCKS5 server: Dante (Debian dante-server) on 127.0.0.1, with
// no-auth and with RFC 1929 username/password. worker/smtp/socket.ts delivers to an
// smtp-server sink through worker/net/socks5.ts, STARTTLS verified against the target name.

import net, { type AddressInfo } from "node:net";
import { SMTPServer, type SMTPServerOptions } from "smtp-server";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { createSocks5Connect } from "../../../worker/net/socks5";
import { createSessionConfig, type SessionConfigInput } from "../../../worker/smtp/core/config";
import type { MessageEnvelope, SessionOutcome } from "../../../worker/smtp/core/types";
import { deliverSession } from "../../../worker/smtp/socket";
import { createNodeConnect } from "../smtp/node-driver";
import { DANTE_USER, startDante, type DanteServer } from "./dante";
import { TEST_CERT, TEST_KEY } from "../../fixtures/smtp/tls";

vi.mock("cloudflare:sockets", () => ({
  connect: () => {
    throw new Error("cloudflare:sockets used in a Node test");
  },
}));

const BLOCKED_PORT = 9;

let noAuth: DanteServer;
let userPass: DanteServer;

beforeAll(async () => {
  [noAuth, userPass] = await Promise.all([
    startDante({ method: "none", blockPorts: [BLOCKED_PORT] }),
    startDante({ method: "username" }),
  ]);
});

afterAll(async () => {
  await Promise.all([noAuth?.stop(), userPass?.stop()]);
});

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

interface Received {
  rcptTo: string[];
  body: string;
  secure: boolean;
}

/** Starts an smtp-server sink on 127.0.0.1, port 0, with the localhost test certificate. */
async function startSink(options: SMTPServerOptions = {}): Promise<{ port: number; received: Received[] }> {
  const received: Received[] = [];
  const sockets = new Set<net.Socket>();
  const server = new SMTPServer({
    logger: false,
    disableReverseLookup: true,
    authOptional: true,
    closeTimeout: 50,
    key: TEST_KEY,
    cert: TEST_CERT,
    onData: (stream, session, callback) => {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        received.push({
          rcptTo: session.envelope.rcptTo.map((r) => r.address),
          body: Buffer.concat(chunks).toString("utf8"),
          secure: session.secure,
        });
        callback(null, "queued");
      });
    },
    ...options,
  });
  server.server.on("connection", (s: net.Socket) => sockets.add(s));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );
  return { port: (server.server.address() as AddressInfo).port, received };
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

const BODY = "Subject: via socks\r\n\r\n.leading dot\r\nthrough the tunnel\r\n";
const MESSAGE: MessageEnvelope = {
  id: "m1",
  mailFrom: "a@example.org",
  rcptTo: ["b@example.net"],
  sizeBytes: BODY.length,
  eightBitMime: false,
  smtpUtf8: false,
};

interface ViaArgs {
  proxy: DanteServer;
  port: number;
  credentials?: { username: string; password: string } | null;
  config?: Partial<SessionConfigInput>;
  tlsServerName?: string;
}

/** Delivers MESSAGE to localhost:port through the proxy; returns the outcome and what was dialled. */
async function deliverVia(args: ViaArgs): Promise<{ outcome: SessionOutcome; dialled: string[] }> {
  const dialled: string[] = [];
  const node = createNodeConnect({ ca: TEST_CERT });
  const connect = createSocks5Connect({
    hostname: "127.0.0.1",
    port: args.proxy.port,
    credentials: args.credentials ?? null,
    handshakeTimeoutMs: 5_000,
    connect: (address, options) => {
      dialled.push(`${address.hostname}:${address.port}`);
      return node(address, options);
    },
  });
  const timeouts = {
    connectTimeoutSec: 5,
    heloTimeoutSec: 5,
    starttlsTimeoutSec: 5,
    mailTimeoutSec: 5,
    rcptTimeoutSec: 5,
    dataDoneTimeoutSec: 5,
    quitTimeoutSec: 5,
  };
  const outcome = await deliverSession({
    hostname: "localhost",
    port: args.port,
    config: createSessionConfig({
      heloName: "client.test",
      remoteHost: `localhost:${args.port}`,
      timeouts,
      ...args.config,
    }),
    messages: [MESSAGE],
    openBody: () => new Blob([BODY]).stream(),
    connect,
    ...(args.tlsServerName ? { tlsServerName: args.tlsServerName } : {}),
  });
  return { outcome, dialled };
}

const statuses = (o: SessionOutcome) => o.transactions.flatMap((t) => t.recipients.map((r) => r.status));

describe("SMTP through Dante without authentication", () => {
  it("delivers with STARTTLS through the tunnel, verified against the target name", async () => {
    const sink = await startSink();
    const { outcome, dialled } = await deliverVia({
      proxy: noAuth,
      port: sink.port,
      config: { tlsPolicy: "required" },
    });
    expect(statuses(outcome)).toEqual(["delivered"]);
    expect(outcome.siteFailure).toBeNull();
    expect(outcome.tls).toBe(true);
    expect(sink.received).toEqual([{ rcptTo: ["b@example.net"], body: BODY, secure: true }]);
    // Only the proxy was dialled; Dante made the connection to the sink.
    expect(dialled).toEqual([`127.0.0.1:${noAuth.port}`]);
    await expect.poll(() => noAuth.log()).toMatch(new RegExp(`(localhost|127\\.0\\.0\\.1)\\.${sink.port}\\b`));
  });

  it("fails TLS (4.7.5) when the certificate does not match the name it must be verified against", async () => {
    const sink = await startSink();
    const { outcome } = await deliverVia({
      proxy: noAuth,
      port: sink.port,
      config: { tlsPolicy: "required" },
      tlsServerName: "mx.other.example",
    });
    expect(statuses(outcome)).toEqual(["deferred"]);
    expect(outcome.siteFailure?.dsnStatus).toBe("4.7.5");
    expect(sink.received).toEqual([]);
  });

  it("delivers over implicit TLS through the tunnel", async () => {
    const sink = await startSink({ secure: true });
    const { outcome } = await deliverVia({
      proxy: noAuth,
      port: sink.port,
      config: { implicitTls: true, tlsPolicy: "required" },
    });
    expect(statuses(outcome)).toEqual(["delivered"]);
    expect(sink.received[0]?.secure).toBe(true);
  });

  it("runs several sessions through the proxy at once", async () => {
    const sink = await startSink();
    const runs = await Promise.all([1, 2, 3].map(() => deliverVia({ proxy: noAuth, port: sink.port })));
    expect(runs.map((r) => statuses(r.outcome))).toEqual([["delivered"], ["delivered"], ["delivered"]]);
    expect(sink.received).toHaveLength(3);
  });

  it("reports a target that refuses the connection (REP 5) as a 4.4.1 site failure", async () => {
    const port = await closedPort();
    const { outcome } = await deliverVia({ proxy: noAuth, port });
    expect(statuses(outcome)).toEqual(["deferred"]);
    expect(outcome.siteFailure?.dsnStatus).toBe("4.4.1");
    expect(outcome.siteFailure?.reason).toContain(
      `SOCKS5 proxy could not connect to localhost:${port}: connection refused (REP 5)`,
    );
  });

  it("reports a CONNECT the proxy's rules forbid (REP 2) as a site failure", async () => {
    const { outcome } = await deliverVia({ proxy: noAuth, port: BLOCKED_PORT });
    expect(outcome.siteFailure?.dsnStatus).toBe("4.4.1");
    expect(outcome.siteFailure?.reason).toContain("connection not allowed by ruleset (REP 2)");
  });

  it("reports a proxy that cannot be reached", async () => {
    const port = await closedPort();
    const { outcome } = await deliverVia({ proxy: { ...noAuth, port }, port: 25 });
    expect(outcome.siteFailure?.dsnStatus).toBe("4.4.1");
    expect(outcome.siteFailure?.reason).toContain(`cannot connect to SOCKS5 proxy 127.0.0.1:${port}`);
  });
});

describe("SMTP through Dante with username/password (RFC 1929)", () => {
  it("authenticates to the proxy and delivers with STARTTLS", async () => {
    const sink = await startSink();
    const { outcome } = await deliverVia({
      proxy: userPass,
      port: sink.port,
      credentials: DANTE_USER,
      config: { tlsPolicy: "required" },
    });
    expect(statuses(outcome)).toEqual(["delivered"]);
    expect(sink.received).toEqual([{ rcptTo: ["b@example.net"], body: BODY, secure: true }]);
  });

  it("fails with a clear message when the proxy rejects the password, and never shows it", async () => {
    const sink = await startSink();
    const { outcome } = await deliverVia({
      proxy: userPass,
      port: sink.port,
      credentials: { username: DANTE_USER.username, password: "wrong" },
    });
    expect(statuses(outcome)).toEqual(["deferred"]);
    expect(outcome.siteFailure?.reason).toContain("SOCKS5 proxy rejected the username/password");
    expect(outcome.siteFailure?.reason).not.toContain("wrong");
    expect(sink.received).toEqual([]);
  });

  it("fails when no credentials are configured for a proxy that requires them (method 0xFF)", async () => {
    const sink = await startSink();
    const { outcome } = await deliverVia({ proxy: userPass, port: sink.port });
    expect(outcome.siteFailure?.reason).toContain(
      "SOCKS5 proxy accepts none of the offered methods (no authentication)",
    );
  });
});
