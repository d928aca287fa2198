/*
 * NAME
 *   report - human-readable tables and JSON summaries of the simulator's scenarios
 * DESCRIPTION
 *   formatLimiter() / limiterJson() and formatBulkSmall() / bulkSmallJson() turn scenario
 *   results into the lines the CLI prints and the one JSON object it prints last with
 *   --json. formatAudit() gives the "invariants: ok" line (or the violations).
 * INVARIANTS
 *   JSON numbers: percentages with one decimal, seconds and concurrencies with two.
 * ERRORS
 *   None.
 */
import type { Audit } from "./audit";
import type { BulkSmallReport, BulkSmallRun } from "./bulk-small";
import { README_LIMITER, type LimiterOptions, type LimiterRun } from "./limiter";
import { round1, round2, type Summary } from "./stats";

const pad = (s: string | number, n: number) => String(s).padStart(n);
const padEnd = (s: string, n: number) => s.padEnd(n);
const pctText = (x: number) => `${x.toFixed(1)} %`;

/** "1/6 = 16.7 %" when the fraction is a unit fraction, else "16.7 %". */
function fractionText(f: number): string {
  const k = Math.round(1 / f);
  return Math.abs(1 / f - k) < 0.02 ? `1/${k} = ${pctText(100 * f)}` : pctText(100 * f);
}

/** The limiter table and notes. */
export function formatLimiter(runs: readonly LimiterRun[], opts: LimiterOptions): string[] {
  const entries = Math.ceil(opts.recipients / 2);
  const reject = opts.rejectDelaySec === 0 ? "at once" : `after ${opts.rejectDelaySec} s`;
  const out = [
    "== limiter: concurrency feedback against an active concurrency limiter (spec §6.7) ==",
    `${opts.recipients} recipients in one message to one destination; the server holds ${opts.serverLimit} sessions and answers 421 ${reject} beyond that;`,
    `${opts.perRcptLatencySec} s per recipient (±${Math.round(opts.jitter * 100)} %), ` +
      `recipient limit 2 (${entries} entries); client concurrency limit 20, initial 5,`,
    `failed-cohort limit 0; undelivered recipients are re-admitted after ${opts.retryDelaySec} s (min = max backoff). Seed ${opts.seed}.`,
    "",
    `${padEnd("", 19)} ${padEnd("this simulation, first pass", 40)} ${padEnd("all passes", 16)} ${padEnd("seed README", 22)} predicted defer rate`,
    `${padEnd("feedback", 19)} ${pad("tries", 5)} ${pad("421s", 5)} ${pad("deferred", 8)} ` +
      `${pad("conc mean±sd", 12)} ${pad("window", 6)} ${pad("deferred", 8)} ` +
      `${pad("passes", 6)}  ${pad("deferred", 8)} ${pad("conc mean±sd", 12)}  ` +
      `${padEnd("README formula", 16)} core F-LIM`,
  ];
  for (const r of runs) out.push(limiterRow(r));
  const servedNote =
    opts.rejectDelaySec === 0
      ? "a 421 takes no time, so this is also the sessions the server served"
      : "includes attempts waiting for their 421";
  out.push(
    "",
    "deferred = 421 rejections / delivery attempts. conc = entries in flight at the destination, time-weighted over the first pass",
    `  (until its last dispatch; ${servedNote}); window = the core's window, same interval.`,
    'README formula = 1/(1+roundup(1/g(5))); core F-LIM = serial model "a delivery fails iff window > 5" run through the core\'s own',
    "  feedback code, i.e. with Postfix's g/2 and f/2 rounding margins (spec §6.2, §6.3, §10.1).",
    "constant 1: the f/2 margin makes the 421 at window 6 drop it by 2 (to 4), so two successes pass before the next overshoot:",
    "  S S F = 1/3 deferred, not the README's S F = 1/2 (which assumes a drop of exactly 1 per 421).",
    "1/sqrt(N): at N = 5, g = 0.447 opens the window after ceil(1/g - 1/2) = 2 successes, not roundup(1/g) = 3: S S F = 1/3, not 1/4.",
  );
  return out;
}

function limiterRow(r: LimiterRun): string {
  const readme = README_LIMITER[r.feedback];
  const conc = `${r.concurrency.mean.toFixed(2)}±${r.concurrency.stddev.toFixed(2)}`;
  return [
    padEnd(r.feedback, 19),
    pad(r.firstPass.attempts, 5),
    pad(r.firstPass.rejected, 5),
    pad(pctText(r.firstPass.deferredPct), 8),
    pad(conc, 12),
    pad(r.window.mean.toFixed(2), 6),
    pad(pctText(r.allPasses.deferredPct), 8),
    pad(r.allPasses.passes, 6),
    "",
    pad(pctText(readme.deferredPct), 8),
    pad(`${readme.mean.toFixed(2)}±${readme.stddev.toFixed(2)}`, 12),
    "",
    padEnd(fractionText(r.predicted.readme), 16),
    fractionText(r.predicted.coreSerial),
  ].join(" ");
}

/** The limiter JSON object (first-pass figures). */
export function limiterJson(runs: readonly LimiterRun[]): object {
  return {
    scenario: "limiter",
    results: runs.map((r) => ({
      feedback: r.feedback,
      deferred_pct: round1(r.firstPass.deferredPct),
      concurrency_mean: round2(r.concurrency.mean),
      concurrency_stddev: round2(r.concurrency.stddev),
    })),
  };
}

/** The bulk-small table and notes. */
export function formatBulkSmall(rep: BulkSmallReport): string[] {
  const o = rep.opts;
  const row = (name: string, s: Summary) =>
    `${padEnd(name, 16)} ${[s.p50, s.p90, s.p99, s.max, s.mean].map((v) => pad(v.toFixed(2), 8)).join(" ")}`;
  const ratio = (k: "p50" | "p90" | "p99" | "max" | "mean") => rep.off.smallLatency[k] / rep.on.smallLatency[k];
  return [
    "== bulk-small: small messages behind a bulk job, preemption on vs off (spec §5) ==",
    `1 bulk message of ${o.bulkRecipients} recipients over ${o.bulkDestinations} destinations at t=0, then ${o.smallMessages} single-recipient messages`,
    `(Poisson, mean gap ${o.smallMeanGapSec} s, last ` +
      `at ${rep.lastSmallArrivalSec.toFixed(1)} s) to ${o.smallDestinations} other ` +
      `destinations; process_limit ${o.processLimit}, recipient limit ${o.recipientLimit},`,
    `${o.perRcptLatencySec} s per recipient (±${Math.round(o.jitter * 100)} %), servers unlimited. Same arrivals in both runs; seed ${o.seed}.`,
    "",
    "small-message latency, arrival -> delivered (s):",
    `${padEnd("", 16)} ${["p50", "p90", "p99", "max", "mean"].map((h) => pad(h, 8)).join(" ")}`,
    row("preemption on", rep.on.smallLatency),
    row("preemption off", rep.off.smallLatency),
    `${padEnd("ratio off/on", 16)} ${(["p50", "p90", "p99", "max", "mean"] as const).map((k) => pad(`${ratio(k).toFixed(0)}x`, 8)).join(" ")}`,
    "",
    `bulk message fully delivered at ${rep.on.bulkDoneSec.toFixed(1)} s with preemption, ${rep.off.bulkDoneSec.toFixed(1)} s without.`,
    "on: delivery_slot_cost 5 (default), a small job preempts the bulk job at the next free agent; off: delivery_slot_cost 0,",
    "  a small job waits in FIFO order until every bulk entry has been selected.",
  ];
}

function latencyJson(r: BulkSmallRun): object {
  const s = r.smallLatency;
  return { p50: round2(s.p50), p90: round2(s.p90), p99: round2(s.p99), max: round2(s.max), mean: round2(s.mean) };
}

/** The bulk-small JSON object. */
export function bulkSmallJson(rep: BulkSmallReport): object {
  return {
    scenario: "bulk-small",
    small_latency_s: { preemption_on: latencyJson(rep.on), preemption_off: latencyJson(rep.off) },
    ratio_off_on: {
      p50: round1(rep.off.smallLatency.p50 / rep.on.smallLatency.p50),
      p99: round1(rep.off.smallLatency.p99 / rep.on.smallLatency.p99),
    },
    bulk_done_s: { preemption_on: round2(rep.on.bulkDoneSec), preemption_off: round2(rep.off.bulkDoneSec) },
  };
}

/** "invariants: ok" or the violations. */
export function formatAudit(audits: readonly Audit[]): { ok: boolean; lines: string[] } {
  const bad = audits.flatMap((a) => a.describeViolations());
  const lines =
    bad.length === 0
      ? [
          `invariants: ok (${audits.length} runs; window respected at every dispatch; every recipient delivered exactly once)`,
        ]
      : ["invariants: VIOLATED", ...bad.map((l) => `  ${l}`)];
  return { ok: bad.length === 0, lines };
}
