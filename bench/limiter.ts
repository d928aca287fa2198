/*
 * npm run bench:limiter [-- --recipients N] [--delay-ms D] [--jitter-ms J] [--only SCENARIO] [--feedback F] [--json]
 *
 * The relay's concurrency feedback against a server that limits sessions, with a private
 * Postfix against the same server in the same run as the baseline (issue #13, item 6).
 *
 * What it does
 *   The limiter (bench/lib/session-meter.ts) is an SMTP server on 127.0.0.1 that admits at
 *   most S sessions at once, answers 421 at the greeting beyond them, and waits D ± J ms
 *   (default 200 ± 40) before each RCPT reply. Each scenario sends N recipients (default 400) as
 *   messages of 50 recipients, with recipient limit 2 (so N/2 deliveries), initial concurrency
 *   5, concurrency limit 20, the same feedback style for positive and negative feedback, and
 *   retry timers shortened to 1 s / 10 s (Postfix also queue_run_delay 1 s):
 *     fixed-5     S = 5 throughout; run for feedback 1/concurrency, 1/3 and 1;
 *     rise-5-10   S = 5, then 10 once a quarter of the recipients have arrived;
 *     fall-10-3   S = 10, then 3 once half of them have arrived.
 *   For each: Postfix (relayhost = the limiter, fed by smtp-source), then the relay (a private
 *   wrangler dev, SMARTHOST = the limiter, fed by POST /emails/batch) twice: with its default
 *   ("mode":"default", the learned ceiling on) and with the learned ceiling off
 *   ("mode":"postfix", default_destination_concurrency_ceiling_memory 0). Each run gets a
 *   fresh limiter, Postfix and relay, so nothing learned carries over.
 *
 * Figures, all as the server sees them except the window:
 *   deferred %    sessions refused / (sessions refused + transactions): each refusal defers one
 *                 delivery of 2 recipients, on both sides;
 *   rcpts/s       recipients / (first admitted session → last message);
 *   sessions      mean sessions open over that interval;
 *   window        mean of the destination window after each feedback event: the relay's from
 *                 its Destination DO history (GET /relay/destinations/:transport/:queue), Postfix's
 *                 from destination_concurrency_feedback_debug lines in its log;
 *   reach s       (rise) seconds from the change until the server first had S sessions open;
 *   after-change deferred % (fall) the same ratio counted from the change on.
 *   --json: the last line is {"results":[{"scenario","feedback","mode","relay_deferred_pct",
 *   "postfix_deferred_pct","relay_rcpts_per_s","postfix_rcpts_per_s","relay_window_mean",
 *   "postfix_window_mean","relay_sessions_mean", …extra keys}, …]}.
 *
 *   LIMITER_DUMP=/path/prefix keeps each run's Postfix log and relay destination view there.
 *
 * Assumptions
 *   Postfix must be installed here and this must run as root (scripts/postfix/install.sh);
 *   loopback only; everything started is stopped. The machine is shared: compare within a run.
 */

import { spawn } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { startDevServer, type DevServer } from "../scripts/lib/dev-server";
import { postfixWindows } from "./lib/postfix-feedback-log";
import { startSessionMeter, type SessionMeter, type SessionReport } from "./lib/session-meter";
import { postfixUnavailableReason, startRelayingPostfix, type PostfixInstance } from "../test/e2e/postfix/harness";
import { relayCall } from "../test/e2e/postfix/relay-api";
import { commandLine } from "../scripts/lib/command-line";

const PER_MESSAGE = 50;
const RUN_LIMIT_MS = 8 * 60_000;
const FEEDBACKS = { "1/concurrency": "1/concurrency", "1/3": "1/3", "1": "1" } as const;
type FeedbackName = keyof typeof FEEDBACKS;

interface Scenario {
  name: string;
  start: number;
  change: { at: number; to: number } | null;
  feedbacks: FeedbackName[];
}

const SCENARIOS: Scenario[] = [
  { name: "fixed-5", start: 5, change: null, feedbacks: ["1/concurrency", "1/3", "1"] },
  { name: "rise-5-10", start: 5, change: { at: 0.25, to: 10 }, feedbacks: ["1/concurrency"] },
  { name: "fall-10-3", start: 10, change: { at: 0.5, to: 3 }, feedbacks: ["1/concurrency"] },
];

interface Cli {
  recipients: number;
  delayMs: number;
  jitterMs: number;
  only: string | null;
  feedback: string | null;
  json: boolean;
}

function parseCli(): Cli {
  const { values } = commandLine(import.meta.url, () =>
    parseArgs({
      options: {
        recipients: { type: "string", default: "400" },
        "delay-ms": { type: "string", default: "200" },
        "jitter-ms": { type: "string", default: "40" },
        only: { type: "string" },
        feedback: { type: "string" },
        json: { type: "boolean", default: false },
      },
    }),
  );
  const int = (name: string, v: string, min: number) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} needs an integer ≥ ${min}`);
    return n;
  };
  const recipients = int("recipients", values.recipients, PER_MESSAGE);
  if (recipients % PER_MESSAGE !== 0) throw new Error(`--recipients must be a multiple of ${PER_MESSAGE}`);
  if (values.only && !SCENARIOS.some((s) => s.name === values.only))
    throw new Error(`--only: one of ${SCENARIOS.map((s) => s.name).join(", ")}`);
  return {
    recipients,
    delayMs: int("delay-ms", values["delay-ms"], 0),
    jitterMs: int("jitter-ms", values["jitter-ms"], 0),
    only: values.only ?? null,
    feedback: values.feedback ?? null,
    json: values.json,
  };
}

const log = (line: string) => console.error(line);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The scheduler settings of the scenario, in Postfix's parameter names (both sides). */
function settings(feedback: FeedbackName): Record<string, string | number> {
  return {
    initial_destination_concurrency: 5,
    default_destination_concurrency_limit: 20,
    default_destination_recipient_limit: 2,
    default_destination_concurrency_positive_feedback: FEEDBACKS[feedback],
    default_destination_concurrency_negative_feedback: FEEDBACKS[feedback],
    minimal_backoff_time: 1,
    maximal_backoff_time: 10,
    queue_run_delay: 1,
  };
}

/** One side's run as measured. */
interface Side {
  report: SessionReport;
  windowMean: number | null;
  windows: number;
}

/** Starts a fresh limiter for one run. */
function limiter(cli: Cli, s: Scenario): Promise<SessionMeter> {
  return startSessionMeter({ maxSessions: s.start, rcptDelayMs: cli.delayMs, rcptJitterMs: cli.jitterMs, seed: 7 });
}

/** Waits for every recipient, changing the limit on the way when the scenario says so. */
async function runToEnd(
  meter: SessionMeter,
  cli: Cli,
  s: Scenario,
  submit: () => Promise<unknown>,
): Promise<SessionReport> {
  let changed = s.change === null;
  const done = (async () => {
    const deadline = Date.now() + RUN_LIMIT_MS;
    while (meter.report().recipients < cli.recipients) {
      if (Date.now() > deadline)
        throw new Error(
          `the limiter has ${meter.report().recipients} of ${cli.recipients} recipients after ${RUN_LIMIT_MS} ms`,
        );
      if (!changed && s.change && meter.report().recipients >= s.change.at * cli.recipients) {
        meter.setMaxSessions(s.change.to);
        changed = true;
      }
      await sleep(10);
    }
  })();
  done.catch(() => undefined);
  await submit();
  await done;
  return meter.report();
}

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);

async function runPostfix(cli: Cli, s: Scenario, feedback: FeedbackName): Promise<Side> {
  const meter = await limiter(cli, s);
  let postfix: PostfixInstance | null = null;
  try {
    const cfg = settings(feedback);
    postfix = await startRelayingPostfix({
      relayhost: { host: meter.host, port: meter.port },
      mainCf: {
        ...Object.fromEntries(
          Object.entries(cfg).map(([k, v]) => [
            k,
            (typeof v === "number" && k.endsWith("_time")) || k === "queue_run_delay" ? `${v}s` : String(v),
          ]),
        ),
        smtp_destination_recipient_limit: "2",
        smtp_destination_concurrency_limit: "20",
        destination_concurrency_feedback_debug: "yes",
      },
    });
    const port = postfix.port;
    const report = await runToEnd(meter, cli, s, () => smtpSource(port, cli.recipients / PER_MESSAGE));
    const logText = await readFile(postfix.maillog, "utf8").catch(() => "");
    if (process.env.LIMITER_DUMP)
      await writeFile(`${process.env.LIMITER_DUMP}-${s.name}-${feedback.replace("/", "_")}-postfix.log`, logText);
    const windows = postfixWindows(logText, meter.port);
    return { report, windowMean: mean(windows), windows: windows.length };
  } finally {
    await postfix?.stop();
    await meter.stop();
  }
}

/** Feeds Postfix `messages` messages of PER_MESSAGE recipients over one session. */
function smtpSource(port: number, messages: number): Promise<void> {
  const args = [
    "-4",
    "-d",
    "-N",
    "-s",
    "1",
    "-m",
    String(messages),
    "-r",
    String(PER_MESSAGE),
    "-l",
    "1024",
    "-M",
    "client.cohort.test",
    "-f",
    "sender@cohort.test",
    "-t",
    "rcpt@limit.test",
    "-S",
    "bench limiter",
    `127.0.0.1:${port}`,
  ];
  return new Promise((resolve, reject) => {
    const child = spawn("/usr/sbin/smtp-source", args, { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (d: string) => {
      if (stderr.length < 10_000) stderr += d;
    });
    child.once("error", reject);
    child.once("exit", (code, signal) =>
      code === 0 ? resolve() : reject(new Error(`smtp-source exited with ${code ?? signal}: ${stderr.trim()}`)),
    );
  });
}

type DestinationList = { data: { transport: string; queue: string; nexthop: string }[] };
type DestinationView = { history: { at: string; kind: string; window: number }[] };

async function runRelay(cli: Cli, s: Scenario, feedback: FeedbackName, mode: "default" | "postfix"): Promise<Side> {
  const meter = await limiter(cli, s);
  let relay: DevServer | null = null;
  try {
    const cfg: Record<string, string | number> = {
      ...settings(feedback),
      ...(mode === "postfix" ? { default_destination_concurrency_ceiling_memory: 0 } : {}),
    };
    relay = await startDevServer({
      tenant: "bench-limiter",
      frozen: true,
      role: "operator",
      vars: { SMARTHOST: `[${meter.host}]:${meter.port}`, RELAY_TLS: "off", SCHEDULER_CONFIG: JSON.stringify(cfg) },
    });
    const dev = relay;
    const run = Date.now().toString(36);
    const messages = Array.from({ length: cli.recipients / PER_MESSAGE }, (_, m) => ({
      from: "Cohort limiter <sender@cohort.test>",
      to: Array.from({ length: PER_MESSAGE }, (_, r) => `r${m}-${r}@limit.test`),
      subject: `bench limiter ${run} ${m}`,
      text: "The quick brown fox jumps over the lazy dog.\n",
    }));
    // The destination's queue name, found while it is in core.
    let where: { transport: string; queue: string } | null = null;
    const finding = (async () => {
      for (const deadline = Date.now() + 60_000; !where && Date.now() < deadline; await sleep(200)) {
        const list = await relayCall<DestinationList>(dev, "GET", "/relay/destinations").catch(() => ({ data: [] }));
        const d = list.data.find((x) => x.nexthop.includes(`:${meter.port}`) || x.queue.includes(`:${meter.port}`));
        if (d) where = { transport: d.transport, queue: d.queue };
      }
    })();
    const report = await runToEnd(meter, cli, s, () => relayCall(dev, "POST", "/emails/batch", messages));
    await finding;
    const found = where as { transport: string; queue: string } | null;
    if (!found) throw new Error("the relay never showed the limiter's destination in GET /relay/destinations");
    // Let the last reports reach the Destination DO.
    await sleep(1500);
    const view = await relayCall<DestinationView>(
      dev,
      "GET",
      `/relay/destinations/${encodeURIComponent(found.transport)}/${encodeURIComponent(found.queue)}`,
    );
    if (process.env.LIMITER_DUMP)
      await writeFile(`${process.env.LIMITER_DUMP}-${s.name}-${mode}.json`, JSON.stringify(view, null, 1));
    const windows = view.history.filter((h) => h.window > 0).map((h) => h.window);
    return { report, windowMean: mean(windows), windows: windows.length };
  } finally {
    await relay?.stop();
    await meter.stop();
  }
}

const pct = (r: SessionReport) =>
  r.deferred421 + r.messages > 0 ? (100 * r.deferred421) / (r.deferred421 + r.messages) : 0;
const perS = (r: SessionReport) => (r.windowMs > 0 ? (r.recipients * 1000) / r.windowMs : 0);
const changePct = (r: SessionReport) =>
  r.change && r.change.deferred421 + r.change.messages > 0
    ? (100 * r.change.deferred421) / (r.change.deferred421 + r.change.messages)
    : null;
const r1 = (x: number | null) => (x === null ? null : Math.round(x * 10) / 10);
const r2 = (x: number | null) => (x === null ? null : Math.round(x * 100) / 100);

interface Result {
  scenario: string;
  feedback: string;
  mode: "default" | "postfix";
  relay_deferred_pct: number;
  postfix_deferred_pct: number;
  relay_rcpts_per_s: number;
  postfix_rcpts_per_s: number;
  relay_window_mean: number | null;
  postfix_window_mean: number | null;
  relay_sessions_mean: number;
  postfix_sessions_mean: number;
  relay_refused: number;
  postfix_refused: number;
  relay_refused_while_idle: number;
  postfix_refused_while_idle: number;
  rcpts_per_s_ratio: number;
  relay_reach_s?: number | null;
  postfix_reach_s?: number | null;
  relay_after_change_deferred_pct?: number | null;
  postfix_after_change_deferred_pct?: number | null;
}

function result(s: Scenario, feedback: FeedbackName, mode: "default" | "postfix", relay: Side, postfix: Side): Result {
  const [a, b] = [relay.report, postfix.report];
  return {
    scenario: s.name,
    feedback: feedback === "1/concurrency" ? "1/concurrency" : feedback,
    mode,
    relay_deferred_pct: r1(pct(a))!,
    postfix_deferred_pct: r1(pct(b))!,
    relay_rcpts_per_s: r1(perS(a))!,
    postfix_rcpts_per_s: r1(perS(b))!,
    relay_window_mean: r2(relay.windowMean),
    postfix_window_mean: r2(postfix.windowMean),
    relay_sessions_mean: r2(a.meanOpen)!,
    postfix_sessions_mean: r2(b.meanOpen)!,
    relay_refused: a.deferred421,
    postfix_refused: b.deferred421,
    relay_refused_while_idle: a.refusedWhileIdle,
    postfix_refused_while_idle: b.refusedWhileIdle,
    rcpts_per_s_ratio: r2(perS(b) > 0 ? perS(a) / perS(b) : 0)!,
    ...(s.change && s.change.to > s.start
      ? { relay_reach_s: r1(a.change?.reachedAfterS ?? null), postfix_reach_s: r1(b.change?.reachedAfterS ?? null) }
      : {}),
    ...(s.change && s.change.to < s.start
      ? { relay_after_change_deferred_pct: r1(changePct(a)), postfix_after_change_deferred_pct: r1(changePct(b)) }
      : {}),
  };
}

function printTable(cli: Cli, results: Result[]): void {
  console.log(
    `bench:limiter: ${cli.recipients} recipients (messages of ${PER_MESSAGE}, recipient ` +
      `limit 2) to a server that admits S sessions (421 beyond) and waits ${cli.delayMs} ` +
      `± ${cli.jitterMs} ms per RCPT`,
  );
  console.log(
    "  initial concurrency 5, limit 20, the same feedback both ways; Postfix in the same run as the baseline; the server's view except the window",
  );
  const head = [
    "scenario",
    "feedback",
    "mode",
    "deferred % relay/pf",
    "rcpts/s relay/pf",
    "ratio",
    "window relay/pf",
    "sessions relay/pf",
    "extra",
  ];
  console.log(
    `  ${head[0]!.padEnd(10)} ${head[1]!.padEnd(14)} ${head[2]!.padEnd(8)} ` +
      `${head[3]!.padStart(20)} ${head[4]!.padStart(17)} ${head[5]!.padStart(6)} ` +
      `${head[6]!.padStart(16)} ${head[7]!.padStart(18)}  ${head[8]}`,
  );
  for (const r of results) {
    const extra =
      r.relay_reach_s !== undefined
        ? `reach new limit: relay ${r.relay_reach_s ?? "never"} s, Postfix ${r.postfix_reach_s ?? "never"} s`
        : r.relay_after_change_deferred_pct !== undefined
          ? `deferred after the fall: relay ${r.relay_after_change_deferred_pct} %, Postfix ${r.postfix_after_change_deferred_pct} %`
          : "";
    console.log(
      `  ${r.scenario.padEnd(10)} ${r.feedback.padEnd(14)} ${r.mode.padEnd(8)} ` +
        `${`${r.relay_deferred_pct} / ${r.postfix_deferred_pct}`.padStart(20)} ` +
        `${`${r.relay_rcpts_per_s} / ${r.postfix_rcpts_per_s}`.padStart(17)} ` +
        `${String(r.rcpts_per_s_ratio).padStart(6)} ` +
        `${`${r.relay_window_mean} / ${r.postfix_window_mean}`.padStart(16)} ` +
        `${`${r.relay_sessions_mean} / ${r.postfix_sessions_mean}`.padStart(18)}  ${extra}`,
    );
  }
}

async function main(): Promise<void> {
  const cli = parseCli();
  const why = postfixUnavailableReason();
  if (why) throw new Error(`bench:limiter needs Postfix as its baseline: ${why}`);
  const results: Result[] = [];
  for (const s of SCENARIOS.filter((x) => !cli.only || x.name === cli.only)) {
    for (const feedback of s.feedbacks.filter((f) => !cli.feedback || f === cli.feedback)) {
      log(`bench:limiter: ${s.name}, feedback ${feedback}: Postfix…`);
      const postfix = await runPostfix(cli, s, feedback);
      log(
        `  Postfix: ${postfix.report.deferred421} refused (${postfix.report.refusedWhileIdle} ` +
          `while a session idled), ${postfix.report.messages} transactions ` +
          `in ${postfix.report.sessions} sessions, ${perS(postfix.report).toFixed(1)} rcpts/s, ` +
          `window ${postfix.windowMean?.toFixed(2)} (${postfix.windows} events)`,
      );
      for (const mode of ["default", "postfix"] as const) {
        log(`bench:limiter: ${s.name}, feedback ${feedback}: relay (${mode})…`);
        const relay = await runRelay(cli, s, feedback, mode);
        log(
          `  relay ${mode}: ${relay.report.deferred421} refused (${relay.report.refusedWhileIdle} ` +
            `while a session idled), ${relay.report.messages} transactions ` +
            `in ${relay.report.sessions} sessions, ${perS(relay.report).toFixed(1)} rcpts/s, ` +
            `window ${relay.windowMean?.toFixed(2)} (${relay.windows} events)`,
        );
        results.push(result(s, feedback, mode, relay, postfix));
      }
    }
  }
  printTable(cli, results);
  if (cli.json) console.log(JSON.stringify({ results }));
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exitCode = 1;
});
