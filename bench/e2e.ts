/*
 * npm run bench:e2e [-- --messages N] [--sessions S] [--json]
 *
 * End-to-end deliveries per second on this machine: the relay under `wrangler dev` against a
 * stock Postfix, with the same workload, to the same sink, side by side in the same run.
 *
 * What it does
 *   Starts Postfix's smtp-sink (test/e2e/postfix/harness.ts) on a free loopback port, then:
 *   1. the relay: a private `wrangler dev` (fresh state, free ports) with SMARTHOST = the sink (the
 *      relay transport kind, STARTTLS off as for Postfix); after a 20-message warm-up, N
 *      one-recipient messages (~1 KiB of text each) are POSTed with /emails/batch (100 per
 *      request, 2 requests at a time) and the clock runs from the first POST until the sink has
 *      received all N. The API must then say every recipient is delivered. The relay is stopped.
 *   2. Postfix: bench/e2e-baseline.ts, i.e. smtp-source submitting N messages (1 KiB payload,
 *      S sessions) to a private Postfix whose relayhost is the same sink, timed from the first
 *      submission until the sink has all N; Postfix's log must show them all sent.
 *   Prints both side by side and the ratio relay/Postfix; with --json the last line is
 *   {"messages":N,"relay_deliveries_per_s":…,"postfix_deliveries_per_s":…,"ratio":…}.
 *
 * Assumptions
 *   Postfix installed and run as root (scripts/postfix/install.sh; the npm script runs it first).
 *   The machine is shared: figures are noisy, compare them only within one run.
 */

import { parseArgs } from "node:util";
import { startDevServer, type DevServer } from "../scripts/lib/dev-server";
import { postfixUnavailableReason, startSmtpSink, type SmtpSink } from "../test/e2e/postfix/harness";
import {
  buildApiMessages,
  describeSample,
  recipientStates,
  submitMessages,
  type ApiMessage,
} from "../test/e2e/postfix/relay-api";
import { measurePostfixBaseline } from "./e2e-baseline";
import { commandLine } from "../scripts/lib/command-line";

/** The relay's side of the run. */
interface RelayResult {
  messages: number;
  /** First POST until all N accepted by the API, ms. */
  acceptMs: number;
  /** First POST until the sink has all N, ms. */
  elapsedMs: number;
  deliveriesPerSecond: number;
  states: Record<string, number>;
}

const WARMUP = 20;
const TEXT_BYTES = 1024;

/** Messages with ~TEXT_BYTES of text each (like smtp-source -l 1024). */
function workload(n: number, run: string): ApiMessage[] {
  const filler = "The quick brown fox jumps over the lazy dog 0123456789.\n".repeat(Math.ceil(TEXT_BYTES / 57));
  return buildApiMessages(n, "example.test", run).map((m) => ({
    ...m,
    text: `${String(m.text)}${filler}`.slice(0, TEXT_BYTES),
  }));
}

/** How long the sink's count may stay still before the run is declared stalled, ms. */
const STALL_MS = 60_000;

/**
 * Resolves the moment the sink reports `count` messages, as the Postfix side is timed
 * (SmtpSink.waitForMessages, on the sink's own counter output); rejects when the count did not
 * move for STALL_MS. (Until 2026-11-27 this polled the count every 250 ms, so the relay's time
 * was rounded up to the next poll, by 125 ms on average, and Postfix's was not.)
 */
async function sinkReaches(sink: SmtpSink, count: number): Promise<void> {
  for (let seen = sink.messages(); ;) {
    try {
      await sink.waitForMessages(count, STALL_MS);
      return;
    } catch {
      const now = sink.messages();
      if (now === seen)
        throw new Error(`stalled: the sink has ${now} of ${count} messages and got none for ${STALL_MS / 1000} s`);
      seen = now;
    }
  }
}

/** Measures the relay under wrangler dev delivering to `sink` (see header, step 1). */
async function measureRelay(n: number, sink: SmtpSink): Promise<RelayResult> {
  let relay: DevServer | null = null;
  try {
    relay = await startDevServer({
      tenant: "bench-e2e",
      frozen: true,
      vars: { SMARTHOST: `[${sink.host}]:${sink.port}`, RELAY_TLS: "off" },
    });
    const run = Date.now().toString(36);
    const warm = sink.messages();
    await submitMessages(relay, workload(WARMUP, `${run}w`));
    await sinkReaches(sink, warm + WARMUP);

    const base = sink.messages();
    const started = performance.now();
    const done = sinkReaches(sink, base + n);
    done.catch(() => undefined);
    const ids = await submitMessages(relay, workload(n, run));
    const acceptMs = performance.now() - started;
    await done.catch(async (e: unknown) => {
      throw new Error(
        `${e instanceof Error ? e.message : String(e)}; the API says of the last messages: ${await describeSample(relay!, ids.slice(-3))}`,
      );
    });
    const elapsedMs = performance.now() - started;
    let states = await recipientStates(relay, ids);
    for (const deadline = Date.now() + 30_000; (states.delivered ?? 0) < n && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 1000));
      states = await recipientStates(relay, ids);
    }
    if ((states.delivered ?? 0) !== n)
      throw new Error(`the API does not say all ${n} recipients are delivered: ${JSON.stringify(states)}`);
    return { messages: n, acceptMs, elapsedMs, deliveriesPerSecond: (n * 1000) / elapsedMs, states };
  } finally {
    await relay?.stop();
  }
}

function parseCli(): { messages: number; sessions: number; json: boolean } {
  const { values } = commandLine(import.meta.url, () =>
    parseArgs({
      options: {
        messages: { type: "string", default: "1000" },
        sessions: { type: "string", default: "10" },
        json: { type: "boolean", default: false },
      },
    }),
  );
  const messages = Number(values.messages);
  const sessions = Number(values.sessions);
  if (!Number.isInteger(messages) || messages < 1) throw new Error("--messages needs a positive integer");
  if (!Number.isInteger(sessions) || sessions < 1) throw new Error("--sessions needs a positive integer");
  return { messages, sessions, json: values.json };
}

async function main(): Promise<void> {
  const cli = parseCli();
  const reason = postfixUnavailableReason();
  if (reason) throw new Error(reason);
  const sink = await startSmtpSink();
  try {
    const relay = await measureRelay(cli.messages, sink);
    const postfix = await measurePostfixBaseline(cli.messages, {
      sink,
      sessions: cli.sessions,
      bodyBytes: TEXT_BYTES,
      warmup: WARMUP,
    });
    const ratio = relay.deliveriesPerSecond / postfix.deliveriesPerSecond;
    const row = (name: string, msgs: number, ms: number, rate: number) =>
      `  ${name.padEnd(28)} ${String(msgs).padStart(8)} ${(ms / 1000).toFixed(1).padStart(10)} ${rate.toFixed(1).padStart(14)}`;
    console.log(
      `bench:e2e: ${cli.messages} one-recipient messages (~${TEXT_BYTES} B of text) to Postfix's smtp-sink on 127.0.0.1:${sink.port}`,
    );
    console.log(
      `  ${"path".padEnd(28)} ${"messages".padStart(8)} ${"seconds".padStart(10)} ${"deliveries/s".padStart(14)}`,
    );
    console.log(row("relay (wrangler dev, API)", relay.messages, relay.elapsedMs, relay.deliveriesPerSecond));
    console.log(
      row(
        `Postfix ${postfix.postfixVersion} (smtp-source)`,
        postfix.messages,
        postfix.elapsedMs,
        postfix.deliveriesPerSecond,
      ),
    );
    console.log(`  ratio relay/Postfix: ${ratio.toFixed(3)}`);
    console.log(
      `  relay: API accepted all ${relay.messages} after ${(relay.acceptMs / 1000).toFixed(1)} s; recipients ${JSON.stringify(relay.states)}`,
    );
    console.log(
      `  Postfix: ${postfix.sessions} submission sessions; maillog accepted=${postfix.log.accepted} sent=${postfix.log.sent} (warm-up included)`,
    );
    console.log("  (shared CPU: compare within one run only)");
    if (cli.json) {
      console.log(
        JSON.stringify({
          messages: cli.messages,
          relay_deliveries_per_s: Number(relay.deliveriesPerSecond.toFixed(1)),
          postfix_deliveries_per_s: Number(postfix.deliveriesPerSecond.toFixed(1)),
          ratio: Number(ratio.toFixed(4)),
        }),
      );
    }
  } finally {
    await sink.stop();
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exitCode = 1;
});
