// The learned session ceiling (relay, §12.7, destination-window.ts): a concurrency refusal
// teaches the destination the server's limit, the window holds there and probes past it on a
// backing-off schedule (the relay's default, 1 h of memory); off (0) it is Postfix's feedback, unchanged.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  applyDestinationReport, createDestination, isConcurrencyRefusal, mustParseSchedulerConfig, transportParams,
  type DestinationParams, type DestinationRecord,
} from "../../../durable-objects/core";

const params = (input: Record<string, unknown> = {}): DestinationParams => {
  const cfg = mustParseSchedulerConfig(input);
  return { ...transportParams(cfg, "smtp"), deadTimeSec: 300, idleMemorySec: 600 };
};
const postfix = params({ default_destination_concurrency_ceiling_memory: 0 });
const learning = params({ default_destination_concurrency_ceiling_memory: 3600, default_destination_concurrency_probe_delay: 60 });
const REFUSAL = { dsnStatus: "4.7.0", reason: "host mx.test[192.0.2.1] refused to talk to me: 421 4.7.0 Too many connected clients" };
const LOST = { dsnStatus: "4.4.2", reason: "lost connection with mx.test[192.0.2.1] while receiving the initial server greeting" };

/**
 * A server that takes `limit(t)` sessions at once and refuses the rest at the greeting, driven
 * for `seconds`: every second the client opens as many sessions as its window allows (it always
 * has mail); the refusals report first (they are quick), then the deliveries, each with the
 * sessions still in flight.
 */
function run(p: DestinationParams, seconds: number, limit: (t: number) => number, start = 1000) {
  let rec: DestinationRecord = createDestination("smtp", p);
  let refused = 0;
  let delivered = 0;
  const windows: number[] = [];
  for (let t = start; t < start + seconds; t++) {
    const open = Math.max(1, rec.window);
    const ok = Math.min(open, limit(t));
    let busy = open;
    for (let i = ok; i < open; i++) rec = applyDestinationReport(rec, { busy: busy--, siteFailure: REFUSAL }, t, p).record;
    for (let i = 0; i < ok; i++) rec = applyDestinationReport(rec, { busy: busy--, siteFailure: null }, t, p).record;
    refused += open - ok;
    delivered += ok;
    windows.push(rec.window);
  }
  return { refused, delivered, windows, rec };
}

describe("which site failures are concurrency refusals", () => {
  it.each([
    ["host mx.test[192.0.2.1] refused to talk to me: 421 4.7.0 Too many connected clients, try again in a moment", true],
    ["host mx.test refused to talk to me: 421 mx.test Service not available", true],
    ["host mx.test said: 452 4.7.0 too many concurrent SMTP connections", true],
    ["host mx.test refused to talk to me: 554 5.7.1 go away", false],
    ["connect to mx.test[192.0.2.1]:25: Connection refused", false],
    [LOST.reason, false],
  ])("%s → %s", (reason, want) => {
    expect(isConcurrencyRefusal(reason)).toBe(want);
  });
});

describe("the learned ceiling", () => {
  it("off (ceiling memory 0): a server that takes 5 sessions costs one refusal per cycle, as Postfix's arithmetic predicts", () => {
    const r = run(postfix, 600, () => 5);
    expect(r.rec.ceiling ?? null).toBeNull();
    expect(r.refused).toBeGreaterThan(250);
  });

  it("a fixed limit of 5: learned from the first refusal, then held; only the probes are refused, on a doubling gap", () => {
    const off = run(postfix, 600, () => 5);
    const on = run(learning, 600, () => 5);
    console.log(`fixed limit 5, 600 s: refused ${off.refused} (Postfix) vs ${on.refused} (ceiling); delivered ${off.delivered} vs ${on.delivered}`);
    expect(on.rec.ceiling).toMatchObject({ limit: 5 });
    // The first second's window had grown to 8 before anything was refused (3 refusals, one
    // cohort, which learns 5); then one refused probe after 60, 120 and 240 s (the gap doubles).
    expect(on.refused).toBe(3 + 3);
    expect(on.delivered).toBe(off.delivered);
    expect(on.windows.slice(10).every((w) => w >= 5 && w <= 6)).toBe(true);
  });

  it("a limit that rises from 5 to 10 is found by the probes: each probe that gets through raises the ceiling and restarts the gap", () => {
    const on = run(learning, 1200, (t) => (t < 1300 ? 5 : 10));
    const after = on.windows.slice(300);
    const reached = after.findIndex((w) => w >= 10);
    console.log(`limit 5 → 10 at 300 s: window 10 after ${reached} s`);
    expect(reached).toBeGreaterThanOrEqual(0);
    // At most one step per probe gap, and a gap that went through starts over at 60 s:
    // five steps, the first after a gap that may have doubled twice (240 s).
    expect(reached).toBeLessThanOrEqual(240 + 4 * 60 + 5);
    expect(on.rec.ceiling?.limit ?? 0).toBeGreaterThanOrEqual(10);
  });

  it("a limit that falls from 10 to 3 is learned at once and held", () => {
    const on = run(learning, 900, (t) => (t < 1300 ? 10 : 3));
    const after = on.windows.slice(305);
    expect(on.rec.ceiling).toMatchObject({ limit: 3 });
    expect(after.every((w) => w <= 4)).toBe(true);
  });

  it("is forgotten ceiling_memory after the last refusal: the window then grows as Postfix's", () => {
    const p = params({ default_destination_concurrency_ceiling_memory: 120, default_destination_concurrency_probe_delay: 1000 });
    const r = run(p, 400, (t) => (t < 1010 ? 5 : 50));
    expect(r.rec.ceiling ?? null).toBeNull();
    expect(r.rec.window).toBe(20);
  });

  it("dead detection still works: a server that refuses every session dies as with Postfix's feedback", () => {
    let rec = createDestination("smtp", learning);
    let died = false;
    for (let i = 0; i < 10 && !died; i++) {
      const step = applyDestinationReport(rec, { busy: Math.max(1, rec.window), siteFailure: REFUSAL }, 1000 + i, learning);
      rec = step.record;
      died = step.answer.deadUntil > 0;
    }
    expect(died).toBe(true);
  });

  it("other site failures (a lost connection) teach nothing", () => {
    const rec = applyDestinationReport(createDestination("smtp", learning), { busy: 5, siteFailure: LOST }, 1000, learning).record;
    expect(rec.ceiling ?? null).toBeNull();
  });

  it("the relay's default keeps a ceiling for an hour and probes after a minute", () => {
    expect(params()).toMatchObject({ ceilingMemory: 3600, probeDelay: 60 });
  });

  it("property: with the option off, every report sequence gives exactly Postfix's records; with it on, the window never passes the ceiling by more than the one probe step", () => {
    const report = fc.record({ busy: fc.integer({ min: 1, max: 25 }), kind: fc.constantFrom("ok", "refusal", "lost"), dt: fc.integer({ min: 0, max: 90 }) });
    fc.assert(fc.property(fc.array(report, { maxLength: 200 }), (reports) => {
      let plain = createDestination("smtp", postfix);
      let off = createDestination("smtp", params({ default_destination_concurrency_ceiling_memory: 0, default_destination_concurrency_probe_delay: 5 }));
      let on = createDestination("smtp", learning);
      let t = 1000;
      for (const r of reports) {
        t += r.dt;
        const siteFailure = r.kind === "ok" ? null : r.kind === "refusal" ? REFUSAL : LOST;
        plain = applyDestinationReport(plain, { busy: r.busy, siteFailure }, t, postfix).record;
        off = applyDestinationReport(off, { busy: r.busy, siteFailure }, t, postfix).record;
        on = applyDestinationReport(on, { busy: r.busy, siteFailure }, t, learning).record;
        expect(off).toEqual(plain);
        if (on.ceiling && on.window > 0) expect(on.window).toBeLessThanOrEqual(Math.max(on.ceiling.limit + 1, 1));
        expect(on.window).toBeGreaterThanOrEqual(0);
      }
    }), { numRuns: 300 });
  });
});
