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
 *   publishRecords(zone, domain, records)  publish() on a zone of one's own.
 *   zoneAnswer(zone, name, type)  the DoH JSON answer a zone gives (NXDOMAIN when it has none).
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/** A running fixture. */
export interface DohZone {
  url: string;
  zone: Zone;
  publish(domain: string, records: readonly { name: string; type: string; value: string }[]): void;
  close(): Promise<void>;
}

/** A zone: TXT strings and MX hosts by name (lower case, no trailing dot). */
export type Zone = Map<string, { TXT?: string[]; MX?: string[] }>;

/** The DoH JSON answer of `zone` for a question (see the header). */
export function zoneAnswer(zone: Zone, rawName: string, rawType: string): object {
  const name = rawName.replace(/\.$/, "").toLowerCase();
  const type = rawType.toUpperCase() as "TXT" | "MX";
  const data = zone.get(name)?.[type];
  return data === undefined
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
}

/** Adds the records POST /domains asked for to `zone` (see the header). */
export function publishRecords(
  zone: Zone,
  domain: string,
  records: readonly { name: string; type: string; value: string }[],
): void {
  for (const r of records) {
    const name = `${r.name}.${domain}`.toLowerCase();
    const cur = zone.get(name) ?? {};
    const type = r.type as "TXT" | "MX";
    zone.set(name, { ...cur, [type]: [...(cur[type] ?? []), r.value] });
  }
}

/** See the header. */
export async function startDohZone(): Promise<DohZone> {
  const zone: Zone = new Map();
  const server = createServer((req, res) => {
    const u = new URL(req.url ?? "/", "http://x");
    const body = zoneAnswer(zone, u.searchParams.get("name") ?? "", u.searchParams.get("type") ?? "");
    res.writeHead(200, { "content-type": "application/dns-json" }).end(JSON.stringify(body));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/dns-query`,
    zone,
    publish: (domain, records) => publishRecords(zone, domain, records),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
