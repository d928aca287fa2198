// worker/net/socks5.ts against scripted misbehaving proxies (raw TCP on 127.0.0.1): timeouts,
// a proxy that hangs up, tunnelled bytes that arrive with the CONNECT reply, startTls guards.
// Interoperability with a real SOCKS5 server is in socks5-dante.test.ts.

import net, { type AddressInfo } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createEgressConnect, createSocks5Connect } from "../../../worker/net/socks5";
import type { ConnectSocket, SmtpSocket } from "../../../worker/smtp/socket";
import { createNodeConnect } from "../smtp/node-driver";

vi.mock("cloudflare:sockets", () => ({
  connect: () => {
    throw new Error("cloudflare:sockets used in a Node test");
  },
}));

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

/** A raw proxy whose every received chunk goes to `onData`; returns its port and what it got. */
async function scriptedProxy(
  onData: (data: Buffer, socket: net.Socket, count: number) => void,
): Promise<{ port: number; got: Buffer[] }> {
  const got: Buffer[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => undefined);
    let count = 0;
    socket.on("data", (d) => {
      got.push(d);
      onData(d, socket, count++);
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
  return { port: (server.address() as AddressInfo).port, got };
}

const CONNECT_OK = Buffer.from([5, 0, 0, 1, 127, 0, 0, 1, 0, 25]);

/** Opens a tunnel socket to mx.example.net:25 through 127.0.0.1:port. */
function open(
  port: number,
  handshakeTimeoutMs = 2_000,
  secureTransport: "off" | "starttls" | "on" = "starttls",
): SmtpSocket {
  const connect = createSocks5Connect({
    hostname: "127.0.0.1",
    port,
    handshakeTimeoutMs,
    connect: createNodeConnect(),
  });
  const socket = connect({ hostname: "mx.example.net", port: 25 }, { secureTransport, allowHalfOpen: false });
  cleanups.push(() => void socket.close());
  return socket;
}

describe("SOCKS5 adapter", () => {
  it("carries bytes both ways, delivering those that came with the CONNECT reply first", async () => {
    const proxy = await scriptedProxy((_d, socket, n) => {
      if (n === 0) socket.write(Buffer.from([5, 0]));
      if (n === 1) socket.write(Buffer.concat([CONNECT_OK, Buffer.from("220 mx ready\r\n")]));
      if (n === 2) socket.write("221 bye\r\n");
    });
    const socket = open(proxy.port);
    await socket.opened;
    const reader = socket.readable.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe("220 mx ready\r\n");
    const writer = socket.writable.getWriter();
    await writer.write(new TextEncoder().encode("QUIT\r\n"));
    expect(new TextDecoder().decode((await reader.read()).value)).toBe("221 bye\r\n");
    expect(proxy.got.map((b) => [...b])).toEqual([
      [5, 1, 0],
      [5, 1, 0, 3, 14, ...Buffer.from("mx.example.net"), 0, 25],
      [...Buffer.from("QUIT\r\n")],
    ]);
  });

  it("times out a proxy that never answers, naming the phase", async () => {
    const proxy = await scriptedProxy(() => undefined);
    const started = Date.now();
    await expect(open(proxy.port, 150).opened).rejects.toMatchObject({
      code: "timeout",
      message: "SOCKS5 handshake timed out during method selection (target mx.example.net:25)",
    });
    expect(Date.now() - started).toBeLessThan(1_500);
  });

  it("reports a proxy that hangs up in the middle of the handshake", async () => {
    const proxy = await scriptedProxy((_d, socket, n) => {
      if (n === 0) socket.write(Buffer.from([5, 0]));
      if (n === 1) socket.end();
    });
    await expect(open(proxy.port).opened).rejects.toMatchObject({
      code: "closed",
      message: expect.stringContaining("during CONNECT"),
    });
  });

  it("refuses startTls before the tunnel is open and with unread tunnel bytes", async () => {
    const proxy = await scriptedProxy((_d, socket, n) => {
      if (n === 0) socket.write(Buffer.from([5, 0]));
      if (n === 1) setTimeout(() => socket.write(Buffer.concat([CONNECT_OK, Buffer.from("injected")])), 50);
    });
    const socket = open(proxy.port);
    expect(() => socket.startTls({ expectedServerHostname: "mx.example.net" })).toThrow("not open");
    await socket.opened;
    expect(() => socket.startTls({ expectedServerHostname: "mx.example.net" })).toThrow(
      "8 bytes received through the tunnel before TLS started",
    );
  });

  it("fails implicit TLS when the target does not speak TLS", async () => {
    const proxy = await scriptedProxy((_d, socket, n) => {
      if (n === 0) socket.write(Buffer.from([5, 0]));
      if (n === 1) socket.write(CONNECT_OK);
      if (n === 2) socket.end("220 plaintext\r\n");
    });
    await expect(open(proxy.port, 2_000, "on").opened).rejects.toMatchObject({
      message: expect.stringContaining("TLS handshake with mx.example.net through SOCKS5 proxy failed"),
    });
  });

  it("lets the injected connect's synchronous errors through", () => {
    const connect = createSocks5Connect({
      hostname: "127.0.0.1",
      port: 1,
      connect: () => {
        throw new Error("no sockets left");
      },
    });
    expect(() =>
      connect({ hostname: "mx.example.net", port: 25 }, { secureTransport: "off", allowHalfOpen: false }),
    ).toThrow("no sockets left");
  });

  it("picks direct or SOCKS5 egress", async () => {
    const direct: ConnectSocket = () => {
      throw new Error("direct");
    };
    expect(createEgressConnect({ kind: "direct", connect: direct })).toBe(direct);
    const proxy = await scriptedProxy((_d, socket) => socket.write(Buffer.from([5, 0xff])));
    const viaProxy = createEgressConnect({
      kind: "socks5",
      hostname: "127.0.0.1",
      port: proxy.port,
      connect: createNodeConnect(),
    });
    const socket = viaProxy({ hostname: "mx.example.net", port: 25 }, { secureTransport: "off", allowHalfOpen: false });
    cleanups.push(() => void socket.close());
    await expect(socket.opened).rejects.toMatchObject({ code: "no-acceptable-method" });
  });
});
