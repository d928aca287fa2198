/**
 * A tiny DNS-over-HTTPS JSON resolver for the `delivery` test project (runs in Node, started by
 * sink-setup.ts on 127.0.0.1, port 0). It answers GET /dns-query?name=&type= from fixed
 * fixtures, so the `mx` transport kind can be driven through every lookup outcome:
 *
 *   mx-one.test     MX 10 localhost                        (the SMTP sink, on MX_PORT)
 *   mx-two.test     MX 10 127.0.0.2, MX 20 localhost       (nothing listens on 127.0.0.2)
 *   mx-greet.test   MX 10 127.0.0.3, MX 20 localhost       (127.0.0.3 greets with 554)
 *   loopback-mx.test  MX 10 127.0.0.1                      (test/e2e/postfix: Postfix on MX_PORT)
 *   null-mx.test    MX 0 "."                               (RFC 7505 null MX)
 *   nx.test         NXDOMAIN
 *   servfail.test   SERVFAIL
 *   hold.test, lapse.test   NXDOMAIN, but only after SLOW_MS: an entry to these stays leased
 *                   and unreported that long (what the lease tests need), then bounces (so it
 *                   does not come back and hold up the serial test queue again).
 *   dies.test       the same after LONG_SLOW_MS, for a test that must finish its steps before
 *                   that bounce lands, with the margin a busy machine needs.
 *   the MTA-STS test domains (sts-world.ts stsRecords), passed in as `extra`
 *   names of the mail world (bench/world/doh.ts, when the caller passes its answerer as `extra`):
 *                   each domain's MX on its own loopback address
 *   anything else   SERVFAIL
 *
 * Every query is counted by "name/type" (GET /queries lists the counts). GET /log/<name> returns
 * the text of a log the caller registered (the SOCKS5 bridge's, so tests can see it was used).
 * POST /records {name, type: "TXT" | "MX", data: [...]} publishes an answer for a test (a DKIM key
 * the test generated, a domain's MX hosts); TXT data are quoted as resolvers quote them.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

type Answer = {
  Status: number;
  Answer?: { name: string; type: number; TTL: number; data: string }[];
  Authority?: { name: string; type: number; TTL: number; data: string }[];
};

const MX = 15;
const SOA = 6;
const soa = (zone: string) => [
  { name: `${zone}.`, type: SOA, TTL: 60, data: `ns.${zone}. hostmaster.${zone}. 1 3600 600 86400 60` },
];
const mx = (name: string, records: [number, string][]): Answer => ({
  Status: 0,
  Answer: records.map(([pref, host]) => ({ name: `${name}.`, type: MX, TTL: 300, data: `${pref} ${host}` })),
});

/** How long the slow names take to answer, in ms (under the client's 5 s timeout). */
export const SLOW_MS = 1_500;
/** dies.test's delay, in ms: still under the client's 5 s timeout, so the answer is NXDOMAIN. */
export const LONG_SLOW_MS = 4_000;

const FIXTURES: Record<string, Answer | { slowMs: number }> = {
  "mx-one.test/MX": mx("mx-one.test", [[10, "localhost."]]),
  "mx-two.test/MX": mx("mx-two.test", [
    [10, "127.0.0.2."],
    [20, "localhost."],
  ]),
  "mx-greet.test/MX": mx("mx-greet.test", [
    [10, "127.0.0.3."],
    [20, "localhost."],
  ]),
  "loopback-mx.test/MX": mx("loopback-mx.test", [[10, "127.0.0.1."]]),
  "null-mx.test/MX": mx("null-mx.test", [[0, "."]]),
  "nx.test/MX": { Status: 3, Authority: soa("test") },
  "servfail.test/MX": { Status: 2 },
  "hold.test/MX": { slowMs: SLOW_MS },
  "lapse.test/MX": { slowMs: SLOW_MS },
  "dies.test/MX": { slowMs: LONG_SLOW_MS },
};

/** A running resolver. */
export interface DohServer {
  url: string;
  close(): Promise<void>;
}

/** Logs the server can show at GET /log/<name>. */
export type Logs = Record<string, () => string>;

const TXT = 16;

/** Takes a POST /records body and publishes it (see the header). */
function publish(req: IncomingMessage, res: ServerResponse, added: Map<string, Answer>): void {
  let body = "";
  req.on("data", (c: Buffer) => (body += c.toString("utf8")));
  req.on("end", () => {
    const r = JSON.parse(body) as { name: string; type: "TXT" | "MX"; data: string[] };
    const name = r.name.toLowerCase().replace(/\.$/, "");
    const type = r.type === "TXT" ? TXT : MX;
    // Long TXT texts are split into strings of at most 255 characters, as DNS carries them.
    const data = r.data.map((d) =>
      r.type === "TXT" ? (d.match(/.{1,255}/g) ?? [""]).map((x) => `"${x}"`).join(" ") : d,
    );
    added.set(`${name}/${r.type}`, {
      Status: 0,
      Answer: data.map((d) => ({ name: `${name}.`, type, TTL: 60, data: d })),
    });
    res.writeHead(204).end();
  });
}

/** Answers for names the fixtures do not hold (the mail world's), or undefined. */
export type ExtraAnswers = (name: string, type: string) => Answer | undefined;

function answer(
  req: IncomingMessage,
  res: ServerResponse,
  counts: Map<string, number>,
  timers: Set<NodeJS.Timeout>,
  logs: Logs,
  added: Map<string, Answer>,
  world?: ExtraAnswers,
): void {
  const url = new URL(req.url ?? "/", "http://127.0.0.1");
  if (req.method === "POST" && url.pathname === "/records") return publish(req, res, added);
  if (url.pathname === "/queries") {
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(Object.fromEntries(counts)));
    return;
  }
  const log = url.pathname.startsWith("/log/") ? logs[url.pathname.slice(5)] : undefined;
  if (log) return void res.writeHead(200, { "content-type": "text/plain" }).end(log());
  const key = `${(url.searchParams.get("name") ?? "").toLowerCase().replace(/\.$/, "")}/${url.searchParams.get("type") ?? ""}`;
  counts.set(key, (counts.get(key) ?? 0) + 1);
  const fixture = added.get(key) ??
    FIXTURES[key] ??
    world?.(url.searchParams.get("name") ?? "", url.searchParams.get("type") ?? "") ?? { Status: 2 };
  const reply = (body: Answer) =>
    res.writeHead(200, { "content-type": "application/dns-json" }).end(JSON.stringify(body));
  if (!("slowMs" in fixture)) return void reply(fixture);
  const timer = setTimeout(() => {
    timers.delete(timer);
    if (!res.destroyed) reply({ Status: 3, Authority: soa("test") });
  }, fixture.slowMs);
  timers.add(timer);
}

/**
 * Starts the resolver on 127.0.0.1, port 0; `extra` answers besides the fixtures (the MTA-STS
 * world's, sts-world.ts), `world` the names of a mail world (bench/world/doh.ts).
 */
export function startDohServer(
  logs: Logs = {},
  extra: Record<string, Answer> = {},
  world?: ExtraAnswers,
): Promise<DohServer> {
  const counts = new Map<string, number>();
  const timers = new Set<NodeJS.Timeout>();
  const added = new Map<string, Answer>(Object.entries(extra));
  const server = createServer((req, res) => answer(req, res, counts, timers, logs, added, world));
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}/dns-query`,
        close: () =>
          new Promise<void>((done) => {
            for (const t of timers) clearTimeout(t);
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}
