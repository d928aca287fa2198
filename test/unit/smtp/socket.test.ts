// The cloudflare:sockets adapter against hand-made misbehaving servers: timeouts, refused
// connections, garbage, STARTTLS injection, a failing body stream, a close() that hangs.

import net, { type AddressInfo } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createSessionConfig, type SessionConfigInput } from "../../../worker/smtp/core/config";
import type { MessageEnvelope, SessionOutcome } from "../../../worker/smtp/core/types";
import { deliverSession, type ConnectSocket, type SmtpDeliveryRequest } from "../../../worker/smtp/socket";
import { createNodeConnect } from "./node-driver";

vi.mock("cloudflare:sockets", () => ({
  connect: () => {
    throw new Error("cloudflare:sockets used in a Node test");
  },
}));

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

/** Starts a raw TCP server whose behaviour the test scripts line by line. */
async function startRawServer(
  onLine: (line: string, socket: net.Socket) => void,
  greeting: string | null,
): Promise<number> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => undefined);
    if (greeting !== null) socket.write(greeting);
    let buffered = "";
    socket.on("data", (d) => {
      buffered += d.toString("latin1");
      for (let i = buffered.indexOf("\r\n"); i !== -1; i = buffered.indexOf("\r\n")) {
        const line = buffered.slice(0, i);
        buffered = buffered.slice(i + 2);
        onLine(line, socket);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );
  return (server.address() as AddressInfo).port;
}

const msg: MessageEnvelope = {
  id: "m1",
  mailFrom: "a@example.org",
  rcptTo: ["b@example.net"],
  sizeBytes: 3,
  eightBitMime: false,
  smtpUtf8: false,
};

/** Delivers `msg` to 127.0.0.1:port with short timeouts. */
function deliver(
  port: number,
  extra: Partial<SmtpDeliveryRequest> = {},
  config: Partial<SessionConfigInput> = {},
): Promise<SessionOutcome> {
  return deliverSession({
    hostname: "127.0.0.1",
    port,
    config: createSessionConfig({
      heloName: "client.test",
      remoteHost: "test-server",
      timeouts: { heloTimeoutSec: 0.15, connectTimeoutSec: 0.15, dataXferTimeoutSec: 0.15 },
      ...config,
    }),
    messages: [msg],
    openBody: () => new Blob(["hi\r\n"]).stream(),
    connect: createNodeConnect(),
    ...extra,
  });
}

/** A well-behaved line handler for a minimal server. */
function basicServer(line: string, socket: net.Socket): void {
  if (line.startsWith("EHLO")) socket.write("250-test\r\n250 PIPELINING\r\n");
  else if (line.startsWith("MAIL") || line.startsWith("RCPT")) socket.write("250 ok\r\n");
  else if (line === "DATA") socket.write("354 go\r\n");
  else if (line === ".") socket.write("250 done\r\n");
  else if (line === "QUIT") socket.end("221 bye\r\n");
}

describe("socket adapter", () => {
  it("times out a silent greeting using the core's timeout, as a site failure", async () => {
    const port = await startRawServer(() => undefined, null);
    const started = Date.now();
    const outcome = await deliver(port);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(outcome.siteFailure?.reason).toBe(
      "conversation with test-server timed out while receiving the initial server greeting",
    );
    expect(outcome.transactions[0]?.recipients[0]?.status).toBe("deferred");
  });

  it("times out a step whose timeout is shorter than the ones before it (the one timer is armed again)", async () => {
    // Greeting, EHLO, MAIL, RCPT and DATA answer at once under long timeouts; the reply to the
    // final dot never comes, and only that step's timeout is short.
    const port = await startRawServer((line, socket) => {
      if (line !== ".") basicServer(line, socket);
    }, "220 test\r\n");
    const started = Date.now();
    const outcome = await deliver(
      port,
      {},
      {
        timeouts: {
          heloTimeoutSec: 300,
          connectTimeoutSec: 300,
          mailTimeoutSec: 300,
          rcptTimeoutSec: 300,
          dataDoneTimeoutSec: 0.2,
        },
      },
    );
    expect(Date.now() - started).toBeLessThan(2000);
    expect(outcome.siteFailure?.reason).toMatch(/timed out while sending end of data/);
    expect(outcome.transactions[0]?.recipients[0]?.status).toBe("deferred");
  });

  it("a wait longer than an earlier, shorter step timeout does not time out (the timer fires early and waits on)", async () => {
    // Connect and EHLO have 0.15 s; the reply to MAIL comes after 0.4 s, within its 300 s.
    const port = await startRawServer((line, socket) => {
      if (line.startsWith("MAIL")) setTimeout(() => socket.write("250 ok\r\n"), 400);
      else basicServer(line, socket);
    }, "220 test\r\n");
    const outcome = await deliver(port);
    expect(outcome.siteFailure).toBeFalsy();
    expect(outcome.transactions[0]?.recipients[0]?.status).toBe("delivered");
  });

  it("reports a refused connection as a 4.4.1 site failure", async () => {
    const port = await startRawServer(() => undefined, null);
    await Promise.all(cleanups.splice(0).map((c) => c()));
    const outcome = await deliver(port);
    expect(outcome.siteFailure?.dsnStatus).toBe("4.4.1");
    expect(outcome.siteFailure?.reason).toMatch(/^connect to test-server: .*ECONNREFUSED/);
  });

  it("turns a garbage greeting into a protocol error", async () => {
    const port = await startRawServer(() => undefined, "hello there\r\n");
    const outcome = await deliver(port);
    expect(outcome.siteFailure?.dsnStatus).toBe("4.5.0");
    expect(outcome.siteFailure?.reason).toContain('invalid SMTP reply (bad-line): "hello there"');
  });

  it("treats the server closing after the greeting as a lost connection", async () => {
    const port = await startRawServer((line, socket) => socket.destroy(), "220 hi\r\n");
    const outcome = await deliver(port);
    expect(outcome.siteFailure?.reason).toContain(
      "lost connection with test-server while performing the EHLO handshake",
    );
  });

  it("refuses plaintext data that follows the STARTTLS reply (command injection)", async () => {
    const port = await startRawServer((line, socket) => {
      if (line.startsWith("EHLO")) socket.write("250-test\r\n250 STARTTLS\r\n");
      if (line === "STARTTLS") socket.write("220 go ahead\r\n250 injected\r\n");
    }, "220 hi\r\n");
    const outcome = await deliver(port, {}, { tlsPolicy: "required" });
    expect(outcome.transactions[0]?.recipients[0]?.status).toBe("deferred");
    expect(outcome.siteFailure?.reason).toContain("data received after the STARTTLS reply");
  });

  it("defers without a site failure when the body stream fails", async () => {
    const port = await startRawServer(basicServer, "220 hi\r\n");
    const broken = () =>
      new ReadableStream<Uint8Array>({
        pull(controller) {
          controller.error(new Error("R2 read failed"));
        },
      });
    const outcome = await deliver(port, { openBody: broken });
    expect(outcome.transactions[0]?.recipients[0]).toMatchObject({
      status: "deferred",
      enhanced: "4.3.0",
      source: "local",
    });
    expect(outcome.transactions[0]?.recipients[0]?.text).toContain("R2 read failed");
    expect(outcome.siteFailure).toBeNull();
  });

  it("defers when the body never opens (an R2 read that hangs), within the data timeout", async () => {
    const port = await startRawServer(basicServer, "220 hi\r\n");
    const started = Date.now();
    const outcome = await deliver(port, { openBody: () => new Promise<ReadableStream<Uint8Array>>(() => undefined) });
    expect(Date.now() - started).toBeLessThan(2000);
    expect(outcome.transactions[0]?.recipients[0]).toMatchObject({
      status: "deferred",
      enhanced: "4.3.0",
      source: "local",
    });
    expect(outcome.transactions[0]?.recipients[0]?.text).toContain("timed out opening the message body");
    expect(outcome.siteFailure).toBeNull();
  });

  it("does not wait for a close() that never settles", async () => {
    const port = await startRawServer(basicServer, "220 hi\r\n");
    const node = createNodeConnect();
    let closes = 0;
    const hangingClose: ConnectSocket = (address, options) => {
      const socket = node(address, options);
      return {
        readable: socket.readable,
        writable: socket.writable,
        opened: socket.opened,
        startTls: (o) => socket.startTls(o),
        close: () => {
          closes += 1;
          void socket.close();
          return new Promise<void>(() => undefined);
        },
      };
    };
    const outcome = await deliver(port, { connect: hangingClose });
    expect(outcome.transactions[0]?.recipients[0]?.status).toBe("delivered");
    expect(closes).toBeGreaterThan(0);
  });

  it("uses cloudflare:sockets when no factory is injected", async () => {
    const outcome = await deliverSession({
      hostname: "127.0.0.1",
      port: 9,
      config: createSessionConfig({ heloName: "client.test", remoteHost: "test-server" }),
      messages: [msg],
      openBody: () => new Blob([]).stream(),
    });
    expect(outcome.siteFailure?.reason).toBe("connect to test-server: cloudflare:sockets used in a Node test");
  });
});
