/*
 * The Postfix side of `npm run bench:e2e`: how fast a stock Postfix relays the workload to a
 * sink on this machine, as the baseline the relay is compared with.
 *
 * What it does
 *   Starts Postfix's smtp-sink on a free port (or uses the sink the caller passes, so the relay
 *   and Postfix can be measured against the same one), starts a private Postfix (loopback only)
 *   whose relayhost is that sink, sends a small warm-up, then submits N messages over SMTP with
 *   Postfix's smtp-source (S parallel sessions, several messages per connection, one recipient
 *   each) and measures from the first submission until the sink has received all N. Postfix's
 *   log must then show N more "status=sent" and nothing deferred or bounced.
 *
 *   As a script:  tsx bench/e2e-baseline.ts [N] [--sessions S] [--body-bytes B]
 *                 [--warmup W] [--json]
 *   prints a human summary; with --json the last line is
 *   {"messages":N,"postfix_deliveries_per_s":…}.
 *   As a module:  measurePostfixBaseline(n, options) returns the figures.
 *
 * Assumptions
 *   Postfix is installed (scripts/postfix/install.sh) and this runs as root (Postfix instances
 *   must be started by root). Postfix runs with its default scheduling and concurrency settings;
 *   only paths, loopback listening and the relayhost are configured (test/e2e/postfix/harness.ts).
 */

import { spawn } from "node:child_process";
import { pathToFileURL } from "node:url";
import {
  postfixUnavailableReason,
  postfixVersion,
  startRelayingPostfix,
  startSmtpSink,
  type LogCounts,
  type SmtpSink,
} from "../test/e2e/postfix/harness";

/** Options for measurePostfixBaseline. */
export interface PostfixBaselineOptions {
  /** Parallel SMTP submission sessions (smtp-source -s). Default 10. */
  sessions?: number;
  /** Payload bytes per message, headers excluded (smtp-source -l). Default 1024. */
  bodyBytes?: number;
  /** Messages sent and drained before timing starts. Default 20; 0 for none. */
  warmup?: number;
  /** A running sink to relay to (shared with the relay side); default: a fresh smtp-sink. */
  sink?: SmtpSink;
  /** Upper bound on the whole measured run. Default 10 min. */
  timeoutMs?: number;
}

/** What measurePostfixBaseline measured. */
export interface PostfixBaselineResult {
  messages: number;
  /** First submission to the sink having all N, in ms. */
  elapsedMs: number;
  /** First submission to smtp-source finishing (all N accepted by Postfix), in ms. */
  submitMs: number;
  /** messages / elapsed seconds. */
  deliveriesPerSecond: number;
  sessions: number;
  bodyBytes: number;
  warmup: number;
  postfixVersion: string;
  /** Postfix's log for the whole run, warm-up included. */
  log: LogCounts;
}

/**
 * Relays `n` messages through a private Postfix to a sink and measures deliveries/s (see the
 * header). Rejects when Postfix cannot run here, when the sink does not get all messages in
 * time, or when Postfix's log does not show exactly the messages sent.
 */
export async function measurePostfixBaseline(
  n = 1000,
  options: PostfixBaselineOptions = {},
): Promise<PostfixBaselineResult> {
  if (!Number.isInteger(n) || n < 1) throw new Error(`message count must be a positive integer, got ${n}`);
  const sessions = options.sessions ?? 10;
  const bodyBytes = options.bodyBytes ?? 1024;
  const warmup = options.warmup ?? 20;
  const timeoutMs = options.timeoutMs ?? 600_000;
  const reason = postfixUnavailableReason();
  if (reason) throw new Error(reason);

  const sink = options.sink ?? (await startSmtpSink());
  try {
    const postfix = await startRelayingPostfix({ relayhost: { host: sink.host, port: sink.port } });
    try {
      const version = await postfixVersion();
      const submit = (count: number) =>
        runSmtpSource(postfix.port, { count, sessions: Math.min(sessions, count), bodyBytes, timeoutMs });
      if (warmup > 0) {
        const before = sink.messages();
        await submit(warmup);
        await sink.waitForMessages(before + warmup, 60_000);
        await postfix.waitForLog((c) => c.sent >= warmup, 30_000);
      }

      const base = sink.messages();
      const started = performance.now();
      const received = sink.waitForMessages(base + n, timeoutMs);
      received.catch(() => undefined);
      await submit(n);
      const submitMs = performance.now() - started;
      await received;
      const elapsedMs = performance.now() - started;

      const log = await postfix.waitForLog((c) => c.sent + c.deferred + c.bounced >= warmup + n, 60_000);
      if (log.sent !== warmup + n || log.deferred !== 0 || log.bounced !== 0 || log.accepted !== warmup + n) {
        throw new Error(`Postfix log does not match the run: ${JSON.stringify(log)}`);
      }
      return {
        messages: n,
        elapsedMs,
        submitMs,
        deliveriesPerSecond: (n * 1000) / elapsedMs,
        sessions,
        bodyBytes,
        warmup,
        postfixVersion: version,
        log,
      };
    } finally {
      await postfix.stop();
    }
  } finally {
    if (!options.sink) await sink.stop();
  }
}

/** Runs smtp-source against 127.0.0.1:port (o.recipients per message, default 1); rejects on a non-zero exit or after the timeout. */
export function runSmtpSource(
  port: number,
  o: { count: number; sessions: number; bodyBytes: number; timeoutMs: number; recipients?: number },
): Promise<void> {
  const args = [
    "-4",
    "-d", // several messages per connection
    "-N", // distinct recipient per message
    ...(o.recipients && o.recipients > 1 ? ["-r", String(o.recipients)] : []), // recipients per message
    "-s",
    String(o.sessions),
    "-m",
    String(o.count),
    "-l",
    String(o.bodyBytes),
    "-M",
    "client.cohort.test",
    "-f",
    "sender@cohort.test",
    "-t",
    "rcpt@example.test",
    "-S",
    "bench e2e baseline",
    `127.0.0.1:${port}`,
  ];
  return new Promise((resolve, reject) => {
    const child = spawn("/usr/sbin/smtp-source", args, { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (d: string) => {
      if (stderr.length < 10_000) stderr += d;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), o.timeoutMs);
    child.once("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`smtp-source exited with ${code ?? signal}: ${stderr.trim()}`));
    });
  });
}

/** Command-line options. */
interface CliOptions {
  messages: number;
  json: boolean;
  sessions: number;
  bodyBytes: number;
  warmup: number;
}

/** Parses argv (after the script path); throws on anything unknown. */
function parseArgs(argv: string[]): CliOptions {
  const out: CliOptions = { messages: 1000, json: false, sessions: 10, bodyBytes: 1024, warmup: 20 };
  const int = (flag: string, v: string | undefined, min: number): number => {
    const x = Number(v);
    if (!Number.isInteger(x) || x < min) throw new Error(`${flag} needs an integer >= ${min}`);
    return x;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? "";
    if (a === "--json") out.json = true;
    else if (a === "--messages" || a === "-n") out.messages = int(a, argv[++i], 1);
    else if (a === "--sessions") out.sessions = int(a, argv[++i], 1);
    else if (a === "--body-bytes") out.bodyBytes = int(a, argv[++i], 0);
    else if (a === "--warmup") out.warmup = int(a, argv[++i], 0);
    else if (/^\d+$/.test(a)) out.messages = int("N", a, 1);
    else throw new Error(`unknown argument ${a}`);
  }
  return out;
}

/** Script entry: run the baseline and print it. */
async function main(): Promise<void> {
  const cli = parseArgs(process.argv.slice(2));
  const r = await measurePostfixBaseline(cli.messages, {
    sessions: cli.sessions,
    bodyBytes: cli.bodyBytes,
    warmup: cli.warmup,
  });
  console.log(`Postfix ${r.postfixVersion} baseline: smtp-source -> private Postfix -> smtp-sink (127.0.0.1)`);
  console.log(
    `  workload:   ${r.messages} messages, 1 recipient each, ${r.bodyBytes} payload bytes, ` +
      `${r.sessions} submission sessions, ${r.warmup} warm-up messages`,
  );
  console.log(`  submitted:  ${r.submitMs.toFixed(0)} ms (all accepted by Postfix)`);
  console.log(`  delivered:  ${r.elapsedMs.toFixed(0)} ms (first submission -> sink has all ${r.messages})`);
  console.log(`  rate:       ${r.deliveriesPerSecond.toFixed(1)} deliveries/s`);
  console.log(
    `  maillog:    accepted=${r.log.accepted} sent=${r.log.sent} deferred=${r.log.deferred} ` +
      `bounced=${r.log.bounced} (warm-up included)`,
  );
  if (cli.json) {
    console.log(
      JSON.stringify({ messages: r.messages, postfix_deliveries_per_s: Number(r.deliveriesPerSecond.toFixed(1)) }),
    );
  }
}

const invokedAs = process.argv[1];
if (invokedAs && import.meta.url === pathToFileURL(invokedAs).href) {
  main().catch((e: unknown) => {
    console.error(e instanceof Error ? e.message : e);
    process.exitCode = 1;
  });
}
