/*
 * npm run bench:mix [-- --domains N] [--sustained N] [--saturation N] [--rate R] [--saturation-rate R]
 *                      [--metered N] [--metered-phase sustained|saturation] [--only relay|floor|postfix] [--var NAME=value …] [--floor [--rungs d1,hops]] [--profile] [--ci] [--json]
 *
 * Real traffic: the relay and a private Postfix deliver the same arrival stream to the same mail
 * world of many domains (bench/world/), in the same run, one after the other.
 *
 * What it does
 *   Builds the world (world.ts: 2,000 domains by default, Zipf popularity, greylisting, session
 *   limits, slow, strict, dead, silent and flaky domains), starts its DoH resolver (doh.ts) and its
 *   SMTP sink (sink.ts, one listener per domain on 127.77.x.y, one port), draws two arrival streams
 *   (arrivals.ts: single POST /emails with Poisson arrivals, some 10-recipient messages and some
 *   batches), then for each side (sides.ts), relay first:
 *     a warm-up of 20 messages to the big domains, not measured;
 *     saturation  --saturation messages (2,500) at --saturation-rate (400/s), faster than either
 *                 side delivers: deliveries/s (phase.ts says how each figure is taken);
 *     sustained   --sustained messages (2,500) at --rate messages/s (by default just over half the relay's
 *                 saturation rate in this run, in recipients a second, so that both keep up on a
 *                 machine whose speed varies with its other work): latency from arrival to delivery for
 *                 well-behaved domains, 429s at accept, CPU of the side's own processes per
 *                 email (the relay's meter is off, as deployed).
 *   Each side gets at most 32 requests (relay: HTTP; Postfix: SMTP connections) in flight. Both use
 *   back-off 5 s / 20 s (the world's greylist delay is 5 s, as postgrey's default delay equals
 *   Postfix's default back-off of 300 s) and the same connect and greeting timeouts (5 s, 10 s).
 *   Then a metered pass: a fresh relay with the meter on gets --metered messages (1,000) of the
 *   sustained stream, for DO requests and objects per email (by class and by method) and $ per
 *   million operations; --metered-phase saturation meters the saturation stream's first --metered
 *   messages instead (where batching differs), which also prices that load.
 *   --var NAME=value overrides a wrangler.toml [vars] value of the relay (printed with the figures);
 *   --profile takes a CPU profile of the relay's sustained phase (MIX_PROFILE_PHASE=saturation: of
 *   that phase) and charges it to object classes (world/class-profile.ts): the profiler slows the
 *   relay, so its figures are not the run's.
 *   --floor runs a third side between the two, the floor (bench/floor/worker.ts): the least a relay on
 *   Workers does per email (accept, one object's SQLite, one SMTP transaction), on the same
 *   workerd; its saturation rate against Postfix's is floor_ratio, the most any design could
 *   reach on this runtime and machine. --rungs adds promises to it, one at a time (its header).
 *   Everything is loopback; everything started is stopped.
 *
 * Output
 *   A table per phase and side, and with --json a last line:
 *   {"domains","messages","relay_deliveries_per_s","postfix_deliveries_per_s","ratio",
 *    "relay_p50_good_s","relay_p99_good_s","postfix_p50_good_s","postfix_p99_good_s",
 *    "relay_429_sustained","relay_cpu_ms_per_email","postfix_cpu_ms_per_email",
 *    "relay_deferred_pct","postfix_deferred_pct","usd_per_million_all_in", …extra keys}
 *   ratio and deliveries/s come from the saturation phase; latencies, 429s and CPU from the
 *   sustained phase; deferred % and greylisted recipients refused twice from both.
 *   usd_per_million_all_in: bench:cost's pricing (bench/lib/cost-price.ts allIn) of the metered
 *   pass, every part in "all_in": operations to delivery, each object's billed active time, the
 *   bytes held at the default retention, and the sustained phase's relay CPU per email (workerd
 *   and wrangler: an upper bound of Workers CPU). The pass ends at delivery, so the operations
 *   after it (retention's deletes, the sweeps) are not in it ("all_in_after_delivery": false):
 *   bench:cost's `mix` case counts a message of the same world over its whole life.
 *   --ci: 300 domains, 300 + 300 messages, no metered pass (under 2 minutes); exits 1 when a
 *   recipient was lost or delivered twice, or a phase timed out.
 *
 * Assumptions
 *   Postfix installed and run as root (scripts/postfix/install.sh; the npm script runs it first),
 *   Linux /proc for CPU. The machine is shared: compare the two sides within one run only.
 */
import { generateArrivals, streamStats, type Arrival } from "./world/arrivals";
import { startWorldDoh } from "./world/doh";
import { opsOf, readMeter, resetMeter, type OpsPerEmail } from "./world/ops-meter";
import { deliverable, runPhase, type PhaseContext, type PhaseResult } from "./world/phase";
import { printPhases, summary } from "./world/report";
import { startPostfixSide, startRelaySide, type MixSide, type Timers } from "./world/sides";
import { startWorldSink } from "./world/sink";
import { startFloorSide } from "./world/floor-side";
import { createWorld, kindCounts } from "./world/world";
import { startClassProfile } from "./world/class-profile";
import type { DevServer } from "../scripts/lib/dev-server";
import { postfixUnavailableReason } from "../test/e2e/postfix/harness";
import { mixArgs } from "./world/mix-args";

const { values, CFG, VARS } = mixArgs(import.meta.url);
const CI = values.ci;
const TIMERS: Timers = { minimalBackoff: 5, maximalBackoff: 20, connectTimeout: 5, heloTimeout: 10 };
const CONCURRENCY = 32;
const PHASE_LIMIT_MS = 6 * 60_000;
const SETTLE_MS = 3000;
const log = (line: string) => console.error(line);

/** 20 one-recipient messages to the big domains, delivered before anything is measured. */
async function warmUp(side: MixSide, ctx: PhaseContext): Promise<void> {
  const big = ctx.world.domains.slice(0, ctx.world.config.bigDomains);
  const arrivals: Arrival[] = Array.from({ length: 20 }, (_, i) => ({
    atMs: 0,
    kind: "single",
    messages: [{ id: `w${side.name}${i}`, to: [`warm${side.name}${i}@${big[i % big.length]!.name}`] }],
  }));
  ctx.sink.reset();
  await Promise.all(arrivals.map((a) => side.send(a)));
  await ctx.sink.waitFor((s) => s.delivered >= 20, 120_000);
}

/**
 * Runs both phases on one side: saturation first, then sustained, whose stream `sustained()`
 * draws (at a rate set from the relay's saturation rate, unless --rate).
 */
async function measure(
  side: MixSide,
  ctx: PhaseContext,
  saturation: Arrival[],
  sustained: (satRate: number) => Arrival[],
): Promise<PhaseResult[]> {
  await warmUp(side, ctx);
  const out: PhaseResult[] = [];
  for (const phase of ["saturation", "sustained"] as const) {
    if (phase === "saturation" && saturation.length === 0) continue; // --saturation 0 (with --rate)
    const arrivals = phase === "saturation" ? saturation : sustained(out[0]?.deliveriesPerS ?? 0);
    log(`  ${side.name}: ${phase}, ${arrivals.length} requests`);
    const profile =
      values.profile && phase === (process.env.MIX_PROFILE_PHASE ?? "sustained") && "server" in side
        ? await startClassProfile(side.server as DevServer)
        : null;
    const r = await runPhase(side, ctx, arrivals, {
      phase,
      concurrency: CONCURRENCY,
      timeoutMs: PHASE_LIMIT_MS,
      settleMs: SETTLE_MS,
      log,
    });
    if (profile) r.classes = await profile.stop();
    out.push(r);
  }
  return out;
}

/**
 * The sustained rate when --rate is not given: this share of the relay's saturation rate
 * (recipients delivered a second; the saturation stream's messages carry 1.28 recipients each,
 * the sustained stream's 1.24: a little over half, so that the sustained phase is at least half).
 */
const AUTO_RATE_SHARE = 0.52;

/** The metered pass: a fresh relay with the meter on, part of the sustained stream. */
async function metered(
  ctx: PhaseContext,
  stream: Arrival[],
  sinkPort: number,
): Promise<OpsPerEmail & { messages: number; phase: string }> {
  const arrivals: Arrival[] = [];
  let n = 0;
  for (const a of stream) {
    if (n >= CFG.metered) break;
    arrivals.push(a);
    n += a.messages.length;
  }
  const side = await startRelaySide({ sinkPort, dohUrl: ctx.doh.url, timers: TIMERS, meter: true, vars: VARS });
  try {
    await warmUp(side, ctx);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    await resetMeter(side.server);
    const before = await readMeter(side.server);
    await runPhase(side, ctx, arrivals, {
      phase: "metered",
      concurrency: CONCURRENCY,
      timeoutMs: PHASE_LIMIT_MS,
      settleMs: SETTLE_MS,
      log,
    });
    return { ...opsOf(before, await readMeter(side.server), n), messages: n, phase: CFG.meteredPhase };
  } finally {
    await side.stop();
  }
}

async function main(): Promise<number> {
  const only = values.only;
  const reason = only === "relay" || only === "floor" ? null : postfixUnavailableReason();
  if (reason) throw new Error(reason);
  const world = createWorld({ domains: CFG.domains, seed: CFG.seed, ...(CI ? { backAfterMs: 8000 } : {}) });
  const [doh, sink] = [await startWorldDoh(world), await startWorldSink(world)];
  const ctx: PhaseContext = { world, sink, doh };
  const started = Date.now();
  try {
    const saturation = generateArrivals(world, {
      messages: CFG.saturation,
      ratePerSec: CFG.saturationRate,
      prefix: "x",
      seed: CFG.seed + 2,
    });
    // One sustained stream for both sides, drawn once its rate is known.
    let sustained: Arrival[] | null = null;
    let rate = CFG.rate ?? 0;
    const sat = streamStats(saturation);
    const rcptsPerMessage = sat.messages > 0 ? sat.recipients / sat.messages : 1;
    const sustainedAt = (relaySat: number) => {
      if (sustained) return sustained;
      rate = CFG.rate ?? Math.max(1, Math.round(((relaySat * AUTO_RATE_SHARE) / rcptsPerMessage) * 10) / 10);
      sustained = generateArrivals(world, {
        messages: CFG.sustained,
        ratePerSec: rate,
        prefix: "s",
        seed: CFG.seed + 1,
      });
      log(
        `  sustained stream at ${rate} messages/s${CFG.rate === null ? ` (${AUTO_RATE_SHARE} of the relay's saturation rate, in recipients)` : ""}`,
      );
      return sustained;
    };
    log(
      `bench:mix: world of ${world.domains.length} domains ${JSON.stringify(kindCounts(world))}, sink on port ${sink.port}`,
    );
    log(`  saturation stream: ${JSON.stringify(sat)}`);
    if (Object.keys(VARS).length > 0) console.log(`relay --var ${JSON.stringify(VARS)}`);
    const results: PhaseResult[] = [];
    const starts: [boolean, () => Promise<MixSide>][] = [
      [
        only === undefined || only === "relay",
        () => startRelaySide({ sinkPort: sink.port, dohUrl: doh.url, timers: TIMERS, vars: VARS }),
      ],
      [values.floor || only === "floor", () => startFloorSide(world, { sinkPort: sink.port, rungs: values.rungs })],
      [
        only === undefined || only === "postfix",
        () => startPostfixSide(world, { sinkPort: sink.port, timers: TIMERS, connections: CONCURRENCY }),
      ],
    ];
    for (const [wanted, start] of starts) {
      if (!wanted) continue;
      const side = await start();
      try {
        results.push(...(await measure(side, ctx, saturation, sustainedAt)));
      } finally {
        await side.stop();
      }
    }
    const all = [...(sustained ?? []), ...saturation];
    const stats = streamStats(all);
    const undeliverable = all
      .flatMap((a) => a.messages.flatMap((m) => m.to))
      .filter((r) => !deliverable(world, r)).length;
    log(`  streams: ${JSON.stringify(stats)}; ${undeliverable} recipients never deliverable`);
    const ops =
      (only !== undefined && only !== "relay") || CFG.metered === 0
        ? null
        : await metered(ctx, CFG.meteredPhase === "saturation" ? saturation : (sustained ?? []), sink.port);
    printPhases(results, ops);
    const out = {
      ...summary({ world, stats, results, ops, cfg: { ...CFG, rate }, timers: TIMERS }),
      ...(Object.keys(VARS).length > 0 ? { relay_vars: VARS } : {}),
    };
    console.log(`(${((Date.now() - started) / 1000).toFixed(0)} s in all)`);
    if (values.json) console.log(JSON.stringify(out));
    const bad = results.filter((r) => r.timedOut || r.duplicates > 0 || r.missing > 0);
    for (const r of bad) {
      console.log(
        `PROBLEM: ${r.side} ${r.phase}: timed out ${r.timedOut}, missing ${r.missing} ${r.missingSample.join(", ")}, duplicates ${r.duplicates}`,
      );
    }
    return CI && bad.length > 0 ? 1 : 0;
  } finally {
    await sink.stop();
    await doh.close();
  }
}

try {
  process.exitCode = await main();
} catch (e) {
  console.error(e instanceof Error ? (e.stack ?? e.message) : String(e));
  process.exitCode = 1;
}
