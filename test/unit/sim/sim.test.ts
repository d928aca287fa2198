/**
 * Correctness checks on the discrete-event simulator (bench/sim): qualitative facts its
 * scenarios must show when they drive the real core, the destination models, determinism,
 * and the measuring helpers. Fixed seeds throughout; these are not timing tests.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { BULK_SMALL_DEFAULTS, runBulkSmall, type BulkSmallReport } from "../../../bench/sim/bulk-small";
import { DEFAULT_DESTINATION, DestinationServer, type DestinationSpec } from "../../../bench/sim/destination";
import { runSimulation, type SimMessage, type SimResult } from "../../../bench/sim/engine";
import { EventQueue } from "../../../bench/sim/event-queue";
import {
  idealisedDeferFraction,
  LIMITER_DEFAULTS,
  readmeDeferFraction,
  runLimiter,
  runLimiterOnce,
  type LimiterFeedback,
  type LimiterRun,
} from "../../../bench/sim/limiter";
import { bulkSmallJson, limiterJson } from "../../../bench/sim/report";
import { ceilingJson, runCeiling, type CeilingRun } from "../../../bench/sim/ceiling";
import { createRng } from "../../../bench/sim/rng";
import { StepSeries, summarize } from "../../../bench/sim/stats";

/** Messages of `rcptsEach` recipients to one nexthop, one every `gapSec` seconds. */
function messagesTo(nexthop: string, count: number, rcptsEach: number, gapSec: number): SimMessage[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `m${i}`,
    arriveAt: i * gapSec,
    rcpts: Array.from({ length: rcptsEach }, (_, j) => ({ address: `u${i}x${j}@${nexthop}`, nexthop })),
  }));
}

function outcomes(r: SimResult): Record<string, number> {
  const out: Record<string, number> = {};
  for (const a of r.attempts) out[a.outcome] = (out[a.outcome] ?? 0) + 1;
  return out;
}

function expectAllDeliveredOnce(r: SimResult): void {
  expect(r.audit.describeViolations()).toEqual([]);
  expect(r.store.undeliveredTotal).toBe(0);
  for (const m of r.store.messages.values()) expect(m.deliveredAt.every((t) => t !== null)).toBe(true);
}

describe("limiter scenario", () => {
  let runs: LimiterRun[] = [];
  let byFeedback = new Map<LimiterFeedback, LimiterRun>();
  beforeAll(() => {
    runs = runLimiter();
    byFeedback = new Map(runs.map((r) => [r.feedback, r]));
  });

  it("defers fewer delivery attempts with 1/N feedback than with constant 1", () => {
    expect(byFeedback.get("1/concurrency")!.firstPass.deferredPct).toBeLessThan(
      byFeedback.get("1")!.firstPass.deferredPct,
    );
  });

  it("keeps the 1/N deferred rate near the 1/6 of spec §6.7", () => {
    const pct = byFeedback.get("1/concurrency")!.firstPass.deferredPct;
    expect(pct).toBeGreaterThan(10);
    expect(pct).toBeLessThan(25);
  });

  it("delivers every recipient exactly once in every feedback run", () => {
    for (const r of runs) {
      expect(r.audit.describeViolations()).toEqual([]);
      expect(r.allPasses.attempts - r.allPasses.rejected).toBe(LIMITER_DEFAULTS.recipients / 2);
    }
  });

  it("never lets the server hold more sessions than its limit, and keeps it saturated", () => {
    for (const r of runs) {
      expect(r.serverPeak).toBe(LIMITER_DEFAULTS.serverLimit);
      expect(r.concurrency.mean).toBeGreaterThan(4.5);
      expect(r.concurrency.mean).toBeLessThanOrEqual(LIMITER_DEFAULTS.serverLimit + 1e-9);
    }
  });

  it("agrees with the core's idealised F-LIM arithmetic and differs from the README formula where the margins matter", () => {
    expect(idealisedDeferFraction("1/concurrency", 5)).toBeCloseTo(1 / 6, 3);
    expect(idealisedDeferFraction("1", 5)).toBeCloseTo(1 / 3, 3);
    expect(readmeDeferFraction("1/concurrency", 5)).toBeCloseTo(1 / 6, 9);
    expect(readmeDeferFraction("1/sqrt_concurrency", 5)).toBeCloseTo(1 / 4, 9);
    expect(readmeDeferFraction("1", 5)).toBeCloseTo(1 / 2, 9);
    for (const r of runs) expect(Math.abs(r.firstPass.deferredPct / 100 - r.predicted.coreSerial)).toBeLessThan(0.03);
  });

  it("prints the JSON shape the CLI promises", () => {
    const json = limiterJson(runs) as { scenario: string; results: Record<string, unknown>[] };
    expect(json.scenario).toBe("limiter");
    expect(json.results.map((r) => r.feedback)).toEqual(["1/concurrency", "1/sqrt_concurrency", "1"]);
    for (const r of json.results)
      expect(Object.keys(r).sort()).toEqual(["concurrency_mean", "concurrency_stddev", "deferred_pct", "feedback"]);
  });
});

describe("bulk-small scenario", () => {
  let rep: BulkSmallReport;
  beforeAll(() => {
    rep = runBulkSmall({ ...BULK_SMALL_DEFAULTS, bulkRecipients: 2000, bulkDestinations: 20, smallMessages: 40 });
  });

  it("gives small messages a lower p50 latency with preemption on than off", () => {
    expect(rep.on.smallLatency.p50).toBeLessThan(rep.off.smallLatency.p50);
    expect(rep.on.smallLatency.p99).toBeLessThan(rep.off.smallLatency.p99);
  });

  it("delivers everything in both runs, with the same small messages measured", () => {
    expect(rep.on.audit.describeViolations()).toEqual([]);
    expect(rep.off.audit.describeViolations()).toEqual([]);
    expect(rep.on.smallLatency.n).toBe(40);
    expect(rep.off.smallLatency.n).toBe(40);
    expect(rep.lastSmallArrivalSec).toBeLessThan(rep.off.bulkDoneSec);
  });

  it("is reproducible for a seed and changes with it", () => {
    const opts = { ...BULK_SMALL_DEFAULTS, bulkRecipients: 600, bulkDestinations: 10, smallMessages: 10 };
    const a = JSON.stringify(bulkSmallJson(runBulkSmall(opts)));
    expect(JSON.stringify(bulkSmallJson(runBulkSmall(opts)))).toBe(a);
    expect(JSON.stringify(bulkSmallJson(runBulkSmall({ ...opts, seed: 2 })))).not.toBe(a);
  });
});

describe("destination models", () => {
  const spec = (over: Partial<DestinationSpec>): DestinationSpec => ({ ...DEFAULT_DESTINATION, ...over });

  it("rejects connections beyond the session limit at once and frees a slot on close", () => {
    const rng = createRng(1);
    const server = new DestinationServer(spec({ sessionLimit: 2, jitter: 0 }));
    const a = server.connect(0, 3, rng);
    server.connect(0, 1, rng);
    const c = server.connect(0, 1, rng);
    expect(a).toMatchObject({ outcome: "delivered", endAt: 3, holdsSession: true });
    expect(c).toMatchObject({
      outcome: "rejected-421",
      endAt: 0,
      report: { status: "defer", siteFailure: { dsnStatus: "4.7.0" } },
    });
    server.close(a);
    expect(server.connect(1, 1, rng).outcome).toBe("delivered");
  });

  it("delivers everything once a dead server comes back, after the core declared it dead", () => {
    const r = runSimulation({
      config: { minimal_backoff_time: 60, maximal_backoff_time: 120 },
      messages: messagesTo("dead.example", 30, 1, 10),
      destinationFor: () => spec({ deadUntilSec: 400, refuseDelaySec: 0.5 }),
      seed: 7,
    });
    expectAllDeliveredOnce(r);
    expect(r.audit.counters.get("destination:dead") ?? 0).toBeGreaterThan(0);
    expect(r.audit.counters.get("deferred recipients") ?? 0).toBeGreaterThan(0);
    expect(
      Math.min(...[...r.store.messages.values()].flatMap((m) => m.deliveredAt as number[])),
    ).toBeGreaterThanOrEqual(400);
  });

  it("delivers everything despite connect timeouts", () => {
    const r = runSimulation({
      config: {
        minimal_backoff_time: 30,
        maximal_backoff_time: 60,
        default_destination_concurrency_failed_cohort_limit: 10,
      },
      messages: messagesTo("slow.example", 60, 3, 1),
      destinationFor: () => spec({ connectTimeoutProb: 0.3, connectTimeoutSec: 30 }),
      seed: 3,
    });
    expectAllDeliveredOnce(r);
    expect(outcomes(r)["connect-timeout"] ?? 0).toBeGreaterThan(5);
  });

  it("reports a run that cannot finish as a violation instead of looping", () => {
    const r = runSimulation({
      config: { minimal_backoff_time: 60, maximal_backoff_time: 60 },
      messages: messagesTo("gone.example", 1, 1, 0),
      destinationFor: () => spec({ deadUntilSec: Infinity }),
      seed: 1,
      maxSimTimeSec: 3600,
    });
    expect(r.audit.ok).toBe(false);
    expect(r.store.undeliveredTotal).toBe(1);
  });
});

describe("simulator building blocks", () => {
  it("replays the same random sequence for the same seed", () => {
    const a = createRng(42);
    const b = createRng(42);
    const xs = Array.from({ length: 5 }, () => a.next());
    expect(Array.from({ length: 5 }, () => b.next())).toEqual(xs);
    expect(xs.every((x) => x >= 0 && x < 1)).toBe(true);
    expect(createRng(43).next()).not.toBe(xs[0]);
  });

  it("orders events by time and keeps equal times first-in first-out", () => {
    const q = new EventQueue<string>();
    q.push(2, "c");
    q.push(1, "a");
    q.push(1, "b");
    expect([q.pop()?.event, q.pop()?.event, q.pop()?.event, q.pop()]).toEqual(["a", "b", "c", null]);
  });

  it("computes time-weighted moments and nearest-rank percentiles", () => {
    const s = new StepSeries();
    s.record(0, 4);
    s.record(1, 6);
    s.record(3, 0);
    const tw = s.timeWeighted(0, 4);
    expect(tw.mean).toBeCloseTo((4 + 12) / 4, 9);
    expect(tw.stddev).toBeCloseTo(Math.sqrt((16 + 72) / 4 - 16), 9);
    expect(summarize([5, 1, 4, 2, 3])).toMatchObject({ p50: 3, p90: 5, max: 5, mean: 3 });
  });

  it("runs a single feedback style on its own", () => {
    const r = runLimiterOnce("1/concurrency", { ...LIMITER_DEFAULTS, recipients: 200 });
    expect(r.firstPass.attempts).toBe(100);
    expect(r.audit.ok).toBe(true);
  });
});

describe("ceiling scenario (the relay's learned session ceiling, §12.7)", () => {
  let runs: CeilingRun[] = [];
  const get = (c: CeilingRun["case"], ceiling: boolean) => runs.find((r) => r.case === c && r.ceiling === ceiling)!;
  beforeAll(() => {
    runs = runCeiling();
  });

  it("delivers every recipient exactly once in every case, with and without the ceiling", () => {
    for (const r of runs) expect(r.audit.describeViolations()).toEqual([]);
  });

  it("a fixed limit: Postfix's feedback 1 is refused on a third of its attempts, the ceiling on under 1 %, and finishes sooner", () => {
    expect(get("fixed", false).rejectedPct).toBeGreaterThan(25);
    expect(get("fixed", true).rejectedPct).toBeLessThan(1);
    expect(get("fixed", true).endSec).toBeLessThan(get("fixed", false).endSec);
  });

  it("a limit that rises from 5 to 10 is found by the next probe and climbed at once: sooner than Postfix's feedback finds it", () => {
    const after = get("rising", true).reachedNewLimitAfterSec;
    expect(after).not.toBeNull();
    // The next probe is at most 20 deliveries away (4 × the limit of 5), then one step per delivery.
    expect(after!).toBeLessThanOrEqual(30);
    expect(after!).toBeLessThanOrEqual(get("rising", false).reachedNewLimitAfterSec!);
    expect(get("rising", true).rejectedPct).toBeLessThan(1);
  });

  it("a limit that falls from 10 to 3 is learned within seconds: only the probes are refused afterwards, against hundreds", () => {
    // One probe per 6 to 12 deliveries at the ceiling of 3 (PROBE_GAP_MIN, PROBE_GAP_MAX), and at most one a second.
    expect(get("falling", true).rejectedAfterChange).toBeLessThanOrEqual(
      get("falling", false).rejectedAfterChange / 20,
    );
    expect(get("falling", false).rejectedAfterChange).toBeGreaterThan(100);
  });

  it("prints the JSON shape the CLI promises", () => {
    const json = ceilingJson(runs) as { scenario: string; results: Record<string, unknown>[] };
    expect(json.scenario).toBe("ceiling");
    expect(json.results).toHaveLength(6);
  });
});
