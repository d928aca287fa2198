/**
 * A DNS-over-HTTPS JSON fixture on 127.0.0.1 for tests and benchmarks that verify sending
 * domains under `wrangler dev` (DOH_RESOLVER_URL): it answers TXT and MX questions from an
 * in-memory zone, NXDOMAIN for everything else.
 *
 * DESCRIPTION
 *   startDohZone()       { url, zone, publish(domain, records), close }: `zone` maps a name
 *                        (lower case, no trailing dot) to its TXT strings and MX hosts;
 *                        publish() adds the records POST /domains asked for (their names are
 *                        relative to the domain, as Resend's are).
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/** A running fixture. */
export interface DohZone {
  url: string;
  zone: Map<string, { TXT?: string[]; MX?: string[] }>;
  publish(domain: string, records: readonly { name: string; type: string; value: string }[]): void;
  close(): Promise<void>;
}

/** See the header. */
export async function startDohZone(): Promise<DohZone> {
  const zone = new Map<string, { TXT?: string[]; MX?: string[] }>();
  const server = createServer((req, res) => {
    const u = new URL(req.url ?? "/", "http://x");
    const name = (u.searchParams.get("name") ?? "").replace(/\.$/, "").toLowerCase();
    const type = u.searchParams.get("type") as "TXT" | "MX";
    const data = zone.get(name)?.[type];
    const body =
      data === undefined
        ? { Status: 3 }
        : {
            Status: 0,
            Answer: data.map((d) => ({
              name: `${name}.`,
              type: type === "TXT" ? 16 : 15,
              TTL: 60,
              data: type === "TXT" ? `"${d}"` : `10 ${d}.`,
            })),
          };
    res.writeHead(200, { "content-type": "application/dns-json" }).end(JSON.stringify(body));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/dns-query`,
    zone,
    publish(domain, records) {
      for (const r of records) {
        const name = `${r.name}.${domain}`.toLowerCase();
        const cur = zone.get(name) ?? {};
        const type = r.type as "TXT" | "MX";
        zone.set(name, { ...cur, [type]: [...(cur[type] ?? []), r.value] });
      }
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
