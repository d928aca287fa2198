// worker/net/mx.ts against a local HTTP server on 127.0.0.1 that speaks the DoH JSON API
// (the protocol, served from fixtures): resolver URL, headers, timeouts, HTTP errors, IDN.

import { readFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resolveMx, toAsciiDomain } from "../../../worker/net/mx";

const ANSWERS = JSON.parse(
  readFileSync(new URL("../../fixtures/net/doh-answers.json", import.meta.url), "utf8"),
) as Record<string, unknown>;
const TYPES: Record<string, number> = { MX: 15, A: 1, AAAA: 28 };

interface Seen {
  path: string;
  name: string | null;
  type: string | null;
  accept: string | undefined;
  params: Record<string, string>;
}

let server: http.Server;
let base: string;
const seen: Seen[] = [];
const hung = new Set<http.ServerResponse>();
let aborted = 0;

/** Serves fixture answers; a few names misbehave on purpose. */
function handle(req: http.IncomingMessage, res: http.ServerResponse): void {
  const url = new URL(req.url ?? "/", "http://x");
  const name = url.searchParams.get("name");
  const type = url.searchParams.get("type");
  seen.push({
    path: url.pathname,
    name,
    type,
    accept: req.headers.accept,
    params: Object.fromEntries(url.searchParams),
  });
  if (name === "slow.example") {
    hung.add(res);
    res.on("close", () => {
      aborted += 1;
      hung.delete(res);
    });
    return;
  }
  if (name === "http500.example") return void res.writeHead(500).end("oops");
  if (name === "http404.example") return void res.writeHead(404).end();
  if (name === "notjson.example")
    return void res.writeHead(200, { "content-type": "application/dns-json" }).end("<html>");
  if (name === "huge.example") {
    res.writeHead(200, { "content-type": "application/dns-json" });
    res.end(JSON.stringify({ Status: 0, Comment: "x".repeat(300 * 1024) }));
    return;
  }
  const body = ANSWERS[`${name} ${type}`] ?? { Status: 3, Question: [{ name, type: TYPES[type ?? ""] ?? 0 }] };
  res.writeHead(200, { "content-type": "application/dns-json" }).end(JSON.stringify(body));
}

beforeAll(async () => {
  server = http.createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const res of hung) res.destroy();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe("resolveMx over a DoH JSON server", () => {
  it("queries the configured resolver URL with accept: application/dns-json and keeps its query string", async () => {
    seen.length = 0;
    const result = await resolveMx("several.example", {
      resolverUrl: `${base}/custom/resolve?ct=application/dns-json`,
    });
    expect(result).toMatchObject({
      kind: "hosts",
      hosts: [{ host: "mx1.several.example" }, { host: "mx2.several.example" }, { host: "backup.other.example" }],
    });
    expect(seen).toEqual([
      {
        path: "/custom/resolve",
        name: "several.example",
        type: "MX",
        accept: "application/dns-json",
        params: { ct: "application/dns-json", name: "several.example", type: "MX" },
      },
    ]);
  });

  it("runs the A and AAAA fallback queries in order", async () => {
    seen.length = 0;
    const result = await resolveMx("v6only.example", { resolverUrl: `${base}/dns-query` });
    expect(result).toMatchObject({ kind: "hosts", implicit: true, hosts: [{ host: "v6only.example", preference: 0 }] });
    expect(seen.map((s) => `${s.name} ${s.type}`)).toEqual([
      "v6only.example MX",
      "v6only.example A",
      "v6only.example AAAA",
    ]);
  });

  it("bounces NXDOMAIN and null MX from the server's answers", async () => {
    expect(await resolveMx("missing.example", { resolverUrl: `${base}/dns-query` })).toMatchObject({
      kind: "bounce",
      enhanced: "5.1.2",
    });
    expect(await resolveMx("nullmx.example", { resolverUrl: `${base}/dns-query` })).toMatchObject({
      kind: "bounce",
      enhanced: "5.1.10",
    });
  });

  it("maps a resolver that does not answer in time to a transient 4.4.3 and aborts the request", async () => {
    const before = aborted;
    const started = Date.now();
    const result = await resolveMx("slow.example", { resolverUrl: `${base}/dns-query`, timeoutMs: 100 });
    expect(result).toMatchObject({
      kind: "defer",
      code: 451,
      enhanced: "4.4.3",
      text: expect.stringContaining("timed out after 100 ms"),
    });
    expect(Date.now() - started).toBeLessThan(2_000);
    await expect.poll(() => aborted).toBeGreaterThan(before);
  });

  it.each([
    ["http500.example", "HTTP 500"],
    ["http404.example", "HTTP 404"],
    ["notjson.example", "not JSON"],
    ["huge.example", "larger than"],
  ])("maps %s to a transient 4.4.3 (%s)", async (domain, why) => {
    const result = await resolveMx(domain, { resolverUrl: `${base}/dns-query` });
    expect(result).toMatchObject({ kind: "defer", enhanced: "4.4.3", text: expect.stringContaining(why) });
  });

  it("maps a resolver that refuses connections to a transient 4.4.3", async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const result = await resolveMx("several.example", { resolverUrl: `http://127.0.0.1:${port}/dns-query` });
    expect(result).toMatchObject({
      kind: "defer",
      enhanced: "4.4.3",
      text: expect.stringContaining("resolver request failed"),
    });
  });

  it("uses the injected fetch, seed and clock", async () => {
    const urls: string[] = [];
    const result = await resolveMx("ties.example", {
      resolverUrl: `${base}/dns-query`,
      fetch: (input, init) => {
        urls.push(String(input));
        return fetch(input, init);
      },
      tieSeed: 3,
      now: () => 1_000,
    });
    expect(urls).toEqual([`${base}/dns-query?name=ties.example&type=MX`]);
    expect(result).toMatchObject({ kind: "hosts", expiresAtMs: 1_000 + 300_000 });
    const again = await resolveMx("ties.example", { resolverUrl: `${base}/dns-query`, tieSeed: 3 });
    expect(again.kind === "hosts" && again.hosts).toEqual(result.kind === "hosts" && result.hosts);
  });

  it("sends internationalised domains as punycode", async () => {
    seen.length = 0;
    const result = await resolveMx("Bücher.example", { resolverUrl: `${base}/dns-query` });
    expect(seen.map((s) => s.name)).toEqual(["xn--bcher-kva.example"]);
    expect(result).toMatchObject({ kind: "hosts", hosts: [{ host: "mx.xn--bcher-kva.example" }] });
  });
});

describe("toAsciiDomain", () => {
  it.each([
    ["Bücher.Example", "xn--bcher-kva.example"],
    ["bücher.example.", "xn--bcher-kva.example."],
    ["Example.COM", "example.com"],
    ["1.2.3", "1.2.3"],
    ["[IPv6:2001:DB8::1]", "[ipv6:2001:db8::1]"],
    ["bad ü space.example", null],
  ])("%j → %j", (input, want) => {
    expect(toAsciiDomain(input)).toBe(want);
  });
});
