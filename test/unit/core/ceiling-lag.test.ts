// The learned session ceiling (relay §12.7) with reports that arrive late and out of order, as
// delivery agents send them: in batches, after completions that happened later. A server takes 5
// sessions and refuses more at the greeting. Before reports carried `conc` (the deliveries in
// flight when the reported one started), a refusal reported after its neighbours' completions
// read a busy count of 1 or 2, learned a ceiling of 1, and the next refusal killed the
// destination: all its mail was deferred for its age's back-off (bench:sessions' stalls).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  admitMessage, applyDestinationReport, createDestination, dispatchAll, drainEffects, mustParseSchedulerConfig, reportDelivery, transportParams, type Entry,
} from "../../../durable-objects/core";
import { makeQmgr, rcpts, type TestRcpt } from "./harness";

const REFUSAL = { dsnStatus: "4.7.0", reason: "host mx.test[192.0.2.1] refused to talk to me: 421 4.7.0 Too many sessions, try again later" };
const CONFIG = {
  minimal_backoff_time: 1, maximal_backoff_time: 10,
  default_destination_concurrency_ceiling_memory: 3600, default_destination_concurrency_probe_delay: 1,
};
const LIMIT = 5;

interface Run { delivered: number; refused: number; deaths: number; windows: number[] }

/**
 * Drives the core in 10 ms ticks for `ms`: every tick it dispatches what it can; an entry
 * connects the next tick and is refused if LIMIT sessions are in use, else it finishes
 * `sessionTicks` later; finished entries wait in the agent and are reported every
 * `reportTicks` ticks, in an order `order` picks.
 */
function simulate(ms: number, sessionTicks: number, reportTicks: number, order: (n: number) => number[]): Run {
  const { q, src } = makeQmgr(CONFIG);
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
    for (let i = inSession.length - 1; i >= 0; i--) {
      if (inSession[i]!.endsAt > tick) continue;
      finished.push({ e: inSession[i]!.e, ok: true });
      inSession.splice(i, 1);
    }
    for (const e of connecting.splice(0)) {
      if (inSession.length < LIMIT) inSession.push({ e, endsAt: tick + sessionTicks });
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
  const next = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
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
    fc.assert(fc.property(fc.integer({ min: 1, max: 2 ** 31 - 1 }), fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 8 }), (seed, sessionTicks, reportTicks) => {
      const r = simulate(4_000, sessionTicks, reportTicks, shuffled(seed));
      expect(r.deaths).toBe(0);
      const settled = r.windows.slice(50);
      expect(settled.length).toBeGreaterThan(50);
      expect(settled.reduce((a, w) => a + w, 0) / settled.length).toBeGreaterThanOrEqual(LIMIT);
      expect(r.refused).toBeLessThan(r.delivered / 10);
    }), { numRuns: 25 });
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
    for (let i = 0; i < 10; i++) rec = applyDestinationReport(rec, { busy: 1, conc: 6, siteFailure: REFUSAL }, 100, p).record;
    expect(rec.deadUntil).toBe(0);
    expect(rec.ceiling?.limit).toBe(5);
    expect(rec.window).toBe(5);
    rec = applyDestinationReport(rec, { busy: 1, siteFailure: REFUSAL }, 101, p).record;
    expect(rec.ceiling?.limit).toBe(1);
  });
});
