/**
 * One measured phase of bench:mix: an arrival stream played into one side (sides.ts) against the
 * world's sink, measured by the sink (delivery times, refusals, sessions) and by /proc (CPU).
 *
 * DESCRIPTION
 *   runPhase(side, ctx, arrivals, o)  resets the sink's counters and the flaky domains' clock,
 *       plays the stream at its offsets (open loop: each request is made at its time, at most
 *       o.concurrency in flight, as an application with a connection pool), waits until every
 *       deliverable recipient has been delivered (or o.timeoutMs), lets the side settle
 *       o.settleMs, and returns a PhaseResult:
 *     latency       from a recipient's arrival (its request's scheduled time) to its first
 *                   delivery at the sink, for recipients of well-behaved domains (world.ts);
 *     acceptMs      from a request's scheduled time to its answer (the client's wait);
 *     deliveriesPerS recipients delivered from the first arrival until the last well-behaved
 *                   recipient was delivered, per second of that span (a side's rate while it works
 *                   through its backlog; mail held back by awkward domains does not stretch it);
 *     deliveriesPerS95 the same up to the first delivery of the well-behaved recipient at the
 *                   95th percentile of those times: one straggler (a recipient deferred by a
 *                   421 at a busy domain, say) can stretch the span of the last, not this one;
 *     deferredPct   deferrals over attempts, as the server sees them: a deferral is a 451 to a
 *                   RCPT, a 421 greeting, or a connection reset or never greeted; an attempt is
 *                   that or a final reply to a RCPT (250 or 550);
 *     cpuMs         the side's processes' CPU from the first arrival to the end of the settle time;
 *     slowest       the three slowest well-behaved recipients (printed: where a maximum comes from).
 *   deliverable(world, address)  whether the sink will ever take the recipient (not a down or
 *                   silent domain, not an unknown user of a strict one).
 *   quantile(sorted, q)  nearest-rank quantile.
 *
 * INVARIANTS
 *   The same stream, world and sink measure both sides; nothing here depends on which side runs.
 */
import type { Arrival } from "./arrivals";
import type { ClassProfile } from "./class-profile";
import { cpuDelta, type CpuSample } from "./cpu";
import type { WorldDoh } from "./doh";
import type { MixSide } from "./sides";
import type { SinkStats, WorldSink } from "./sink";
import { domainByName, isWellBehaved, type World } from "./world";

/** What a phase measured. */
export interface PhaseResult {
  side: string;
  phase: string;
  requests: number;
  messages: number;
  recipients: number;
  /** First arrival until the last deliverable recipient was delivered (or the timeout), ms. */
  elapsedMs: number;
  /** Span of the arrivals as played, ms. */
  playedMs: number;
  timedOut: boolean;
  deliverable: number;
  delivered: number;
  missing: number;
  /** Up to ten of the missing recipients, with their domain's kind. */
  missingSample: string[];
  /** The three slowest well-behaved recipients: address, seconds from arrival to delivery, and the arrival's offset in the phase. */
  slowest: string[];
  duplicates: number;
  deliveriesPerS: number;
  /** The same, up to the delivery of the well-behaved recipient at the 95th percentile (a few stragglers do not stretch it). */
  deliveriesPerS95: number;
  goodRecipients: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  /** From a request's scheduled arrival to its answer (accepted), ms. */
  acceptMs: { p50: number; p99: number };
  /**
   * Where a well-behaved recipient's time goes, medians in ms, for those whose domain's MX was
   * first asked for after their arrival (the relay's MX look-up is the first thing its delivery
   * agent does): arrival → MX query (accept, admission, scheduling, hand-off) and MX query →
   * delivery (DNS, connection, greeting, transaction). Postfix asks no DNS here: n = 0.
   */
  breakdownMs: { n: number; toLookup: number; lookupToDelivery: number };
  refused429: number;
  requestErrors: number;
  cpu: CpuSample;
  cpuMsPerEmail: number;
  deferredPct: number;
  sink: Omit<SinkStats, "idleGapsMs">;
  idleGapMs: { n: number; p50: number; mean: number };
  sessionsPerDelivery: number;
  dnsQueries: Record<string, number>;
  /** With --profile: the relay's sampled CPU by object class (class-profile.ts). */
  classes?: ClassProfile;
}

/** What a phase needs besides the side. */
export interface PhaseContext {
  world: World;
  sink: WorldSink;
  doh: WorldDoh;
}

/** Phase options. */
export interface PhaseOptions {
  phase: string;
  concurrency: number;
  timeoutMs: number;
  settleMs: number;
  log?: (line: string) => void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Nearest-rank quantile of a sorted list (0 when empty). */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/** Whether the sink will ever take this recipient (see the header). */
export function deliverable(world: World, address: string): boolean {
  const d = domainByName(world, address.slice(address.indexOf("@") + 1));
  if (!d || d.silent || d.refuseUntilMs === null) return false;
  return !(d.rejectsUnknown && address.startsWith("nosuch"));
}

/** Whether the recipient counts for the well-behaved latency. */
function good(world: World, address: string): boolean {
  const d = domainByName(world, address.slice(address.indexOf("@") + 1));
  return d !== undefined && isWellBehaved(d) && !address.startsWith("nosuch");
}

/** Plays the stream into the side (see the header); returns the scheduled time of each recipient. */
/** What play() leaves: each recipient's scheduled time, each request's wait for its answer, errors. */
interface Played {
  at: Map<string, number>;
  acceptMs: number[];
  errors: () => number;
  done: Promise<void>;
}

async function play(side: MixSide, arrivals: readonly Arrival[], concurrency: number, t0: number): Promise<Played> {
  const at = new Map<string, number>();
  const acceptMs: number[] = [];
  let [inFlight, errors] = [0, 0];
  const slots: (() => void)[] = [];
  const all: Promise<void>[] = [];
  for (const a of arrivals) {
    const wait = t0 + a.atMs - Date.now();
    if (wait > 1) await sleep(wait);
    while (inFlight >= concurrency) await new Promise<void>((r) => slots.push(r));
    for (const m of a.messages) for (const r of m.to) at.set(r, t0 + a.atMs);
    inFlight++;
    all.push(
      side
        .send(a)
        .then(
          () => void acceptMs.push(Date.now() - (t0 + a.atMs)),
          (e: unknown) => {
            if (errors++ < 3) console.error(`  ${side.name}: ${e instanceof Error ? e.message : String(e)}`);
          },
        )
        .finally(() => {
          inFlight--;
          slots.shift()?.();
        }),
    );
  }
  return { at, acceptMs, errors: () => errors, done: Promise.all(all).then(() => undefined) };
}

/** Runs one phase (see the header). */
export async function runPhase(
  side: MixSide,
  ctx: PhaseContext,
  arrivals: readonly Arrival[],
  o: PhaseOptions,
): Promise<PhaseResult> {
  const { world, sink, doh } = ctx;
  const log = o.log ?? (() => undefined);
  const addresses = arrivals.flatMap((a) => a.messages.flatMap((m) => m.to));
  const expected = addresses.filter((a) => deliverable(world, a));
  const expectedSet = new Set(expected);
  sink.reset();
  doh.reset();
  sink.startClock();
  const refusedBefore = side.refused();
  const cpu0 = side.cpu();
  const t0 = Date.now() + 50;
  const played = await play(side, arrivals, o.concurrency, t0);
  const playedMs = Date.now() - t0;
  log(`    ${side.name} ${o.phase}: ${arrivals.length} requests played in ${(playedMs / 1000).toFixed(1)} s`);
  await played.done;
  let timedOut = false;
  const countDelivered = () => {
    let n = 0;
    for (const a of sink.deliveries().keys()) if (expectedSet.has(a)) n++;
    return n;
  };
  const progress = setInterval(() => {
    log(
      `    ${side.name} ${o.phase}: ${countDelivered()}/${expected.length} delivered, ${((Date.now() - t0) / 1000).toFixed(0)} s`,
    );
  }, 10_000);
  try {
    await sink.waitFor(() => countDelivered() >= expected.length, Math.max(1000, o.timeoutMs - (Date.now() - t0)));
  } catch {
    timedOut = true;
  } finally {
    clearInterval(progress);
  }
  const doneAt = Date.now();
  await sleep(o.settleMs);
  const cpu = cpuDelta(cpu0, side.cpu());
  const deliveries = sink.deliveries();
  let lastGood = t0;
  const goodFirst: number[] = [];
  const lat: number[] = [];
  const byLatency: [string, number][] = [];
  let goodN = 0;
  for (const a of expected) {
    if (!good(world, a)) continue;
    goodN++;
    const times = deliveries.get(a);
    if (!times) continue;
    lat.push(times[0]! - played.at.get(a)!);
    byLatency.push([a, times[0]! - played.at.get(a)!]);
    lastGood = Math.max(lastGood, times[0]!);
    goodFirst.push(times[0]!);
  }
  goodFirst.sort((x, y) => x - y);
  const t95 = goodFirst.length ? quantile(goodFirst, 0.95) : t0;
  lat.sort((a, b) => a - b);
  const toLookup: number[] = [];
  const afterLookup: number[] = [];
  for (const a of expected) {
    const at = played.at.get(a)!;
    const q = doh.firstMx().get(a.slice(a.indexOf("@") + 1));
    const times = deliveries.get(a);
    if (!good(world, a) || q === undefined || q < at || !times) continue;
    toLookup.push(q - at);
    afterLookup.push(times[0]! - q);
  }
  toLookup.sort((x, y) => x - y);
  afterLookup.sort((x, y) => x - y);
  let [inSpan, in95] = [0, 0];
  for (const times of deliveries.values())
    for (const t of times) {
      if (t <= lastGood) inSpan++;
      if (t <= t95) in95++;
    }
  const { idleGapsMs, ...s } = sink.stats();
  const gaps = [...idleGapsMs].sort((a, b) => a - b);
  const delivered = expected.filter((a) => deliveries.has(a)).length;
  const deferrals = s.rcptGreylisted + s.refused421 + s.refusedConnections + s.silentConnections;
  const attempts = deferrals + s.rcptAccepted + s.rcptUnknown;
  const messages = arrivals.reduce((n, a) => n + a.messages.length, 0);
  return {
    side: side.name,
    phase: o.phase,
    requests: arrivals.length,
    messages,
    recipients: addresses.length,
    elapsedMs: doneAt - t0,
    playedMs,
    timedOut,
    deliverable: expected.length,
    delivered,
    missing: expected.length - delivered,
    duplicates: s.duplicates,
    missingSample: expected
      .filter((a) => !deliveries.has(a))
      .slice(0, 10)
      .map((a) => `${a} (${domainByName(world, a.slice(a.indexOf("@") + 1))?.kind ?? "?"})`),
    slowest: byLatency
      .sort((x, y) => y[1] - x[1])
      .slice(0, 3)
      .map(
        ([a, ms]) => `${a} ${(ms / 1000).toFixed(3)} s (arrived +${((played.at.get(a)! - t0) / 1000).toFixed(1)} s)`,
      ),
    deliveriesPerS: lastGood > t0 ? (inSpan * 1000) / (lastGood - t0) : 0,
    deliveriesPerS95: t95 > t0 ? (in95 * 1000) / (t95 - t0) : 0,
    goodRecipients: goodN,
    latencyMs: { p50: quantile(lat, 0.5), p90: quantile(lat, 0.9), p99: quantile(lat, 0.99), max: lat.at(-1) ?? 0 },
    acceptMs: (() => {
      const a = [...played.acceptMs].sort((x, y) => x - y);
      return { p50: quantile(a, 0.5), p99: quantile(a, 0.99) };
    })(),
    breakdownMs: {
      n: toLookup.length,
      toLookup: Math.round(quantile(toLookup, 0.5)),
      lookupToDelivery: Math.round(quantile(afterLookup, 0.5)),
    },
    refused429: side.refused() - refusedBefore,
    requestErrors: played.errors(),
    cpu,
    cpuMsPerEmail: cpu.totalMs / messages,
    deferredPct: attempts > 0 ? (100 * deferrals) / attempts : 0,
    sink: { ...s },
    idleGapMs: {
      n: gaps.length,
      p50: quantile(gaps, 0.5),
      mean: gaps.length ? gaps.reduce((a, g) => a + g, 0) / gaps.length : 0,
    },
    sessionsPerDelivery: s.transactions > 0 ? s.sessions / s.transactions : 0,
    dnsQueries: doh.queries().byType,
  };
}
