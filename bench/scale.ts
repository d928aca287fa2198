/**
 * npm run bench:scale [-- --messages N] [--domains D] [--shards S] [--json]
 *
 * What each object class of the relay does per email, measured under a local load against a
 * transport run on several Transport DOs (TRANSPORT_SHARDS), and the model of docs/scale.md:
 * every class's requests/s and CPU ms/s per object at 1,000, 10,000 and 100,000 emails/s,
 * against Cloudflare's per-object ceiling.
 *
 * DESCRIPTION
 *   D SMTP sinks (smtp-server from npm), each on a loopback address of its own (127.0.0.2 …) and a
 *   port 0; a private wrangler dev (frozen bundle, meter on) with TRANSPORT_SHARDS = S and a
 *   transport `load` whose routes send d<k>.load.test to sink k (D destinations). N one-recipient
 *   messages, POST /emails 20 in flight, to the domains by a Zipf popularity (domain k takes a
 *   share ∝ 1/k: a few big, a long tail). While they go, the V8 profiler samples the Worker's
 *   thread (wrangler's inspector); afterwards the meter gives each class's requests per email
 *   and each object's (the hottest of each class), and bench/lib/cpu-by-class.ts splits the
 *   sampled CPU by class. The meter's own cost is in the profile (METER on): CPU per email is
 *   an upper bound.
 *   The model: a class's load per object at R emails/s is R × (per email) × the share of the
 *   mail its busiest object takes: Outbox, 1/OUTBOX_SHARDS (accepts spread over isolates);
 *   Transport DO, the hottest destination's share plus an even part of the rest over S shards;
 *   Destination DO, the hottest destination's share; a delivery agent, that share over the
 *   destination's agents (its window / 4 sessions, at Postfix's limit of 20 sessions: 5). An
 *   object's ceiling is the lower of about 1,000 requests/s and 1,000 ms of CPU per second
 *   (developers.cloudflare.com: durable-objects/platform/limits); objects needed = the larger
 *   of the two loads over that ceiling.
 *
 * OUTPUT
 *   Tables; with --json the last line is one JSON object {messages, domains, shards, seconds,
 *   emails_per_s, per_email, hottest, model}.
 */
import { readFile } from "node:fs/promises";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { parseArgs } from "node:util";
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import { devFetch, startDevServer, type DevServer } from "../scripts/lib/dev-server";
import { WRANGLER_ENV } from "../scripts/lib/keys";
import { cdp, type Profile } from "../scripts/lib/cdp";
import { cpuByClass } from "./lib/cpu-by-class";
import { commandLine } from "../scripts/lib/command-line";

const { values } = commandLine(import.meta.url, () =>
  parseArgs({
    options: {
      messages: { type: "string", default: "2000" },
      domains: { type: "string", default: "32" },
      shards: { type: "string", default: "4" },
      json: { type: "boolean", default: false },
    },
  }),
);
const N = Number(values.messages);
const D = Number(values.domains);
const S = Number(values.shards);
const OUTBOX_SHARDS = 8;
const AGENTS_PER_DESTINATION = 5;
const CEILING = { requests: 1000, cpu_ms: 1000 };
/** The profiler's sampling interval, µs. */
const SAMPLING_US = 500;
const RATES = [1_000, 10_000, 100_000];
const CLASSES = ["Outbox", "TransportQueue", "DestinationQueue", "DeliveryAgent"] as const;
const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Counts = Record<string, number>;

interface Sink {
  host: string;
  port: number;
  count: () => number;
  close: () => Promise<void>;
}

async function startSink(host: string): Promise<Sink> {
  let n = 0;
  const server = new SMTPServer({
    logger: false,
    disableReverseLookup: true,
    authOptional: true,
    disabledCommands: ["STARTTLS"],
    closeTimeout: 50,
    onData: (stream, _s, cb) => {
      stream.on("data", () => undefined);
      stream.on("end", () => {
        n++;
        cb();
      });
    },
  });
  server.on("error", () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.server.once("error", reject);
    server.listen(0, host, () => resolve());
  });
  return {
    host,
    port: (server.server.address() as AddressInfo).port,
    count: () => n,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

/** Domain k (0-based) of the Zipf popularity: share ∝ 1/(k+1). */
function zipf(d: number): { pick: (u: number) => number; top: number } {
  const w = Array.from({ length: d }, (_, k) => 1 / (k + 1));
  const sum = w.reduce((a, b) => a + b, 0);
  const cum: number[] = [];
  w.reduce((acc, x) => {
    cum.push((acc + x) / sum);
    return acc + x;
  }, 0);
  return { pick: (u) => cum.findIndex((c) => u <= c), top: w[0]! / sum };
}

async function api<T>(s: DevServer, method: string, path: string, body?: unknown): Promise<T> {
  const headers = { authorization: `Bearer ${s.key}`, "content-type": "application/json" };
  const res = await devFetch(`${s.url}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

async function sendAll(s: DevServer, n: number, domainOf: (i: number) => number, tag: string): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const to = [`${tag}${i}@d${domainOf(i)}.load.test`];
      await api(s, "POST", "/emails", {
        from: "Scale <scale@acme.example>",
        to,
        subject: `Scale ${i}`,
        text: `Scale ${i}.`,
      });
    }
  };
  await Promise.all(Array.from({ length: 20 }, worker));
}

const round = (n: number, d = 2) => Math.round(n * 10 ** d) / 10 ** d;

async function main(): Promise<number> {
  const sinks: Sink[] = [];
  let server: DevServer | null = null;
  try {
    for (let k = 0; k < D; k++) sinks.push(await startSink(`127.0.0.${k + 2}`));
    server = await startDevServer({
      tenant: "scale",
      role: "operator",
      frozen: true,
      meter: true,
      vars: { TRANSPORT_SHARDS: String(S), RELAY_TLS: "off", COHORT_ENV: "development", IN_FLOW_DELAY_MS: "0" },
    });
    const sql = [
      "INSERT INTO transports (name, nexthop) VALUES ('load', NULL)",
      ...sinks.map(
        (k, i) =>
          `INSERT INTO routes (tenant_id, pattern, transport, nexthop) VALUES (NULL, 'd${i}.load.test', 'load', '[${k.host}]:${k.port}')`,
      ),
    ].join("; ");
    const d1 = ["wrangler", "d1", "execute", "DB", "--local", "--persist-to", server.state, "--command", sql];
    await run("npx", d1, { env: WRANGLER_ENV, maxBuffer: 16 << 20 });
    const delivered = () => sinks.reduce((n, k) => n + k.count(), 0);
    await sleep(6000); // the accepting isolate reads routing at most every 5 s
    await sendAll(server, D, (i) => i, "warm");
    while (delivered() < D) await sleep(200);
    await sleep(3000);
    await api(server, "POST", "/relay/dev/meter/reset");
    const session = await cdp(server.inspector);
    await session.send("Profiler.enable");
    await session.send("Profiler.setSamplingInterval", { interval: SAMPLING_US });
    await session.send("Profiler.start");
    const { pick, top } = zipf(D);
    let seed = 7;
    const rand = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
    const domains = Array.from({ length: N }, () => pick(rand()));
    const t0 = Date.now();
    await sendAll(server, N, (i) => domains[i]!, "m");
    while (delivered() < D + N) await sleep(100);
    const seconds = (Date.now() - t0) / 1000;
    const { profile } = (await session.send("Profiler.stop")) as { profile: Profile };
    session.close();
    await sleep(3000);
    const m = await api<{ do_requests_by_class: Counts; do_requests_by_object: Counts; d1_statements: number }>(
      server,
      "GET",
      "/relay/dev/meter",
    );
    const cpu = cpuByClass(profile, await readFile(`${server.state}/bundle/index.js`, "utf8"), SAMPLING_US);
    const per = (c: Counts) => Object.fromEntries(Object.entries(c).map(([k, v]) => [k, round(v / N, 3)]));
    const hottest = Object.fromEntries(
      CLASSES.map((c) => {
        const objs = Object.entries(m.do_requests_by_object)
          .filter(([k]) => k.startsWith(`${c}/`))
          .sort((a, b) => b[1] - a[1]);
        return [
          c,
          {
            objects: objs.length,
            name: objs[0]?.[0] ?? null,
            share: round(
              (objs[0]?.[1] ?? 0) /
                Math.max(
                  1,
                  objs.reduce((a, [, v]) => a + v, 0),
                ),
              3,
            ),
          },
        ];
      }),
    );
    const perEmail = {
      requests: per(m.do_requests_by_class),
      cpu_ms: per(cpu),
      d1_statements: round(m.d1_statements / N, 3),
    };
    // The share of the mail a class's busiest object takes (see the header).
    const share: Record<string, number> = {
      Outbox: 1 / OUTBOX_SHARDS,
      TransportQueue: top + (1 - top) / S,
      DestinationQueue: top,
      DeliveryAgent: top / AGENTS_PER_DESTINATION,
    };
    const model = RATES.flatMap((rate) =>
      CLASSES.map((c) => {
        const req = rate * (perEmail.requests[c] ?? 0) * share[c]!;
        const cpuMs = rate * (perEmail.cpu_ms[c] ?? 0) * share[c]!;
        const load = round(Math.max(req / CEILING.requests, cpuMs / CEILING.cpu_ms), 2);
        return { rate, class: c, requests_per_s: round(req, 0), cpu_ms_per_s: round(cpuMs, 0), load };
      }),
    );
    const out = {
      messages: N,
      domains: D,
      shards: S,
      seconds: round(seconds, 1),
      emails_per_s: round(N / seconds, 1),
      top_domain_share: round(top, 3),
      per_email: perEmail,
      hottest,
      model,
      worker_cpu_ms_per_email: round((cpu.Worker ?? 0) / N, 3),
      shared_cpu_ms_per_email: round(((cpu.shared ?? 0) + (cpu.runtime ?? 0)) / N, 3),
    };
    console.log(
      `${N} messages to ${D} domains (top share ${round(top * 100, 1)} %), TRANSPORT_SHARDS ${S}:` +
        ` ${out.seconds} s, ${out.emails_per_s} emails/s locally`,
    );
    console.log(
      `per email: requests ${JSON.stringify(perEmail.requests)}; CPU ms ${JSON.stringify(perEmail.cpu_ms)}; D1 statements ${perEmail.d1_statements}`,
    );
    console.log(`busiest object of each class: ${JSON.stringify(hottest)}`);
    const row = (a: unknown, b: unknown, c: unknown, d: unknown, e: unknown) =>
      `${String(a).padStart(9)} ${String(b).padEnd(17)}${String(c).padStart(14)}${String(d).padStart(17)}${String(e).padStart(20)}`;
    console.log(row("emails/s", "class", "req/s/object", "CPU ms/s/object", "load (1 = ceiling)"));
    for (const r of model) console.log(row(r.rate, r.class, r.requests_per_s, r.cpu_ms_per_s, r.load));
    if (values.json) console.log(JSON.stringify(out));
    return 0;
  } finally {
    await server?.stop();
    for (const k of sinks) await k.close();
  }
}

main().then(
  (c) => {
    process.exitCode = c;
  },
  (e: unknown) => {
    console.error(e instanceof Error ? (e.stack ?? e.message) : String(e));
    process.exitCode = 1;
  },
);
