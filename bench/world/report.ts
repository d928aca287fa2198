/**
 * bench:mix's output: the human table of every phase and side, and the JSON summary whose keys
 * are issue 41's contract.
 *
 * DESCRIPTION
 *   printPhases(results, ops)  one table of the phases side by side, CPU by process, and the
 *                              relay's operations per email from the metered pass.
 *   summary(...)               the JSON object (see bench/mix.ts's header).
 */
import type { Arrival } from "./arrivals";
import type { OpsPerEmail } from "./ops-meter";
import { allIn } from "../lib/cost-price";
import { HOLD } from "../lib/cost-report";
import type { PhaseResult } from "./phase";
import type { Timers } from "./sides";
import type { World } from "./world";

const r1 = (n: number) => Math.round(n * 10) / 10;
const r3 = (n: number) => Math.round(n * 1000) / 1000;
const s3 = (ms: number) => r3(ms / 1000);

/** Prints the table (see the header). */
export function printPhases(
  results: PhaseResult[],
  ops: (OpsPerEmail & { messages: number; phase?: string }) | null,
): void {
  const cols: [string, (r: PhaseResult) => string][] = [
    ["messages / recipients", (r) => `${r.messages} / ${r.recipients}`],
    ["requests", (r) => String(r.requests)],
    ["played in s", (r) => r1(r.playedMs / 1000).toString()],
    ["done after s", (r) => `${r1(r.elapsedMs / 1000)}${r.timedOut ? " (timed out)" : ""}`],
    ["deliverable / delivered", (r) => `${r.deliverable} / ${r.delivered}`],
    ["missing / duplicates", (r) => `${r.missing} / ${r.duplicates}`],
    ["deliveries/s", (r) => r1(r.deliveriesPerS).toString()],
    ["deliveries/s to 95 % of good", (r) => r1(r.deliveriesPerS95).toString()],
    ["good latency p50 s", (r) => s3(r.latencyMs.p50).toString()],
    ["good latency p90 s", (r) => s3(r.latencyMs.p90).toString()],
    ["good latency p99 s", (r) => s3(r.latencyMs.p99).toString()],
    ["good latency max s", (r) => s3(r.latencyMs.max).toString()],
    ["accept answer p50 / p99 s", (r) => `${s3(r.acceptMs.p50)} / ${s3(r.acceptMs.p99)}`],
    [
      "arrival→MX query / →delivery ms",
      (r) => {
        const b = r.breakdownMs;
        return b.n ? `${b.toLookup} / ${b.lookupToDelivery} (${b.n})` : "-";
      },
    ],
    ["429s at accept", (r) => String(r.refused429)],
    ["request errors", (r) => String(r.requestErrors)],
    ["CPU s (own processes)", (r) => r1(r.cpu.totalMs / 1000).toString()],
    ["CPU ms per email", (r) => r1(r.cpuMsPerEmail).toString()],
    ["deferred %", (r) => r1(r.deferredPct).toString()],
    ["451 greylist / refused twice", (r) => `${r.sink.rcptGreylisted} / ${r.sink.greylistRefusedTwice}`],
    ["421 at greeting", (r) => String(r.sink.refused421)],
    ["reset / silent connections", (r) => `${r.sink.refusedConnections} / ${r.sink.silentConnections}`],
    ["550 unknown user", (r) => String(r.sink.rcptUnknown)],
    ["sessions opened", (r) => String(r.sink.sessions)],
    ["sessions per delivery", (r) => r3(r.sessionsPerDelivery).toString()],
    ["most sessions open", (r) => String(r.sink.maxOpen)],
    ["idle gap p50 / mean ms", (r) => `${r1(r.idleGapMs.p50)} / ${r1(r.idleGapMs.mean)} (${r.idleGapMs.n})`],
    ["DNS queries", (r) => JSON.stringify(r.dnsQueries)],
  ];
  const head = results.map((r) => `${r.side} ${r.phase}`);
  const w = Math.max(24, ...head.map((h) => h.length + 2));
  console.log(`\n${"".padEnd(30)}${head.map((h) => h.padStart(w)).join("")}`);
  for (const [name, f] of cols) console.log(`${name.padEnd(30)}${results.map((r) => f(r).padStart(w)).join("")}`);
  for (const r of results) {
    const top = Object.entries(r.cpu.byCommand)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 8)
      .map(([k, v]) => `${k} ${r1(v / 1000)}`);
    console.log(`  CPU s by process, ${r.side} ${r.phase}: ${top.join(", ")}`);
  }
  for (const r of results) console.log(`  slowest well-behaved, ${r.side} ${r.phase}: ${r.slowest.join("; ")}`);
  for (const r of results) {
    if (!r.classes) continue;
    const total = r.classes.sampledMs;
    const busy = Object.entries(r.classes.byClass)
      .filter(([k]) => k !== "(idle)")
      .sort((a, b) => b[1] - a[1]);
    const busyMs = busy.reduce((a, [, v]) => a + v, 0);
    const busyPct = r1((100 * busyMs) / total);
    console.log(
      `  profiled CPU of the Worker thread, ${r.side} ${r.phase}: ${r1(total / 1000)} s sampled, ${busyPct} % busy; ms per email by class:`,
    );
    for (const [k, v] of busy) {
      console.log(
        `    ${k.padEnd(20)} ${r3(v / r.messages)
          .toString()
          .padStart(8)}  (${r1((100 * v) / busyMs)} %)`,
      );
      if (!process.env.MIX_PROFILE_TOP) continue;
      for (const f of r.classes.top[k] ?? [])
        console.log(
          `        ${r3(f.ms / r.messages)
            .toString()
            .padStart(8)}  ${f.fn}  ${f.module}`,
        );
    }
  }
  if (ops) {
    console.log(
      `\nrelay, metered pass (${ops.messages} messages of the ${ops.phase ?? "sustained"} stream, meter on):`,
    );
    console.log(`  DO requests per email ${ops.do_requests}: ${JSON.stringify(ops.do_requests_by_class)}`);
    console.log(`  by method: ${JSON.stringify(ops.do_requests_by_method)}`);
    console.log(`  rows and SQL statements by store: ${JSON.stringify(ops.by_store)}`);
    console.log(`  statements reading the most rows: ${JSON.stringify(ops.top_statements.rows_read)}`);
    console.log(`  statements run the most: ${JSON.stringify(ops.top_statements.runs)}`);
    console.log(`  D1 statements run the most: ${JSON.stringify(ops.top_statements.d1_runs)}`);
    console.log(`  DO objects created per class: ${JSON.stringify(ops.do_objects_created)}`);
    console.log(
      `  rows written ${ops.rows_written}, rows read ${ops.rows_read}, queue ops ${ops.queue_ops} per email; ` +
        `$ per million (operations only) ${ops.usd_per_million_ops}`,
    );
  }
}

/** The JSON summary (see bench/mix.ts's header). */
export function summary(o: {
  world: World;
  stats: { messages: number; recipients: number; domains: number };
  results: PhaseResult[];
  ops: (OpsPerEmail & { messages: number; phase?: string }) | null;
  cfg: { sustained: number; saturation: number; rate: number; saturationRate: number };
  timers: Timers;
}): Record<string, unknown> {
  const get = (side: string, phase: string) => o.results.find((r) => r.side === side && r.phase === phase) ?? null;
  const [rs, rx, ps, px] = [
    get("relay", "sustained"),
    get("relay", "saturation"),
    get("postfix", "sustained"),
    get("postfix", "saturation"),
  ];
  const both = (side: string) => o.results.filter((r) => r.side === side && r.phase !== "metered");
  const deferred = (side: string) => {
    let [d, a] = [0, 0];
    for (const r of both(side)) {
      const def = r.sink.rcptGreylisted + r.sink.refused421 + r.sink.refusedConnections + r.sink.silentConnections;
      d += def;
      a += def + r.sink.rcptAccepted + r.sink.rcptUnknown;
    }
    return a > 0 ? r1((100 * d) / a) : null;
  };
  const twice = (side: string) =>
    both(side).length ? both(side).reduce((n, r) => n + r.sink.greylistRefusedTwice, 0) : null;
  const greylisted = (side: string) =>
    both(side).length ? both(side).reduce((n, r) => n + r.sink.greylistRefused, 0) : null;
  const ops = o.ops?.usd_per_million_ops ?? null;
  const bill =
    o.ops && rs ? allIn({ ...o.ops.bill, wholeLife: o.ops.bill.toDelivery, cpuMs: rs.cpuMsPerEmail, ...HOLD }) : null;
  return {
    domains: o.stats.domains,
    messages: o.stats.messages,
    relay_deliveries_per_s: rx ? r1(rx.deliveriesPerS) : null,
    postfix_deliveries_per_s: px ? r1(px.deliveriesPerS) : null,
    ratio: rx && px && px.deliveriesPerS > 0 ? r3(rx.deliveriesPerS / px.deliveriesPerS) : null,
    relay_p50_good_s: rs ? s3(rs.latencyMs.p50) : null,
    relay_p99_good_s: rs ? s3(rs.latencyMs.p99) : null,
    postfix_p50_good_s: ps ? s3(ps.latencyMs.p50) : null,
    postfix_p99_good_s: ps ? s3(ps.latencyMs.p99) : null,
    relay_429_sustained: rs ? rs.refused429 : null,
    relay_cpu_ms_per_email: rs ? r1(rs.cpuMsPerEmail) : null,
    postfix_cpu_ms_per_email: ps ? r1(ps.cpuMsPerEmail) : null,
    relay_deferred_pct: deferred("relay"),
    postfix_deferred_pct: deferred("postfix"),
    usd_per_million_all_in: bill?.usd_per_million_all_in ?? null,
    relay_deliveries_per_s_95: rx ? r1(rx.deliveriesPerS95) : null,
    postfix_deliveries_per_s_95: px ? r1(px.deliveriesPerS95) : null,
    ratio_95: rx && px && px.deliveriesPerS95 > 0 ? r3(rx.deliveriesPerS95 / px.deliveriesPerS95) : null,
    all_in: bill?.parts ?? null,
    all_in_after_delivery: false,
    usd_per_million_ops: ops,
    world_domains: o.world.domains.length,
    recipients: o.stats.recipients,
    sustained_messages: o.cfg.sustained,
    sustained_rate: o.cfg.rate,
    saturation_messages: o.cfg.saturation,
    saturation_rate: o.cfg.saturationRate,
    // Both in recipients a second: the sustained stream's messages carry rcpts/messages each.
    sustained_rate_share_of_relay_saturation:
      rx && rs && rx.deliveriesPerS > 0 ? r3((o.cfg.rate * rs.recipients) / rs.messages / rx.deliveriesPerS) : null,
    relay_greylisted: greylisted("relay"),
    postfix_greylisted: greylisted("postfix"),
    relay_greylist_refused_twice: twice("relay"),
    postfix_greylist_refused_twice: twice("postfix"),
    relay_p90_good_s: rs ? s3(rs.latencyMs.p90) : null,
    postfix_p90_good_s: ps ? s3(ps.latencyMs.p90) : null,
    relay_429_saturation: rx ? rx.refused429 : null,
    relay_accept_p50_s: rs ? s3(rs.acceptMs.p50) : null,
    relay_accept_p99_s: rs ? s3(rs.acceptMs.p99) : null,
    relay_breakdown_ms_sustained: rs ? rs.breakdownMs : null,
    relay_cpu_ms_per_email_saturation: rx ? r1(rx.cpuMsPerEmail) : null,
    postfix_cpu_ms_per_email_saturation: px ? r1(px.cpuMsPerEmail) : null,
    relay_sessions_per_delivery: rx ? r3(rx.sessionsPerDelivery) : null,
    postfix_sessions_per_delivery: px ? r3(px.sessionsPerDelivery) : null,
    relay_idle_gap_ms_mean: rx ? r1(rx.idleGapMs.mean) : null,
    postfix_idle_gap_ms_mean: px ? r1(px.idleGapMs.mean) : null,
    ...floorKeys(get("floor", "saturation"), get("floor", "sustained"), rx, px),
    relay_dns_mx_queries_sustained: rs ? (rs.dnsQueries.MX ?? 0) : null,
    lost: o.results.reduce((n, r) => n + r.missing, 0),
    duplicates: o.results.reduce((n, r) => n + r.duplicates, 0),
    do_requests_per_email: o.ops?.do_requests ?? null,
    do_requests_per_email_by_class: o.ops?.do_requests_by_class ?? null,
    do_requests_per_email_by_method: o.ops?.do_requests_by_method ?? null,
    rows_per_email_by_store: o.ops?.by_store ?? null,
    metered_phase: o.ops ? (o.ops.phase ?? "sustained") : null,
    do_objects_created: o.ops?.do_objects_created ?? null,
    timers_s: o.timers,
    ...(rs?.classes
      ? {
          relay_profiled_ms_per_email_by_class: Object.fromEntries(
            Object.entries(rs.classes.byClass)
              .filter(([k]) => k !== "(idle)")
              .map(([k, v]) => [k, r3(v / rs.messages)]),
          ),
        }
      : {}),
  };
}

/** Messages in a stream (for callers that cut one). */
export const messagesOf = (arrivals: readonly Arrival[]) => arrivals.reduce((n, a) => n + a.messages.length, 0);

/** bench:mix --floor's keys: the floor's rates and CPU, and the ratios that place the relay and Postfix against it. */
function floorKeys(
  fx: PhaseResult | null,
  fs: PhaseResult | null,
  rx: PhaseResult | null,
  px: PhaseResult | null,
): Record<string, number | null> {
  if (!fx) return {};
  const ratio = (a: PhaseResult | null, b: PhaseResult | null) =>
    a && b && b.deliveriesPerS > 0 ? r3(a.deliveriesPerS / b.deliveriesPerS) : null;
  return {
    floor_deliveries_per_s: r1(fx.deliveriesPerS),
    floor_ratio: ratio(fx, px),
    floor_deliveries_per_s_95: r1(fx.deliveriesPerS95),
    floor_ratio_95: fx && px && px.deliveriesPerS95 > 0 ? r3(fx.deliveriesPerS95 / px.deliveriesPerS95) : null,
    relay_share_of_floor: ratio(rx, fx),
    floor_cpu_ms_per_email_saturation: r1(fx.cpuMsPerEmail),
    floor_cpu_ms_per_email: fs ? r1(fs.cpuMsPerEmail) : null,
    floor_p50_good_s: fs ? s3(fs.latencyMs.p50) : null,
    floor_p99_good_s: fs ? s3(fs.latencyMs.p99) : null,
  };
}
