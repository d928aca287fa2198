// End to end: worker/smtp/socket.ts (with the pure core inside) against a real SMTP
// server nobody here wrote (smtp-server from npm), through the Node socket driver.

import net, { type AddressInfo } from "node:net";
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from "smtp-server";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createSessionConfig, type SessionConfigInput } from "../../../worker/smtp/core/config";
import type { MessageEnvelope, SessionOutcome } from "../../../worker/smtp/core/types";
import { CachedSmtpSession, deliverSession } from "../../../worker/smtp/socket";
import { createNodeConnect } from "./node-driver";
import { TEST_CERT, TEST_KEY } from "../../fixtures/smtp/tls";

// The adapter must take its sockets from the injected factory, never from the platform.
vi.mock("cloudflare:sockets", () => ({
  connect: () => {
    throw new Error("cloudflare:sockets used in a Node test");
  },
}));

interface Received {
  mailFrom: string;
  mailArgs: Record<string, string | true>;
  rcptTo: string[];
  body: Buffer;
  secure: boolean;
  user: unknown;
  sessionId: string;
  transaction: number;
}

interface TestServer {
  port: number;
  received: Received[];
  /** Server-side sockets, by client port. */
  sockets: Map<number, net.Socket>;
  close(): Promise<void>;
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

/** Starts smtp-server on 127.0.0.1, port 0; it is closed after the test. */
async function startServer(options: SMTPServerOptions = {}): Promise<TestServer> {
  const received: Received[] = [];
  const sockets = new Map<number, net.Socket>();
  const server = new SMTPServer({
    logger: false,
    disableReverseLookup: true,
    authOptional: true,
    hideENHANCEDSTATUSCODES: false,
    closeTimeout: 50,
    key: TEST_KEY,
    cert: TEST_CERT,
    onData: (stream, session, callback) => {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        received.push(record(session, Buffer.concat(chunks)));
        callback(null, `queued as q${received.length}`);
      });
    },
    ...options,
  });
  server.server.on("connection", (s: net.Socket) => {
    if (s.remotePort !== undefined) sockets.set(s.remotePort, s);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.server.address() as AddressInfo).port;
  const close = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets.values()) s.destroy();
      server.close(() => resolve());
    });
  cleanups.push(close);
  return { port, received, sockets, close };
}

/** Copies what the server saw of one transaction. */
function record(session: SMTPServerSession, body: Buffer): Received {
  const from = session.envelope.mailFrom;
  return {
    mailFrom: from ? from.address : "(none)",
    mailArgs: (from && from.args) || {},
    rcptTo: session.envelope.rcptTo.map((r) => r.address),
    body,
    secure: session.secure,
    user: session.user,
    sessionId: session.id,
    transaction: session.transaction,
  };
}

/** A ReadableStream that yields `bytes` in chunks of `size`. */
function streamOf(bytes: Buffer, size = 7): ReadableStream<Uint8Array> {
  let offset = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= bytes.length) return controller.close();
      controller.enqueue(new Uint8Array(bytes.subarray(offset, offset + size)));
      offset += size;
    },
  });
}

interface DeliverArgs {
  port: number;
  messages: MessageEnvelope[];
  bodies: Record<string, Buffer>;
  config?: Partial<SessionConfigInput>;
  trustFixture?: boolean;
  chunkSize?: number;
}

/** Runs deliverSession with the Node driver; returns the outcome and every client write. */
async function deliver(args: DeliverArgs): Promise<{ outcome: SessionOutcome; writes: string[] }> {
  const writes: string[] = [];
  const outcome = await deliverSession({
    hostname: "127.0.0.1",
    port: args.port,
    tlsServerName: "localhost",
    config: createSessionConfig({
      heloName: "client.test",
      remoteHost: `localhost[127.0.0.1]:${args.port}`,
      ...args.config,
    }),
    messages: args.messages,
    openBody: (id) => streamOf(args.bodies[id] ?? Buffer.alloc(0), args.chunkSize),
    connect: createNodeConnect({
      ...(args.trustFixture === false ? {} : { ca: TEST_CERT }),
      onWrite: (w) => writes.push(w),
    }),
  });
  return { outcome, writes };
}

/** Builds an envelope whose size matches its body. */
function message(id: string, rcptTo: string[], body: Buffer, extra: Partial<MessageEnvelope> = {}): MessageEnvelope {
  return {
    id,
    mailFrom: "sender@example.org",
    rcptTo,
    sizeBytes: body.length,
    eightBitMime: false,
    smtpUtf8: false,
    ...extra,
  };
}

const statuses = (o: SessionOutcome) => o.transactions.map((t) => t.recipients.map((r) => r.status));

const TRICKY_BODY = Buffer.from(
  "Subject: dots\r\n\r\n.leading dot\r\n..two dots\r\n.\r\nmiddle . dot\r\nbare LF line\n. after bare LF\nünïcödé\r\nno final newline",
  "utf8",
);

describe("delivery to smtp-server", () => {
  it("pipelines the envelope and the server receives the exact envelope and body bytes", async () => {
    const server = await startServer({ size: 1_000_000 });
    const msg = message("m1", ["a@example.net", "b@example.net"], TRICKY_BODY, { eightBitMime: true });
    const { outcome, writes } = await deliver({ port: server.port, messages: [msg], bodies: { m1: TRICKY_BODY } });

    expect(statuses(outcome)).toEqual([["delivered", "delivered"]]);
    expect(outcome.siteFailure).toBeNull();
    expect(outcome.transactions[0]?.recipients[0]).toMatchObject({
      code: 250,
      enhanced: "2.6.0",
      text: "queued as q1",
    });
    expect(writes).toContain(
      `MAIL FROM:<sender@example.org> SIZE=${TRICKY_BODY.length} BODY=8BITMIME\r\n` +
        "RCPT TO:<a@example.net>\r\nRCPT TO:<b@example.net>\r\nDATA\r\n",
    );
    const [got] = server.received;
    expect(got?.mailFrom).toBe("sender@example.org");
    expect(got?.mailArgs).toEqual({ SIZE: String(TRICKY_BODY.length), BODY: "8BITMIME" });
    expect(got?.rcptTo).toEqual(["a@example.net", "b@example.net"]);
    const want = `${TRICKY_BODY.toString("utf8").replace(/\r?\n/g, "\r\n")}\r\n`;
    expect(got?.body.toString("utf8")).toBe(want);
  });

  it("delivers two messages in one session with RSET between them", async () => {
    const server = await startServer();
    const b1 = Buffer.from("Subject: one\r\n\r\nfirst\r\n");
    const b2 = Buffer.from("Subject: two\r\n\r\n.second\r\n");
    const { outcome, writes } = await deliver({
      port: server.port,
      messages: [message("m1", ["a@example.net"], b1), message("m2", ["b@example.net"], b2)],
      bodies: { m1: b1, m2: b2 },
    });
    expect(statuses(outcome)).toEqual([["delivered"], ["delivered"]]);
    expect(writes).toContain("RSET\r\n");
    expect(server.received.map((r) => [r.rcptTo, r.body.toString()])).toEqual([
      [["a@example.net"], b1.toString()],
      [["b@example.net"], b2.toString()],
    ]);
    expect(server.received[0]?.sessionId).toBe(server.received[1]?.sessionId);
  });

  it("gives per-recipient results for a 550 and a 451 and delivers to the rest", async () => {
    const server = await startServer({
      onRcptTo: (address, _session, callback) => {
        if (address.address.startsWith("gone@"))
          return callback(Object.assign(new Error("No such user"), { responseCode: 550 }));
        if (address.address.startsWith("later@"))
          return callback(Object.assign(new Error("Try later"), { responseCode: 451 }));
        callback();
      },
    });
    const body = Buffer.from("Subject: x\r\n\r\nhi\r\n");
    const { outcome } = await deliver({
      port: server.port,
      messages: [message("m1", ["ok@example.net", "gone@example.net", "later@example.net"], body)],
      bodies: { m1: body },
    });
    expect(statuses(outcome)).toEqual([["delivered", "bounced", "deferred"]]);
    expect(outcome.transactions[0]?.recipients[1]).toMatchObject({ code: 550, text: "No such user", source: "remote" });
    expect(outcome.transactions[0]?.recipients[2]).toMatchObject({ code: 451, text: "Try later" });
    expect(outcome.siteFailure).toBeNull();
    expect(server.received.map((r) => r.rcptTo)).toEqual([["ok@example.net"]]);
  });

  it("refuses a message larger than the server's SIZE without sending MAIL", async () => {
    const server = await startServer({ size: 100 });
    const body = Buffer.alloc(500, "a");
    const { outcome, writes } = await deliver({
      port: server.port,
      messages: [message("m1", ["a@example.net"], body)],
      bodies: { m1: body },
    });
    expect(outcome.transactions[0]?.recipients[0]).toMatchObject({
      status: "bounced",
      code: 552,
      enhanced: "5.3.4",
      source: "local",
    });
    expect(writes.some((w) => w.startsWith("MAIL"))).toBe(false);
    expect(server.received).toEqual([]);
  });
});

describe("TLS and AUTH against smtp-server", () => {
  it("upgrades with STARTTLS (self-signed certificate trusted by the test) and delivers encrypted", async () => {
    const server = await startServer();
    const body = Buffer.from("Subject: tls\r\n\r\nsecret\r\n");
    const { outcome, writes } = await deliver({
      port: server.port,
      messages: [message("m1", ["a@example.net"], body)],
      bodies: { m1: body },
      config: { tlsPolicy: "required" },
    });
    expect(statuses(outcome)).toEqual([["delivered"]]);
    expect(outcome.tls).toBe(true);
    expect(outcome.transactions[0]?.tls).toBe(true);
    expect(writes.filter((w) => w.startsWith("EHLO"))).toHaveLength(2);
    expect(server.received[0]?.secure).toBe(true);
  });

  it("defers with a 4.7.5 site failure when the certificate is not trusted and TLS is required", async () => {
    const server = await startServer();
    const body = Buffer.from("x\r\n");
    const { outcome } = await deliver({
      port: server.port,
      messages: [message("m1", ["a@example.net"], body)],
      bodies: { m1: body },
      config: { tlsPolicy: "required" },
      trustFixture: false,
    });
    expect(statuses(outcome)).toEqual([["deferred"]]);
    expect(outcome.siteFailure?.dsnStatus).toBe("4.7.5");
    expect(server.received).toEqual([]);
  });

  it("falls back to a plaintext connection when an opportunistic handshake fails", async () => {
    const server = await startServer();
    const body = Buffer.from("x\r\n");
    const { outcome } = await deliver({
      port: server.port,
      messages: [message("m1", ["a@example.net"], body)],
      bodies: { m1: body },
      trustFixture: false,
    });
    expect(statuses(outcome)).toEqual([["delivered"]]);
    expect(outcome.tls).toBe(false);
    expect(server.received[0]?.secure).toBe(false);
  });

  it("delivers over implicit TLS", async () => {
    const server = await startServer({ secure: true });
    const body = Buffer.from("Subject: 465\r\n\r\nhi\r\n");
    const { outcome } = await deliver({
      port: server.port,
      messages: [message("m1", ["a@example.net"], body)],
      bodies: { m1: body },
      config: { implicitTls: true, tlsPolicy: "required" },
    });
    expect(statuses(outcome)).toEqual([["delivered"]]);
    expect(server.received[0]?.secure).toBe(true);
  });

  it.each(["PLAIN", "LOGIN"])("authenticates with AUTH %s through onAuth", async (method) => {
    const seen: string[] = [];
    const server = await startServer({
      authMethods: [method],
      authOptional: false,
      onAuth: (auth, _session, callback) => {
        seen.push(`${auth.method}:${auth.username}:${auth.password}`);
        if (auth.username === "joe" && auth.password === "s3cret pässword") return callback(null, { user: "joe" });
        callback(new Error("Invalid username or password"));
      },
    });
    const body = Buffer.from("Subject: auth\r\n\r\nhi\r\n");
    const { outcome } = await deliver({
      port: server.port,
      messages: [message("m1", ["a@example.net"], body)],
      bodies: { m1: body },
      config: { credentials: { username: "joe", password: "s3cret pässword" } },
    });
    expect(statuses(outcome)).toEqual([["delivered"]]);
    expect(seen).toEqual([`${method}:joe:s3cret pässword`]);
    expect(server.received[0]?.user).toBe("joe");
  });

  it("defers without a site failure when the server rejects the credentials", async () => {
    const server = await startServer({
      authOptional: false,
      onAuth: (_auth, _session, callback) => callback(new Error("Invalid username or password")),
    });
    const body = Buffer.from("x\r\n");
    const { outcome } = await deliver({
      port: server.port,
      messages: [message("m1", ["a@example.net"], body)],
      bodies: { m1: body },
      config: { credentials: { username: "joe", password: "wrong" } },
    });
    expect(outcome.transactions[0]?.recipients[0]).toMatchObject({ status: "deferred", code: 535 });
    expect(outcome.siteFailure).toBeNull();
  });
});

describe("connection loss against smtp-server", () => {
  it("defers with a site failure when onData destroys the socket mid-DATA", async () => {
    const server = await startServer({
      onData: (stream, session) => {
        stream.once("data", () => server.sockets.get(session.remotePort)?.destroy());
      },
    });
    const body = Buffer.alloc(16 * 1024 * 1024, "abcdefgh\r\n");
    const { outcome } = await deliver({
      port: server.port,
      messages: [message("m1", ["a@example.net"], body)],
      bodies: { m1: body },
      chunkSize: 64 * 1024,
    });
    expect(statuses(outcome)).toEqual([["deferred"]]);
    expect(outcome.transactions[0]?.possibleDuplicate).toBe(false);
    expect(outcome.siteFailure?.dsnStatus).toBe("4.4.2");
    expect(outcome.siteFailure?.reason).toContain("while sending message body");
  });

  it("marks a possible duplicate when the connection is lost after the final dot", async () => {
    const b1 = Buffer.from("first\r\n");
    const b2 = Buffer.from("second\r\n");
    let transactions = 0;
    const server = await startServer({
      onData: (stream, session, callback) => {
        stream.resume();
        stream.on("end", () => {
          transactions += 1;
          if (transactions === 1) return callback(null, "ok");
          server.sockets.get(session.remotePort)?.destroy();
        });
      },
    });
    const { outcome } = await deliver({
      port: server.port,
      messages: [message("m1", ["a@example.net"], b1), message("m2", ["b@example.net"], b2)],
      bodies: { m1: b1, m2: b2 },
    });
    expect(statuses(outcome)).toEqual([["delivered"], ["deferred"]]);
    expect(outcome.transactions.map((t) => t.possibleDuplicate)).toEqual([false, true]);
    expect(outcome.siteFailure).toBeNull();
  });
});

describe("a cached connection against smtp-server", () => {
  const target = (port: number, writes: string[]) => ({
    hostname: "127.0.0.1",
    port,
    tlsServerName: "localhost",
    config: createSessionConfig({
      heloName: "client.test",
      remoteHost: `localhost[127.0.0.1]:${port}`,
      tlsPolicy: "off",
    }),
    connect: createNodeConnect({ onWrite: (w) => writes.push(w) }),
  });
  const body = (id: string) => Buffer.from(`Subject: ${id}\r\n\r\nbody of ${id}\r\n`);
  const open = (id: string) => streamOf(body(id));

  it("three batches at different times go over one connection: one EHLO, RSET before each reuse, QUIT at the close", async () => {
    const server = await startServer();
    const writes: string[] = [];
    const session = new CachedSmtpSession(target(server.port, writes));
    const first = await session.send([message("a", ["a@x.test"], body("a"))], open);
    await new Promise((r) => setTimeout(r, 50));
    const second = await session.send(
      [message("b", ["b@x.test"], body("b")), message("c", ["c@x.test"], body("c"))],
      open,
    );
    const third = await session.send([message("d", ["d@x.test"], body("d"))], open);
    expect(
      [first, second, third].map((b) => [b.open, b.staleCache, b.transactions.map((t) => t.recipients[0]!.status)]),
    ).toEqual([
      [true, false, ["delivered"]],
      [true, false, ["delivered", "delivered"]],
      [true, false, ["delivered"]],
    ]);
    await session.close();
    expect(session.open).toBe(false);
    expect(new Set(server.received.map((r) => r.sessionId)).size).toBe(1);
    expect(server.received.map((r) => r.rcptTo[0])).toEqual(["a@x.test", "b@x.test", "c@x.test", "d@x.test"]);
    expect(writes.filter((w) => w.startsWith("EHLO"))).toHaveLength(1);
    expect(writes.filter((w) => w === "RSET\r\n")).toHaveLength(3);
    expect(writes.at(-1)).toBe("QUIT\r\n");
  });

  it("a cached connection the server closed while it was idle reports staleCache for the next batch, which was not delivered", async () => {
    const server = await startServer();
    const writes: string[] = [];
    const session = new CachedSmtpSession(target(server.port, writes));
    expect((await session.send([message("a", ["a@x.test"], body("a"))], open)).open).toBe(true);
    for (const s of server.sockets.values()) s.destroy();
    await new Promise((r) => setTimeout(r, 50));
    const next = await session.send([message("b", ["b@x.test"], body("b"))], open);
    expect(next).toMatchObject({ staleCache: true, open: false, siteFailure: null });
    expect(next.transactions[0]!.recipients[0]!.status).toBe("deferred");
    expect(server.received.map((r) => r.rcptTo[0])).toEqual(["a@x.test"]);
    await expect(session.send([], open)).rejects.toThrow(/closed cached session/);
  });
});
