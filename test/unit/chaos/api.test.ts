import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { lostConnections, request } from "../../chaos/lib/api";

let server: Server | undefined;
afterEach(async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

/** A server that destroys the connection of the first `drop` requests before answering. */
async function flaky(drop: number): Promise<{ url: string; seen: () => number }> {
  let seen = 0;
  server = createServer((req, res) => {
    seen++;
    req.resume();
    req.on("end", () => (seen <= drop ? req.socket.destroy() : res.end(JSON.stringify({ id: "e1" }))));
  });
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", () => r()));
  return { url: `http://127.0.0.1:${(server!.address() as AddressInfo).port}`, seen: () => seen };
}

describe("the chaos API client", () => {
  it("sends a POST again under its Idempotency-Key when the connection closes before an answer", async () => {
    lostConnections.count = 0;
    lostConnections.causes.clear();
    const s = await flaky(1);
    const a = await request({ url: s.url, key: "k" }, "POST", "/emails", "{}", { "idempotency-key": "x" }, 5000, true);
    expect(a.status).toBe(200);
    expect(s.seen()).toBe(2);
    expect(lostConnections.count).toBe(1);
    expect([...lostConnections.causes][0]).toMatch(/^fetch failed \((UND_ERR_SOCKET|ECONNRESET)/);
  });

  it("gives up after two resends, and never resends without being asked to", async () => {
    const s = await flaky(10);
    const a = await request({ url: s.url, key: "k" }, "POST", "/emails", "{}", { "idempotency-key": "x" }, 5000, true);
    expect(a.status).toBe(0);
    expect(String(a.body)).toMatch(/^fetch failed \(/);
    expect(s.seen()).toBe(3);
    const b = await request({ url: s.url, key: "k" }, "POST", "/emails", "{}", {}, 5000);
    expect(b.status).toBe(0);
    expect(s.seen()).toBe(4);
  });

  it("does not send again to a server that refuses the connection", async () => {
    const s = await flaky(0);
    const url = s.url;
    await new Promise<void>((r) => server!.close(() => r()));
    server = undefined;
    const before = lostConnections.count;
    const a = await request({ url, key: "k" }, "POST", "/emails", "{}", { "idempotency-key": "x" }, 5000, true);
    expect(a.status).toBe(0);
    expect(String(a.body)).toContain("ECONNREFUSED");
    expect(lostConnections.count).toBe(before);
  });
});
