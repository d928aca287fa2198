/*
 * npm run bench:sessions [-- --messages N] [--max-sessions S] [--sessions P] [--rcpts R]
 *                          [--rcpt-delay-ms D] [--rcpt-jitter-ms J] [--timeline] [--json]
 *
 * How many SMTP sessions the relay keeps open to one destination, measured by the server, and
 * how many it opens beyond what the server admits; Postfix against the same server in the same
 * run as the baseline, when Postfix is installed here.
 *
 * What it does
 *   Starts a session meter (bench/lib/session-meter.ts): an SMTP sink on 127.0.0.1 that admits
 *   S sessions at once (default 5) and answers 421 at the greeting beyond that, and integrates the
 *   number of sessions open over time, from the first connection to the last message. With
 *   --rcpt-delay-ms D (and --rcpt-jitter-ms J) it waits D ± J ms before each RCPT reply, a
 *   server that paces its clients; with --rcpts R each message has R recipients (one
 *   transaction each). The meter also measures the idle gap of each reused session: from the
 *   reply to one message's final dot to the next MAIL FROM on the same connection, the time a
 *   client holds the server's session between two transactions.
 *   1. the relay: a private wrangler dev (frozen bundle) with SMARTHOST = the meter, RELAY_TLS off;
 *      a 20-message warm-up, then N one-recipient messages (POST /emails/batch, 100 per request,
 *      2 at a time) until the meter has all N.
 *   2. Postfix (when /usr/sbin/postfix exists and this runs as root): a private Postfix relaying
 *      to the meter (test/e2e/postfix/harness.ts) fed by smtp-source (P sessions, default 10),
 *      the same warm-up and N.
 *   Both run with Postfix's default concurrency settings; only the retry timers are shortened
 *   (minimal_backoff_time 1 s, maximal_backoff_time 10 s, and queue_run_delay 1 s for Postfix), so
 *   that mail deferred by a 421 comes back within the run instead of after 5 minutes.
 *   With --timeline, each side's measured run is also printed every 500 ms: sessions open,
 *   messages received in the half second, and 421s so far (stalls and waves show there).
 *   Prints a table; with --json the last line is
 *   {"max_sessions":S,"relay_sessions_mean":…,"messages":N,"deferred_421":…, …extra keys}
 *   (postfix_sessions_mean is null when Postfix was not available), among the extra keys
 *   relay/postfix_idle_gap_ms_mean and _p50, relay/postfix_rcpts_per_s (recipients over the busy
 *   period, first admitted connection to the last message) and relay/postfix_deferred_pct
 *   (sessions refused / (sessions refused + transactions), each refusal deferring one delivery).
 *   The issue-41 case: --max-sessions 7 --rcpt-delay-ms 700 --rcpt-jitter-ms 300 --rcpts 2.
 *
 * Assumptions
 *   Loopback only; everything started is stopped. The machine is shared: compare within one run.
 */

import { parseArgs } from "node:util";
import { startDevServer, type DevServer } from "../scripts/lib/dev-server";
import { startSessionMeter, type SessionMeter, type SessionReport } from "./lib/session-meter";
import {
  postfixUnavailableReason,
  postfixVersion,
  startRelayingPostfix,
  type PostfixInstance,
} from "../test/e2e/postfix/harness";
import { buildApiMessages, submitMessages, type ApiMessage } from "../test/e2e/postfix/relay-api";
import { runSmtpSource } from "./e2e-baseline";
import { commandLine } from "../scripts/lib/command-line";

const WARMUP = 20;
/** Upper bound on one side's measured run, ms. */
const RUN_LIMIT_MS = 10 * 60_000;
const BACKOFF = { minimal_backoff_time: 1, maximal_backoff_time: 10 };

interface Side {
  report: SessionReport;
  elapsedMs: number;
  perS: number;
}

interface Cli {
  messages: number;
  maxSessions: number;
  sessions: number;
  rcpts: number;
  rcptDelayMs: number;
  rcptJitterMs: number;
  timeline: boolean;
  json: boolean;
}

function parseCli(): Cli {
  const { values } = commandLine(import.meta.url, () =>
    parseArgs({
      options: {
        messages: { type: "string", default: "1000" },
        "max-sessions": { type: "string", default: "5" },
        sessions: { type: "string", default: "10" },
        timeline: { type: "boolean", default: false },
        json: { type: "boolean", default: false },
        rcpts: { type: "string", default: "1" },
        "rcpt-delay-ms": { type: "string", default: "0" },
        "rcpt-jitter-ms": { type: "string", default: "0" },
      },
    }),
  );
  const int = (name: string, v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} needs a positive integer`);
    return n;
  };
  const ms = (name: string, v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} needs an integer >= 0`);
    return n;
  };
  return {
    messages: int("messages", values.messages),
    maxSessions: int("max-sessions", values["max-sessions"]),
    sessions: int("sessions", values.sessions),
    rcpts: int("rcpts", values.rcpts),
    rcptDelayMs: ms("rcpt-delay-ms", values["rcpt-delay-ms"]),
    rcptJitterMs: ms("rcpt-jitter-ms", values["rcpt-jitter-ms"]),
    timeline: values.timeline,
    json: values.json,
  };
}

const log = (line: string) => console.error(line);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits (at most 15 s) until the warm-up's sessions are closed, then starts a new window. */
async function quiesce(meter: SessionMeter): Promise<void> {
  for (const deadline = Date.now() + 15_000; meter.open() > 0 && Date.now() < deadline;) await sleep(100);
  meter.reset();
}

let timeline = false;
let rcpts = 1;

/** n messages of `rcpts` recipients each, all at example.test. */
function messagesOf(n: number, run: string): ApiMessage[] {
  return buildApiMessages(n, "example.test", run).map((m, i) =>
    rcpts > 1 ? { ...m, to: Array.from({ length: rcpts }, (_, r) => `user${i}r${r}@example.test`) } : m,
  );
}

/** Runs `submit` and waits until the meter has n messages; the window is the meter's. */
async function measure(meter: SessionMeter, n: number, submit: () => Promise<unknown>): Promise<Side> {
  const started = performance.now();
  const received = meter.waitForMessages(n, RUN_LIMIT_MS);
  received.catch(() => undefined);
  let seen = 0;
  const tick = timeline
    ? setInterval(() => {
        const m = meter.messages();
        log(
          `    ${((performance.now() - started) / 1000).toFixed(1).padStart(6)} s  open ${meter.open()}  +${m - seen} messages  421s ${meter.deferred421()}`,
        );
        seen = m;
      }, 500)
    : null;
  try {
    await submit();
    await received;
  } finally {
    if (tick) clearInterval(tick);
  }
  const elapsedMs = performance.now() - started;
  return { report: meter.report(), elapsedMs, perS: (n * 1000) / elapsedMs };
}

async function measureRelay(meter: SessionMeter, n: number): Promise<Side> {
  let relay: DevServer | null = null;
  try {
    relay = await startDevServer({
      tenant: "bench-sessions",
      frozen: true,
      vars: { SMARTHOST: `[${meter.host}]:${meter.port}`, RELAY_TLS: "off", SCHEDULER_CONFIG: JSON.stringify(BACKOFF) },
    });
    const run = Date.now().toString(36);
    meter.reset();
    await submitMessages(relay, messagesOf(WARMUP, `${run}w`));
    await meter.waitForMessages(WARMUP, 120_000);
    await quiesce(meter);
    const dev = relay;
    return await measure(meter, n, () => submitMessages(dev, messagesOf(n, run)));
  } finally {
    await relay?.stop();
  }
}

async function measurePostfix(meter: SessionMeter, n: number, sessions: number): Promise<Side> {
  let postfix: PostfixInstance | null = null;
  try {
    postfix = await startRelayingPostfix({
      relayhost: { host: meter.host, port: meter.port },
      mainCf: {
        minimal_backoff_time: `${BACKOFF.minimal_backoff_time}s`,
        maximal_backoff_time: `${BACKOFF.maximal_backoff_time}s`,
        queue_run_delay: "1s",
      },
    });
    const port = postfix.port;
    const submit = (count: number) =>
      runSmtpSource(port, {
        count,
        sessions: Math.min(sessions, count),
        bodyBytes: 1024,
        timeoutMs: RUN_LIMIT_MS,
        recipients: rcpts,
      });
    meter.reset();
    await submit(WARMUP);
    await meter.waitForMessages(WARMUP, 120_000);
    await quiesce(meter);
    return await measure(meter, n, () => submit(n));
  } finally {
    await postfix?.stop();
  }
}

const round1 = (n: number, d = 1) => Number(n.toFixed(d));

/** The idle gaps' mean and quantiles, ms. */
function gapsOf(r: SessionReport): { n: number; mean: number; p50: number; p90: number } {
  const g = r.idleGapsMs;
  const q = (x: number) => (g.length ? g[Math.min(g.length - 1, Math.ceil(x * g.length) - 1)]! : 0);
  return { n: g.length, mean: g.length ? g.reduce((a, v) => a + v, 0) / g.length : 0, p50: q(0.5), p90: q(0.9) };
}

/** Recipients per second over the busy period (first admitted connection to the last message). */
const rcptsPerS = (s: Side) => (s.report.windowMs > 0 ? (s.report.recipients * 1000) / s.report.windowMs : 0);

/** Sessions refused over refusals plus transactions (each refusal defers one delivery), %. */
const deferredPct = (r: SessionReport) =>
  r.deferred421 + r.messages > 0 ? (100 * r.deferred421) / (r.deferred421 + r.messages) : 0;

function row(name: string, s: Side | null, why = ""): string {
  if (!s) return `  ${name.padEnd(26)} ${why}`;
  const r = s.report;
  return (
    `  ${name.padEnd(26)} ${String(r.messages).padStart(8)} ` +
    `${r.meanOpen.toFixed(2).padStart(13)} ${String(r.maxOpen).padStart(8)} ` +
    `${String(r.sessions).padStart(9)} ${r.messagesPerSession.toFixed(1).padStart(9)} ` +
    `${String(r.deferred421).padStart(8)} ${(s.elapsedMs / 1000).toFixed(1).padStart(8)} ` +
    `${s.perS.toFixed(1).padStart(13)}`
  );
}

async function main(): Promise<void> {
  const cli = parseCli();
  timeline = cli.timeline;
  rcpts = cli.rcpts;
  const meter = await startSessionMeter({
    maxSessions: cli.maxSessions,
    rcptDelayMs: cli.rcptDelayMs,
    rcptJitterMs: cli.rcptJitterMs,
  });
  try {
    log(`bench:sessions: session meter on ${meter.host}:${meter.port}, at most ${cli.maxSessions} sessions`);
    const relay = await measureRelay(meter, cli.messages);
    log(`  relay: mean ${relay.report.meanOpen.toFixed(2)} sessions open, ${relay.report.deferred421} turned away`);
    const reason = postfixUnavailableReason();
    const postfix = reason ? null : await measurePostfix(meter, cli.messages, cli.sessions);
    const version = reason ? "" : await postfixVersion();
    const pace = cli.rcptDelayMs > 0 ? `, ${cli.rcptDelayMs} ± ${cli.rcptJitterMs} ms before each RCPT reply` : "";
    console.log(
      `bench:sessions: ${cli.messages} messages of ${cli.rcpts} recipient(s) to one SMTP ` +
        `server that admits ${cli.maxSessions} sessions (421 at the greeting beyond)${pace}`,
    );
    console.log(
      `  ${"client".padEnd(26)} ${"messages".padStart(8)} ${"mean sessions".padStart(13)} ` +
        `${"max open".padStart(8)} ${"sessions".padStart(9)} ${"msgs/sess".padStart(9)} ` +
        `${"421s".padStart(8)} ${"seconds".padStart(8)} ${"deliveries/s".padStart(13)}`,
    );
    console.log(row("relay (wrangler dev, API)", relay));
    console.log(row(postfix ? `Postfix ${version}` : "Postfix", postfix, `not available: ${reason ?? ""}`));
    console.log(
      "  mean sessions: integrated exactly from the first admitted connection to the last message (the server's view; a 421 is not a session)",
    );
    for (const [name, side] of [
      ["relay", relay],
      ["Postfix", postfix],
    ] as const) {
      if (!side) continue;
      const g = gapsOf(side.report);
      console.log(
        `  ${name}: idle gap between transactions on a reused session: ` +
          `mean ${g.mean.toFixed(1)} ms, p50 ${g.p50.toFixed(1)} ms, p90 ${g.p90.toFixed(1)} ms (${g.n} gaps); ` +
          `${rcptsPerS(side).toFixed(2)} recipients/s over the busy period; ` +
          `deferred ${deferredPct(side.report).toFixed(1)} ` +
          `%; ${((side.report.windowMs * side.report.meanOpen) / Math.max(1, side.report.messages)).toFixed(0)} ` +
          `session-ms per delivery`,
      );
    }
    if (relay && postfix)
      console.log(
        `  relay/Postfix: recipients/s ${(rcptsPerS(relay) / rcptsPerS(postfix)).toFixed(3)}, ` +
          `idle gap ${(gapsOf(relay.report).mean - gapsOf(postfix.report).mean).toFixed(1)} ms longer`,
      );
    console.log(
      `  retry timers shortened on both: ${JSON.stringify(BACKOFF)} (seconds)${postfix ? ", Postfix queue_run_delay 1s" : ""}`,
    );
    if (cli.json) {
      console.log(
        JSON.stringify({
          max_sessions: cli.maxSessions,
          relay_sessions_mean: Number(relay.report.meanOpen.toFixed(3)),
          messages: relay.report.messages,
          deferred_421: relay.report.deferred421,
          postfix_sessions_mean: postfix ? Number(postfix.report.meanOpen.toFixed(3)) : null,
          postfix_deferred_421: postfix ? postfix.report.deferred421 : null,
          relay_sessions: relay.report.sessions,
          postfix_sessions: postfix ? postfix.report.sessions : null,
          relay_deliveries_per_s: Number(relay.perS.toFixed(1)),
          postfix_deliveries_per_s: postfix ? Number(postfix.perS.toFixed(1)) : null,
          rcpts: cli.rcpts,
          rcpt_delay_ms: cli.rcptDelayMs,
          rcpt_jitter_ms: cli.rcptJitterMs,
          relay_idle_gap_ms_mean: round1(gapsOf(relay.report).mean),
          relay_idle_gap_ms_p50: round1(gapsOf(relay.report).p50),
          postfix_idle_gap_ms_mean: postfix ? round1(gapsOf(postfix.report).mean) : null,
          postfix_idle_gap_ms_p50: postfix ? round1(gapsOf(postfix.report).p50) : null,
          relay_rcpts_per_s: round1(rcptsPerS(relay), 2),
          postfix_rcpts_per_s: postfix ? round1(rcptsPerS(postfix), 2) : null,
          rcpts_per_s_ratio: postfix ? Number((rcptsPerS(relay) / rcptsPerS(postfix)).toFixed(3)) : null,
          relay_deferred_pct: round1(deferredPct(relay.report)),
          postfix_deferred_pct: postfix ? round1(deferredPct(postfix.report)) : null,
        }),
      );
    }
  } finally {
    await meter.stop();
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exitCode = 1;
});
