/*
 * npm run bench:backlog [-- --messages N] [--warmup M] [--backlog B] [--rcpts R] [--load-workers W]
 *                        [--var NAME=value …] [--profile FILE] [--meter] [--json]
 *
 * Delivery rate to a live destination with an empty queue, behind a large backlog waiting in the
 * same transport, and while another client submits as fast as it can: three phases in one run on
 * one private `wrangler dev`, compared as ratios (the machine is shared and noisy).
 *
 * What it does
 *   Starts a catcher (scripts/lib/smtp-catcher.ts) as the live sink and a private wrangler dev
 *   (frozen bundle, fresh state) with SMARTHOST = the sink, RELAY_TLS off. In D1 a route sends
 *   `@stuck.test` to transport `smtp` with nexthop [127.0.0.1]:<a port nobody listens on>, and that
 *   destination is suspended through POST /relay/suspensions (target destination, 1 day), so its
 *   recipients wait in the same Transport DO as the live destination (`@ok.test`, the default
 *   route to SMARTHOST). After a warm-up of M messages (default N), not compared, measured as
 *   in 1:
 *   1. empty: N one-recipient messages to @ok.test (POST /emails/batch, 100 per request, 2
 *      requests at a time); the clock runs from the first POST until the sink has all N.
 *   2. backlog: B recipients to @stuck.test (R per message, 100 messages per request, 4 requests
 *      at a time); waits until D1's recipient index holds all B at the stuck destination (GET
 *      /relay/queue counts), then measures N to @ok.test as in 1.
 *   3. while accepting: W concurrent POST /emails loops (default 64; one recipient each, to
 *      @stuck.test) run while N more to @ok.test are measured as in 1; they stop when the sink has
 *      all N. The loops send as fast as the relay answers, so they hold its accept ceiling (the
 *      accept gate's slots, worker/api/http/accept-gate.ts; a 429 makes a loop wait its Retry-After).
 *      They run in a child process (bench/lib/post-loops.ts), so that their HTTP client does
 *      not share an event loop with the sink, and as another tenant, as a flood from one sender
 *      would. This phase runs on top of phase 2's backlog, so under_load_ratio (against the empty
 *      queue) holds both effects; while_accepting_vs_backlog separates the load's own.
 *   N is 5,000 by default, so that each phase lasts long enough to mean something: about 8 s
 *   idle and 20–30 s under the flood here. With 1,000 (the default before 2026-11-28) a phase
 *   took 1.5–3 s. The flood then ran for about 3 s, shorter than the 15 s after which its Outboxes
 *   index what they still hold (INDEX_LAG_SECONDS), so most of what it costs fell outside the
 *   measurement. The empty phase was still warming up, too. Three runs at 1,000 put
 *   under_load_ratio at 0.662, 0.766 and 0.663 and backlog_ratio at 1.104, 1.383 and 1.258;
 *   three at 5,000, on the same code, at 0.213, 0.33 and 0.35 and at 0.747, 0.83 and 0.9.
 *   The warm-up is as long as a phase so that all three start in the same state: the destination
 *   window open (it grows from 5 with each success) and the agents running. After the 20
 *   messages it had before 2026-11-28, the empty phase alone started with a small window, so its
 *   accepting ran ahead of delivery and built a queue that fed the agents in full batches, which
 *   later phases never had: a control run with no backlog and no flood (--backlog 0
 *   --load-workers 0, process_limit 800 for that trial) gave 0.83 and 0.78 for two identical
 *   phases. With the longer warm-up the control gave 1.02 and 0.93 (process_limit 200).
 *   Per message it also records the time from the POST of its batch to its arrival at the sink
 *   (accept + classify + admit + dispatch + SMTP), mean/p50/p99 per phase, and after each phase the
 *   Transport DO's own figures from GET /relay/queue (in_flight_ms): the time from dispatch to
 *   report of its last ≤ 1,024 entries, and the most entries in flight at once beside
 *   process_limit.
 *   --profile FILE writes a CPU profile of the Worker's thread during phase 3 (.cpuprofile, for
 *   Chrome DevTools); profiling slows the Worker, so that run's rates are not comparable.
 *   --meter runs with METER on and prints each phase's DO requests per delivered message, by
 *   method (the phase's own: the meter is reset at its first POST and read at its last arrival);
 *   with --json also do_requests_per_message per phase. More, smaller requests per message are
 *   what delivery fed in trickles looks like.
 *   --var overrides a wrangler.toml [vars] value for the whole run (e.g.
 *   TRANSPORT_CHECKPOINT_EVERY=100000, to see whether a cost that grows with the backlog goes away).
 *   Prints tables; with --json the last line is
 *   {"backlog_rcpts":B,"delivery_per_s_empty":…,"delivery_per_s_backlog":…,
 *    "delivery_per_s_while_accepting":…,"backlog_ratio":…,"under_load_ratio":…, …extra keys,
 *    among them process_limit and dispatch_to_report_ms per phase}.
 *
 * Assumptions
 *   Nothing but loopback; everything started is stopped, also on failure or Ctrl-C.
 *   On a shared 2-CPU machine the default backlog of 100,000 recipients is accepted in about
 *   25 s and indexed after about 42 s, and the whole default run takes about 3.5 minutes.
 */

import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { parseArgs, promisify } from "node:util";
import { schedulerConfigOf } from "../worker/settings/scheduler";
import type { InFlightTimes } from "../worker/model/transport";
import { pool } from "../worker/lib/pool";
import { devFetch, freePort, startDevServer, type DevServer } from "../scripts/lib/dev-server";
import { createKey, WRANGLER_ENV } from "../scripts/lib/keys";
import { cdp, type Profile } from "../scripts/lib/cdp";
import { startCatcher, type Catcher } from "../scripts/lib/smtp-catcher";
import { startPostLoops, type PostLoopResult } from "./lib/post-loops";
import { commandLine } from "../scripts/lib/command-line";

const run = promisify(execFile);

/** Starts the V8 sampling profiler of the Worker's thread (--profile: phase 3 only). */
async function startProfile(inspector: number): Promise<{ stop: () => Promise<Profile> }> {
  const session = await cdp(inspector);
  await session.send("Profiler.enable");
  await session.send("Profiler.setSamplingInterval", { interval: 500 });
  await session.send("Profiler.start");
  return {
    stop: async () => {
      const { profile } = (await session.send("Profiler.stop")) as { profile: Profile };
      session.close();
      return profile;
    },
  };
}

/** How long the sink may get nothing before a phase is declared stalled, ms. */
const STALL_MS = 90_000;
/** How long building the backlog (submission + classification) may take at most, ms. */
const ADMIT_LIMIT_MS = 15 * 60_000;
const TENANT = "bench-backlog";
/** Phase 3's load comes from another tenant, as a flood from one sender would. */
const LOAD_TENANT = "bench-backlog-load";

interface Cli {
  messages: number;
  warmup: number;
  meter: boolean;
  backlog: number;
  rcpts: number;
  loadWorkers: number;
  vars: Record<string, string>;
  json: boolean;
  profile: string | null;
}

interface Phase {
  name: string;
  messages: number;
  /** First POST until the API accepted all N, ms. */
  acceptMs: number;
  /** First POST until the sink has all N, ms. */
  elapsedMs: number;
  perS: number;
  /** POST of its batch → arrival at the sink, ms, per message. */
  latency: { mean: number; p50: number; p99: number; max: number };
  /** The Transport DO's dispatch→report times of its last (≤ 1,024) reports at the phase's end, and its peak in flight (GET /relay/queue). */
  inFlight: InFlightTimes | null;
  /** --meter: the DO requests of the phase (first POST → last arrival), by class.method. */
  doRequests: { total: number; byMethod: Record<string, number> } | null;
}

/** The relay, its operator key, the stuck destination, the key of the load tenant (phase 3), and whether the meter counts (--meter). */
interface Relay {
  dev: DevServer;
  operator: string;
  stuck: string;
  loadKey: string;
  meter: boolean;
}

function parseCli(): Cli {
  const { values } = commandLine(import.meta.url, () =>
    parseArgs({
      options: {
        messages: { type: "string", default: "5000" },
        warmup: { type: "string" },
        backlog: { type: "string", default: "100000" },
        rcpts: { type: "string", default: "10" },
        "load-workers": { type: "string", default: "64" },
        json: { type: "boolean", default: false },
        profile: { type: "string" },
        meter: { type: "boolean", default: false },
        var: { type: "string", multiple: true, default: [] },
      },
    }),
  );
  const vars: Record<string, string> = {};
  for (const kv of values.var) {
    const eq = kv.indexOf("=");
    if (eq < 1) throw new Error(`--var needs NAME=value, got ${kv}`);
    vars[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  const int = (name: string, v: string, min: number) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} needs an integer >= ${min}`);
    return n;
  };
  return {
    messages: int("messages", values.messages, 1),
    warmup: int("warmup", values.warmup ?? values.messages, 1),
    meter: values.meter,
    backlog: int("backlog", values.backlog, 0),
    rcpts: int("rcpts", values.rcpts, 1),
    loadWorkers: int("load-workers", values["load-workers"], 0),
    vars,
    json: values.json,
    profile: values.profile ?? null,
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (line: string) => console.error(line);

function pct(sorted: number[], p: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function api(
  relay: { url: string },
  key: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<unknown> {
  const res = await devFetch(`${relay.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as unknown;
}

async function d1(state: string, sql: string): Promise<void> {
  await run("npx", ["wrangler", "d1", "execute", "DB", "--local", "--persist-to", state, "--command", sql], {
    env: WRANGLER_ENV,
    maxBuffer: 16 << 20,
  });
}

/** Starts the relay with the stuck route and its suspension (see the header). */
async function startRelay(sink: Catcher, extra: Record<string, string>, meter: boolean): Promise<Relay> {
  const stuckPort = await freePort();
  const stuck = `[127.0.0.1]:${stuckPort}`;
  const dev = await startDevServer({
    tenant: TENANT,
    frozen: true,
    meter,
    vars: { SMARTHOST: `[127.0.0.1]:${sink.smtpPort}`, RELAY_TLS: "off", MAX_RECIPIENTS: "100", ...extra },
  });
  try {
    await d1(
      dev.state,
      `INSERT OR IGNORE INTO transports (name, nexthop) VALUES ('smtp', NULL); INSERT INTO ` +
        `routes (tenant_id, pattern, transport, nexthop) VALUES (NULL, 'stuck.test', ` +
        `'smtp', '${stuck}');`,
    );
    const operator = await createKey({
      tenant: TENANT,
      name: "bench-operator",
      persistTo: dev.state,
      role: "operator",
    });
    await api(dev, operator, "POST", "/relay/suspensions", {
      target: "destination",
      transport: "smtp",
      name: stuck,
      ttl_seconds: 86_400,
    });
    const loadKey = await createKey({ tenant: LOAD_TENANT, name: "bench-load", persistTo: dev.state });
    return { dev, operator, stuck, loadKey, meter };
  } catch (e) {
    await dev.stop();
    throw e;
  }
}

function message(to: string[], subject: string): Record<string, unknown> {
  return {
    from: "Bench <bench@cohort.test>",
    to,
    subject,
    text: `${subject}\nThe quick brown fox jumps over the lazy dog.\n`,
  };
}

/**
 * Submits N one-recipient messages to @ok.test and waits until the sink has them all; the rate is
 * N over first POST → last arrival.
 */
async function measureDelivery(relay: Relay, sink: Catcher, name: string, n: number, tag: string): Promise<Phase> {
  const sentAt = new Map<string, number>();
  const arrivals: number[] = [];
  let lastAt = 0;
  let seen = sink.messages.length;
  const scan = () => {
    for (; seen < sink.messages.length; seen++) {
      const m = sink.messages[seen]!;
      for (const r of m.rcptTo) {
        const t0 = sentAt.get(r);
        if (t0 !== undefined) {
          arrivals.push(m.receivedAt - t0);
          sentAt.delete(r);
          lastAt = Math.max(lastAt, m.receivedAt);
        }
      }
    }
  };
  const chunks: string[][] = [];
  for (let i = 0; i < n; i += 100)
    chunks.push(Array.from({ length: Math.min(100, n - i) }, (_, j) => `m${i + j}-${tag}@ok.test`));
  if (relay.meter) await api(relay.dev, relay.operator, "POST", "/relay/dev/meter/reset", {});
  const started = Date.now();
  const perf0 = performance.now();
  let acceptMs = NaN;
  const submitted = pool(
    chunks.map((c) => async () => {
      const t0 = Date.now();
      for (const r of c) sentAt.set(r, t0);
      await api(
        relay.dev,
        relay.dev.key,
        "POST",
        "/emails/batch",
        c.map((r) => message([r], `${name} ${r}`)),
      );
    }),
    2,
  ).then(() => {
    acceptMs = performance.now() - perf0;
  });
  let failed: unknown = null;
  submitted.catch((e: unknown) => {
    failed = e;
  });
  let last = 0;
  let movedAt = Date.now();
  while (arrivals.length < n) {
    if (failed) throw failed;
    await sleep(50);
    scan();
    if (arrivals.length !== last) [last, movedAt] = [arrivals.length, Date.now()];
    else if (Date.now() - movedAt > STALL_MS)
      throw new Error(
        `${name}: stalled, the sink has ${arrivals.length} of ${n} and got none for ${STALL_MS / 1000} s`,
      );
  }
  // The last arrival's own timestamp, not the poll's.
  const elapsedMs = Math.max(1, lastAt - started);
  const meter = relay.meter
    ? ((await api(relay.dev, relay.operator, "GET", "/relay/dev/meter")) as {
        do_requests: number;
        do_requests_by_method: Record<string, number>;
      })
    : null;
  await submitted;
  const sorted = [...arrivals].sort((a, b) => a - b);
  const inFlight = (await queueView(relay)).transports.find((t) => t.transport === "smtp")?.in_flight_ms ?? null;
  return {
    name,
    messages: n,
    acceptMs,
    elapsedMs,
    perS: (n * 1000) / elapsedMs,
    latency: {
      mean: sorted.reduce((a, b) => a + b, 0) / sorted.length,
      p50: pct(sorted, 50),
      p99: pct(sorted, 99),
      max: sorted[sorted.length - 1]!,
    },
    inFlight,
    doRequests: meter ? { total: meter.do_requests, byMethod: meter.do_requests_by_method } : null,
  };
}

interface QueueView {
  transports: {
    transport: string;
    inflight: number;
    in_core: number;
    deferred: number;
    destinations: number;
    in_flight_ms: InFlightTimes | null;
  }[];
  counts: {
    by_state: Record<string, number>;
    by_destination: {
      transport: string | null;
      destination: string | null;
      total: number;
      states: Record<string, number>;
    }[];
    total: number;
  };
}

async function queueView(relay: Relay): Promise<QueueView> {
  return (await api(relay.dev, relay.operator, "GET", "/relay/queue")) as QueueView;
}

/** Recipients D1's index holds at the stuck destination, by state. */
function stuckStates(q: QueueView, stuck: string): { total: number; states: Record<string, number> } {
  const d = q.counts.by_destination.find((x) => x.destination === stuck);
  return { total: d?.total ?? 0, states: d?.states ?? {} };
}

interface BacklogBuild {
  submitMs: number;
  admitMs: number;
  admitted: number;
  states: Record<string, number>;
  inCore: number;
  deferred: number;
}

/** Submits B recipients to @stuck.test and waits until D1 holds them all (see the header). */
async function buildBacklog(relay: Relay, b: number, rcpts: number): Promise<BacklogBuild> {
  const messages: string[][] = [];
  for (let i = 0; i < b; i += rcpts)
    messages.push(Array.from({ length: Math.min(rcpts, b - i) }, (_, j) => `s${i + j}@stuck.test`));
  const batches: string[][][] = [];
  for (let i = 0; i < messages.length; i += 100) batches.push(messages.slice(i, i + 100));
  const t0 = Date.now();
  let done = 0;
  let lastLog = t0;
  await pool(
    batches.map((batch, k) => async () => {
      await api(
        relay.dev,
        relay.dev.key,
        "POST",
        "/emails/batch",
        batch.map((to) => message(to, `backlog ${k}`)),
      );
      done += batch.reduce((a, m) => a + m.length, 0);
      if (Date.now() - lastLog > 10_000) {
        lastLog = Date.now();
        log(`  backlog: ${done} of ${b} recipients accepted after ${((lastLog - t0) / 1000).toFixed(0)} s`);
      }
    }),
    4,
  );
  const submitMs = Date.now() - t0;
  log(
    `  backlog: all ${b} recipients accepted after ${(submitMs / 1000).toFixed(1)} ` +
      `s (${((b * 1000) / submitMs).toFixed(0)} rcpts/s); waiting for classification`,
  );
  let q = await queueView(relay);
  let s = stuckStates(q, relay.stuck);
  let lastTotal = -1;
  let movedAt = Date.now();
  while (s.total < b && Date.now() - t0 < ADMIT_LIMIT_MS) {
    if (s.total !== lastTotal) [lastTotal, movedAt] = [s.total, Date.now()];
    else if (Date.now() - movedAt > STALL_MS) break;
    if (Date.now() - lastLog > 10_000) {
      lastLog = Date.now();
      log(
        `  backlog: ${s.total} of ${b} recipients in the index after ${((lastLog - t0) / 1000).toFixed(0)} s ${JSON.stringify(s.states)}`,
      );
    }
    await sleep(2000);
    q = await queueView(relay);
    s = stuckStates(q, relay.stuck);
  }
  const smtp = q.transports.find((t) => t.transport === "smtp");
  return {
    submitMs,
    admitMs: Date.now() - t0,
    admitted: s.total,
    states: s.states,
    inCore: smtp?.in_core ?? 0,
    deferred: smtp?.deferred ?? 0,
  };
}

function fmt(x: number, d = 1): string {
  return Number.isFinite(x) ? x.toFixed(d) : "n/a";
}

async function main(): Promise<void> {
  const cli = parseCli();
  const sink = await startCatcher();
  let relay: Relay | null = null;
  const stopAll = async () => {
    await relay?.dev.stop();
    await sink.close();
  };
  const onSignal = () => {
    void stopAll().finally(() => process.exit(130));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    log(`bench:backlog: starting wrangler dev (sink 127.0.0.1:${sink.smtpPort})`);
    relay = await startRelay(sink, cli.vars, cli.meter);
    const runTag = Date.now().toString(36);
    const warm = await measureDelivery(relay, sink, "warm-up", cli.warmup, `${runTag}w`);
    log(
      `  warm-up: ${cli.warmup} messages, ${fmt(warm.perS)} deliveries/s (not compared); stuck destination ${relay.stuck} suspended`,
    );
    const empty = await measureDelivery(relay, sink, "empty", cli.messages, `${runTag}e`);
    log(`  empty: ${fmt(empty.perS)} deliveries/s`);
    const build = await buildBacklog(relay, cli.backlog, cli.rcpts);
    log(
      `  backlog: ${build.admitted} of ${cli.backlog} in the index ` +
        `after ${(build.admitMs / 1000).toFixed(1)} s ${JSON.stringify(build.states)}; Transport ` +
        `DO in core ${build.inCore}`,
    );
    const backlog = await measureDelivery(relay, sink, "backlog", cli.messages, `${runTag}b`);
    log(`  backlog: ${fmt(backlog.perS)} deliveries/s`);
    const profiler = cli.profile === null ? null : await startProfile(relay.dev.inspector);
    const loops =
      cli.loadWorkers === 0
        ? null
        : await startPostLoops({
            url: relay.dev.url,
            key: relay.loadKey,
            workers: cli.loadWorkers,
            domain: "stuck.test",
            tag: runTag,
          });
    let loaded: Phase;
    let load: PostLoopResult = { accepted: 0, refused: 0, failed: 0, ms: 1 };
    try {
      loaded = await measureDelivery(relay, sink, "while accepting", cli.messages, `${runTag}l`);
    } finally {
      if (loops) load = await loops.stop();
    }
    if (profiler && cli.profile !== null) await writeFile(cli.profile, JSON.stringify(await profiler.stop()));
    const after = await queueView(relay);
    const stuckAfter = stuckStates(after, relay.stuck);
    const smtpAfter = after.transports.find((t) => t.transport === "smtp");

    // The smtp transport's process_limit as the relay configures it (SMARTHOST set, any SCHEDULER_CONFIG of --var).
    const processLimit = schedulerConfigOf({
      SCHEDULER_CONFIG: cli.vars.SCHEDULER_CONFIG ?? "",
      DELIVERY: cli.vars.DELIVERY ?? "agents",
      SMARTHOST: `[127.0.0.1]:${sink.smtpPort}`,
    }).transports.smtp!.processLimit;
    const backlogRatio = backlog.perS / empty.perS;
    const loadRatio = loaded.perS / empty.perS;
    console.log(
      `bench:backlog: ${cli.messages} one-recipient messages to a live sink (catcher on ` +
        `127.0.0.1:${sink.smtpPort}), one wrangler dev, transport smtp (relay kind), ` +
        `process_limit ${processLimit}${Object.keys(cli.vars).length > 0 ? `, --var ${JSON.stringify(cli.vars)}` : ""}`,
    );
    console.log(
      `  backlog: ${cli.backlog} recipients (${cli.rcpts} per message) to ${relay.stuck}, ` +
        `suspended; accepted in ${fmt(build.submitMs / 1000)} ` +
        `s (${fmt((cli.backlog * 1000) / Math.max(1, build.submitMs), 0)} ` +
        `rcpts/s), ${build.admitted} in the index after ${fmt(build.admitMs / 1000)} ` +
        `s ${JSON.stringify(build.states)}; Transport DO: ${build.inCore} in ` +
        `core, ${build.deferred} deferred`,
    );
    console.log(
      `  ${"phase".padEnd(18)} ${"messages".padStart(8)} ${"accept s".padStart(9)} ` +
        `${"deliver s".padStart(10)} ${"deliveries/s".padStart(13)} ${"ratio".padStart(6)}   ` +
        `POST→sink ms: ${"mean".padStart(7)} ${"p50".padStart(7)} ${"p99".padStart(7)} ${"max".padStart(7)}`,
    );
    for (const p of [empty, backlog, loaded]) {
      console.log(
        `  ${p.name.padEnd(18)} ${String(p.messages).padStart(8)} ` +
          `${fmt(p.acceptMs / 1000).padStart(9)} ${fmt(p.elapsedMs / 1000).padStart(10)} ` +
          `${fmt(p.perS).padStart(13)} ${fmt(p.perS / empty.perS, 2).padStart(6)}                 ` +
          `${fmt(p.latency.mean, 0).padStart(7)} ${fmt(p.latency.p50, 0).padStart(7)} ` +
          `${fmt(p.latency.p99, 0).padStart(7)} ${fmt(p.latency.max, 0).padStart(7)}`,
      );
    }
    console.log(
      `  dispatch→report in the Transport DO (its last ≤ 1,024 reports at each phase's end), ` +
        `ms, and the most entries in flight at once (process_limit ${processLimit}):`,
    );
    for (const p of [empty, backlog, loaded]) {
      const f = p.inFlight;
      console.log(
        `  ${p.name.padEnd(18)} ${f ? `mean ${f.mean_ms}  p50 ${f.p50_ms}  p99 ${f.p99_ms}  max ${f.max_ms}  peak in flight ${f.peak_in_flight}` : "n/a"}`,
      );
    }
    if (cli.meter) {
      console.log(
        "  DO requests per delivered message (--meter; the phase's own, first POST → last arrival), and by method:",
      );
      for (const p of [empty, backlog, loaded]) {
        const d = p.doRequests;
        if (d)
          console.log(
            `  ${p.name.padEnd(18)} ${fmt(d.total / p.messages, 2)}  ${Object.entries(d.byMethod)
              .sort((a, b) => b[1] - a[1])
              .map(([m, v]) => `${m} ${v}`)
              .join(", ")}`,
          );
      }
    }
    console.log(
      `  while accepting / backlog: ${fmt(loaded.perS / backlog.perS, 2)} (phase 3 runs on top of the backlog)`,
    );
    console.log(
      `  load during phase 3: ${cli.loadWorkers} POST /emails loops to ` +
        `@stuck.test, ${load.accepted} ` +
        `accepted (${fmt((load.accepted * 1000) / Math.max(1, load.ms))}/s), ${load.refused} ` +
        `refused (429), ${load.failed} failed`,
    );
    console.log(
      `  after: stuck destination ${stuckAfter.total} in the ` +
        `index ${JSON.stringify(stuckAfter.states)}; Transport DO ` +
        `smtp: ${smtpAfter?.in_core ?? "?"} in core, ${smtpAfter?.inflight ?? "?"} in flight`,
    );
    console.log(
      "  POST→sink is measured from outside: accept + classify + admit + dispatch + SMTP; shared CPU, compare within one run only",
    );
    if (cli.json) {
      console.log(
        JSON.stringify({
          backlog_rcpts: build.admitted,
          delivery_per_s_empty: Number(empty.perS.toFixed(1)),
          delivery_per_s_backlog: Number(backlog.perS.toFixed(1)),
          delivery_per_s_while_accepting: Number(loaded.perS.toFixed(1)),
          backlog_ratio: Number(backlogRatio.toFixed(3)),
          under_load_ratio: Number(loadRatio.toFixed(3)),
          process_limit: processLimit,
          while_accepting_vs_backlog: Number((loaded.perS / backlog.perS).toFixed(3)),
          messages: cli.messages,
          backlog_requested: cli.backlog,
          backlog_submit_rcpts_per_s: Number(((cli.backlog * 1000) / Math.max(1, build.submitMs)).toFixed(1)),
          backlog_admit_s: Number((build.admitMs / 1000).toFixed(1)),
          load_accept_per_s: Number(((load.accepted * 1000) / Math.max(1, load.ms)).toFixed(1)),
          load_refused: load.refused,
          ...(Object.keys(cli.vars).length > 0 ? { vars: cli.vars } : {}),
          post_to_sink_ms: Object.fromEntries(
            [empty, backlog, loaded].map((p) => [
              p.name.replace(/ /g, "_"),
              { mean: Math.round(p.latency.mean), p50: p.latency.p50, p99: p.latency.p99 },
            ]),
          ),
          ...(cli.meter
            ? {
                do_requests_per_message: Object.fromEntries(
                  [empty, backlog, loaded].map((p) => [
                    p.name.replace(/ /g, "_"),
                    Number(((p.doRequests?.total ?? NaN) / p.messages).toFixed(3)),
                  ]),
                ),
              }
            : {}),
          dispatch_to_report_ms: Object.fromEntries(
            [empty, backlog, loaded].map((p) => [p.name.replace(/ /g, "_"), p.inFlight]),
          ),
        }),
      );
    }
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await stopAll();
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exitCode = 1;
});
