// The learned session ceiling (relay §12.7) with reports that arrive late and out of order, as
// delivery agents send them: in batches, after completions that happened later. A server takes 5
// sessions and refuses more at the greeting. Before reports carried `conc` (the deliveries in
// flight when the reported one started), a refusal reported after its neighbours' completions
// read a busy count of 1 or 2, learned a ceiling of 1, and the next refusal killed the
// destination: all its mail was deferred for its age's back-off (bench:sessions' stalls).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  admitMessage,
  applyDestinationReport,
  learnCeiling,
  type WindowState,
  createDestination,
  dispatchAll,
  drainEffects,
  mustParseSchedulerConfig,
  reportDelivery,
  transportParams,
  type Entry,
} from "../../../durable-objects/core";
import { makeQmgr, rcpts, type TestRcpt } from "./harness";

const REFUSAL = {
  dsnStatus: "4.7.0",
  reason: "host mx.test[192.0.2.1] refused to talk to me: 421 4.7.0 Too many sessions, try again later",
};
const CONFIG = {
  minimal_backoff_time: 1,
  maximal_backoff_time: 10,
  default_destination_concurrency_ceiling_memory: 3600,
  default_destination_concurrency_probe_delay: 1,
};
const LIMIT = 5;

interface Run {
  delivered: number;
  refused: number;
  deaths: number;
  windows: number[];
}

/**
 * Drives the core in 10 ms ticks for `ms`: every tick it dispatches what it can; an entry
 * connects the next tick and is refused if LIMIT sessions are in use, else it finishes
 * `sessionTicks` later; finished entries wait in the agent and are reported every
 * `reportTicks` ticks, in an order `order` picks.
 */
function simulate(
  ms: number,
  sessionTicks: number,
  reportTicks: number,
  order: (n: number) => number[],
  limitAt: (ms: number) => number = () => LIMIT,
  config: Record<string, unknown> = CONFIG,
): Run {
  const { q, src } = makeQmgr(config);
  for (let i = 0; i < 3000; i++) {
    src.files.set(`m${i}`, rcpts(1, "mx.test", "smtp", i));
    admitMessage(q, { id: `m${i}`, createTime: 0, rcptTotal: 1 }, 0);
  }
  const connecting: Entry<TestRcpt>[] = [];
  const inSession: { e: Entry<TestRcpt>; endsAt: number }[] = [];
  let finished: { e: Entry<TestRcpt>; ok: boolean }[] = [];
  const run: Run = { delivered: 0, refused: 0, deaths: 0, windows: [] };
  for (let tick = 0; tick * 10 < ms; tick++) {
    const now = Math.floor(tick / 100);
    const limit = limitAt(tick * 10);
    for (let i = inSession.length - 1; i >= 0; i--) {
      if (inSession[i]!.endsAt > tick) continue;
      // A server that lowered its limit sheds sessions past it as they finish a transaction (421).
      finished.push({ e: inSession[i]!.e, ok: inSession.length <= limit });
      inSession.splice(i, 1);
    }
    for (const e of connecting.splice(0)) {
      if (inSession.length < limit) inSession.push({ e, endsAt: tick + sessionTicks });
      else finished.push({ e, ok: false });
    }
    if (tick % reportTicks === 0 && finished.length > 0) {
      for (const i of order(finished.length)) {
        const { e, ok } = finished[i]!;
        reportDelivery(q, e.id, ok ? { status: "ok" } : { status: "defer", siteFailure: REFUSAL }, now);
        if (ok) run.delivered++;
        else run.refused++;
      }
      finished = [];
    }
    connecting.push(...dispatchAll(q, now, 100));
    for (const x of drainEffects(q)) if (x.kind === "destination" && x.event === "dead") run.deaths++;
    const queue = q.transports.get("smtp")?.queues.get("mx.test");
    if (queue && queue.todoCount > 0) run.windows.push(queue.window);
  }
  return run;
}

/** A seeded shuffle of 0..n-1. */
function shuffled(seed: number): (n: number) => number[] {
  let s = seed >>> 0 || 1;
  const next = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
  return (n) => {
    const a = Array.from({ length: n }, (_, i) => i);
    for (let i = n - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1));
      [a[i], a[j]] = [a[j]!, a[i]!];
    }
    return a;
  };
}

describe("the learned ceiling with late, batched reports", () => {
  it("refusals reported after later completions learn the sessions open when they knocked: the window holds at the limit", () => {
    // Refusals last in each batch: the worst order for a count taken at the report.
    const r = simulate(10_000, 3, 5, (n) => Array.from({ length: n }, (_, i) => n - 1 - i));
    console.log(`late refusals, 10 s: ${r.delivered} delivered, ${r.refused} refused, ${r.deaths} deaths`);
    expect(r.deaths).toBe(0);
    expect(r.windows.slice(100).every((w) => w >= LIMIT && w <= LIMIT + 1)).toBe(true);
    expect(r.refused).toBeLessThan(r.delivered / 20);
  });

  it("property: in any report order, the destination never dies of its own refusals, and its window stays at or past the limit", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2 ** 31 - 1 }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 8 }),
        (seed, sessionTicks, reportTicks) => {
          const r = simulate(4_000, sessionTicks, reportTicks, shuffled(seed));
          expect(r.deaths).toBe(0);
          const settled = r.windows.slice(50);
          expect(settled.length).toBeGreaterThan(50);
          expect(settled.reduce((a, w) => a + w, 0) / settled.length).toBeGreaterThanOrEqual(LIMIT);
          expect(r.refused).toBeLessThan(r.delivered / 10);
        },
      ),
      { numRuns: 25 },
    );
  });

  it("a refusal of the only session in flight still counts towards death (the server refuses everything)", () => {
    const { q, src } = makeQmgr({ ...CONFIG, initial_destination_concurrency: 1 });
    src.files.set("m1", rcpts(2, "mx.test"));
    admitMessage(q, { id: "m1", createTime: 0, rcptTotal: 2 }, 0);
    const [e] = dispatchAll(q, 0, 100);
    reportDelivery(q, e!.id, { status: "defer", siteFailure: REFUSAL }, 0);
    expect(drainEffects(q).some((x) => x.kind === "destination" && x.event === "dead")).toBe(true);
  });

  it("a Destination DO's record learns from a report's conc too, and refusals beside other sessions never kill it", () => {
    const p = { ...transportParams(mustParseSchedulerConfig(CONFIG), "smtp"), deadTimeSec: 300, idleMemorySec: 600 };
    let rec = createDestination("smtp", p);
    const outcomes = new Set<string>();
    for (let i = 0; i < 10; i++) {
      const step = applyDestinationReport(rec, { busy: 1, conc: 6, siteFailure: REFUSAL }, 100, p);
      rec = step.record;
      outcomes.add(step.event.outcome);
    }
    expect([...outcomes]).toEqual(["ceiling"]); // the history says what happened: no window was closed
    expect(rec.deadUntil).toBe(0);
    expect(rec.ceiling?.limit).toBe(5);
    expect(rec.window).toBe(5);
    rec = applyDestinationReport(rec, { busy: 1, siteFailure: REFUSAL }, 101, p).record;
    expect(rec.ceiling?.limit).toBe(1);
  });

  it("a server that lowers its limit from 10 to 3 and sheds sessions is followed down within a second", () => {
    const windows: number[] = [];
    const cfg = { ...CONFIG, initial_destination_concurrency: 10 };
    const r = simulate(
      6_000,
      4,
      3,
      (n) => Array.from({ length: n }, (_, i) => i),
      (ms) => (ms < 3_000 ? 10 : 3),
      cfg,
    );
    windows.push(...r.windows);
    console.log(
      `fall 10 → 3: ${r.delivered} delivered, ${r.refused} refused, ${r.deaths} deaths; windows ${r.windows.filter((_, i) => i % 50 === 0).join(",")}`,
    );
    expect(r.deaths).toBe(0);
    // Samples are per 10 ms tick while mail waits: a second after the fall (tick 400) the window is at 3 or 4.
    expect(r.windows.slice(400, 550).every((w) => w >= 3 && w <= 4)).toBe(true);
  });

  it("a cohort of refusals counted at their start follows a server that sheds sessions down at once, and a refusal never raises a ceiling", () => {
    const p = transportParams(mustParseSchedulerConfig(CONFIG), "smtp");
    const at10 = (): WindowState => ({
      window: 10,
      success: 0,
      failure: 0,
      failCohorts: 0,
      ceiling: { limit: 10, at: 100, probeAt: 101, gap: 20, left: 20, refusing: false },
    });
    // Ten sessions in flight, each started with 10 in flight; the server lowers its limit to 3 and
    // refuses seven of them, one after another in the order they started.
    const s = at10();
    for (let seq = 1; seq <= 7; seq++) learnCeiling(s, 10, 200, p, seq);
    expect(s.ceiling?.limit).toBe(3);
    expect(s.window).toBe(3);
    // Without the start order (a Destination DO's report), each refusal says only "fewer than 10".
    const t = at10();
    for (let i = 0; i < 7; i++) learnCeiling(t, 10, 200, p);
    expect(t.ceiling?.limit).toBe(9);
    // A refusal that started with 12 in flight, at a ceiling of 5: the ceiling stays 5.
    const u: WindowState = {
      window: 5,
      success: 0,
      failure: 0,
      failCohorts: 0,
      ceiling: { limit: 5, at: 100, probeAt: 101, gap: 10, left: 10, refusing: false },
    };
    learnCeiling(u, 12, 200, p, 50);
    expect(u.ceiling?.limit).toBe(5);
  });
});
