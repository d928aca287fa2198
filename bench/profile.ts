/*
 * npm run profile [-- --messages N] [--top K] [--out FILE]
 *
 * A CPU profile of the relay's Worker (workerd) while it accepts and delivers N one-recipient
 * messages end to end, to see where its single thread spends its time locally.
 *
 * What it does
 *   Starts Postfix's smtp-sink on a free loopback port and a private `wrangler dev` (frozen
 *   bundle) with SMARTHOST = the sink; starts the V8 sampling profiler through wrangler's
 *   inspector port (Chrome DevTools Protocol), POSTs N messages with /emails/batch as bench:e2e
 *   does, waits until the sink has them all, stops the profiler. Prints the functions with the
 *   most self time (and their script and line) and the share of idle time; --out writes the
 *   .cpuprofile (open it in Chrome DevTools). With --json the last line is
 *   {"messages","seconds","deliveries_per_s","busy_share","top":[{fn,url,line,self_ms,share}]}.
 *
 * Assumptions
 *   Postfix's smtp-sink installed (scripts/postfix/install.sh; the npm script runs it first).
 *   Profiling slows the Worker: compare only profiles with each other, never with bench:e2e.
 */
import { writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { buildApiMessages, submitMessages } from "../test/e2e/postfix/relay-api";
import { startSmtpSink, type SmtpSink } from "../test/e2e/postfix/harness";
import { startDevServer, type DevServer } from "../scripts/lib/dev-server";
import { cdp, sampleMs, type Profile } from "../scripts/lib/cdp";
import { commandLine } from "../scripts/lib/command-line";

const { values } = commandLine(import.meta.url, () =>
  parseArgs({
    options: {
      messages: { type: "string", default: "1000" },
      top: { type: "string", default: "25" },
      out: { type: "string" },
      json: { type: "boolean", default: false },
    },
  }),
);
const N = Number(values.messages);
const TOP = Number(values.top);
/** The profiler's sampling interval, µs. */
const SAMPLING_US = 500;

/** Self time per function (ms), from the samples. */
function selfTimes(p: Profile): { fn: string; url: string; line: number; selfMs: number }[] {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  const weights = sampleMs(p, SAMPLING_US);
  for (let i = 0; i < p.samples.length; i++) self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + weights[i]!);
  const byFn = new Map<string, { fn: string; url: string; line: number; selfMs: number }>();
  for (const [id, ms] of self) {
    const f = byId.get(id)!.callFrame;
    const key = `${f.functionName}|${f.url}|${f.lineNumber}`;
    const e = byFn.get(key) ?? {
      fn: f.functionName || "(anonymous)",
      url: f.url.split("/").slice(-2).join("/"),
      line: f.lineNumber + 1,
      selfMs: 0,
    };
    e.selfMs += ms;
    byFn.set(key, e);
  }
  return [...byFn.values()].sort((a, b) => b.selfMs - a.selfMs);
}

async function main(): Promise<void> {
  let sink: SmtpSink | null = null;
  let relay: DevServer | null = null;
  try {
    sink = await startSmtpSink();
    relay = await startDevServer({
      tenant: "profile",
      frozen: true,
      vars: { SMARTHOST: `[${sink.host}]:${sink.port}`, RELAY_TLS: "off" },
    });
    const run = Date.now().toString(36);
    const base = sink.messages();
    await submitMessages(relay, buildApiMessages(20, "example.test", `${run}w`));
    while (sink.messages() < base + 20) await new Promise((r) => setTimeout(r, 200));
    const session = await cdp(relay.inspector);
    await session.send("Profiler.enable");
    await session.send("Profiler.setSamplingInterval", { interval: SAMPLING_US });
    await session.send("Profiler.start");
    const t0 = Date.now();
    await submitMessages(relay, buildApiMessages(N, "example.test", run));
    while (sink.messages() < base + 20 + N) await new Promise((r) => setTimeout(r, 200));
    const seconds = (Date.now() - t0) / 1000;
    const { profile } = (await session.send("Profiler.stop")) as { profile: Profile };
    session.close();
    if (values.out) await writeFile(values.out, JSON.stringify(profile));
    const rows = selfTimes(profile);
    const total = rows.reduce((a, r) => a + r.selfMs, 0);
    const idle = rows.filter((r) => r.fn === "(idle)" || r.fn === "(program)").reduce((a, r) => a + r.selfMs, 0);
    console.log(
      `${N} messages in ${seconds.toFixed(1)} s (${(N / seconds).toFixed(1)}/s under the ` +
        `profiler); sampled ${(total / 1000).toFixed(1)} s, ` +
        `idle/program ${((100 * idle) / total).toFixed(0)} %`,
    );
    const top = rows.filter((r) => r.fn !== "(idle)").slice(0, TOP);
    for (const r of top)
      console.log(
        `  ${r.selfMs.toFixed(0).padStart(7)} ms ${((100 * r.selfMs) / total).toFixed(1).padStart(5)} %  ${r.fn}  ${r.url}:${r.line}`,
      );
    if (values.json)
      console.log(
        JSON.stringify({
          messages: N,
          seconds,
          deliveries_per_s: N / seconds,
          busy_share: 1 - idle / total,
          top: top.map((r) => ({
            fn: r.fn,
            url: r.url,
            line: r.line,
            self_ms: Math.round(r.selfMs),
            share: r.selfMs / total,
          })),
        }),
      );
  } finally {
    await relay?.stop();
    await sink?.stop();
  }
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
