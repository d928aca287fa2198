/**
 * DNS for the mail world: DNS-over-HTTPS JSON answers (the Cloudflare/Google shape the relay's
 * resolver reads, worker/net/mx.ts) placing each domain's MX on its own loopback address.
 *
 * DESCRIPTION
 *   worldDnsAnswer(world, ttlSec?)  an answerer: (name, type) → the answer for a name of the
 *       world, or undefined for any other name. <domain> MX → "10 mx.<domain>."; mx.<domain> A →
 *       its address; any other type of a world name → NODATA (NOERROR, no answer, the zone's
 *       SOA); an unknown name under the world's suffix → NXDOMAIN. TTL 300 s by default.
 *   startWorldDoh(world, opts?)     an HTTP server on 127.0.0.1 (port 0) answering
 *       GET /dns-query?name=&type= with those answers; a name outside the world gets opts.extra's
 *       answer (a sender's domain verified through it), or NXDOMAIN.
 *       Returns { url, queries(), firstMx(), reset(), close() }: queries() counts the queries by
 *       type and by "name/type" since the last reset(); firstMx() says when each domain's MX was
 *       first asked for.
 *
 * INVARIANTS
 *   Answers are pure functions of the world; nothing is cached here.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { domainByName, type World } from "./world";

/** A DoH JSON answer. */
export interface DohAnswer {
  Status: number;
  Answer?: { name: string; type: number; TTL: number; data: string }[];
  Authority?: { name: string; type: number; TTL: number; data: string }[];
}

const TYPES: Record<string, number> = { A: 1, MX: 15, AAAA: 28, TXT: 16, SOA: 6 };

/** The answerer for a world's names (see the header). */
export function worldDnsAnswer(world: World, ttlSec = 300): (name: string, type: string) => DohAnswer | undefined {
  const suffix = world.config.suffix;
  const soa = [
    { name: `${suffix}.`, type: TYPES.SOA!, TTL: 60, data: `ns.${suffix}. hostmaster.${suffix}. 1 3600 600 86400 60` },
  ];
  return (rawName, rawType) => {
    const name = rawName.toLowerCase().replace(/\.$/, "");
    const type = rawType.toUpperCase();
    if (name !== suffix && !name.endsWith(`.${suffix}`)) return undefined;
    const host = name.startsWith("mx.") ? domainByName(world, name.slice(3)) : undefined;
    const domain = host ?? domainByName(world, name);
    if (!domain) return { Status: 3, Authority: soa };
    if (!host && type === "MX")
      return { Status: 0, Answer: [{ name: `${name}.`, type: TYPES.MX!, TTL: ttlSec, data: `10 ${domain.mxHost}.` }] };
    if (host && type === "A")
      return { Status: 0, Answer: [{ name: `${name}.`, type: TYPES.A!, TTL: ttlSec, data: host.address }] };
    return { Status: 0, Authority: soa };
  };
}

/** Query counts since the last reset. */
export interface DohQueries {
  total: number;
  byType: Record<string, number>;
  byName: Record<string, number>;
}

/** A running world resolver. */
export interface WorldDoh {
  url: string;
  queries(): DohQueries;
  /** When each domain's MX was first asked for since the last reset, epoch ms. */
  firstMx(): ReadonlyMap<string, number>;
  reset(): void;
  close(): Promise<void>;
}

/** Starts the world's resolver on 127.0.0.1 (see the header). */
export function startWorldDoh(
  world: World,
  opts: { ttlSec?: number; extra?: (name: string, type: string) => object } = {},
): Promise<WorldDoh> {
  const answer = worldDnsAnswer(world, opts.ttlSec);
  let q: DohQueries = { total: 0, byType: {}, byName: {} };
  let first = new Map<string, number>();
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const name = (url.searchParams.get("name") ?? "").toLowerCase().replace(/\.$/, "");
    const type = (url.searchParams.get("type") ?? "").toUpperCase();
    q.total++;
    q.byType[type] = (q.byType[type] ?? 0) + 1;
    q.byName[`${name}/${type}`] = (q.byName[`${name}/${type}`] ?? 0) + 1;
    if (type === "MX" && !first.has(name)) first.set(name, Date.now());
    const body = answer(name, type) ?? opts.extra?.(name, type) ?? { Status: 3 };
    res.writeHead(200, { "content-type": "application/dns-json" }).end(JSON.stringify(body));
  });
  server.keepAliveTimeout = 60_000;
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}/dns-query`,
        queries: () => ({ total: q.total, byType: { ...q.byType }, byName: { ...q.byName } }),
        firstMx: () => first,
        reset: () => {
          q = { total: 0, byType: {}, byName: {} };
          first = new Map();
        },
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}
