import { describe, expect, it } from "vitest";
import {
  applyDestinationReport,
  createDestination,
  mustParseSchedulerConfig,
  reviveDestination,
  transportParams,
  type DestinationParams,
} from "../../../durable-objects/core";

const cfg = mustParseSchedulerConfig({});
const p: DestinationParams = { ...transportParams(cfg, "smtp"), deadTimeSec: 300, idleMemorySec: 600 };
const fail = { dsnStatus: "4.4.1", reason: "refused" };

describe("destination record (the Destination DO's core)", () => {
  it("runs Postfix feedback without mutating its input: 3 site failures from 5 kill it for minimal_backoff_time", () => {
    let rec = createDestination("smtp", p);
    const frozen = Object.freeze({ ...rec });
    const first = applyDestinationReport(frozen, { busy: 5, siteFailure: fail }, 100, p);
    expect(frozen.window).toBe(5);
    expect(first.answer).toEqual({ window: 3, deadUntil: 0 });
    rec = applyDestinationReport(first.record, { busy: 3, siteFailure: fail }, 101, p).record;
    const dead = applyDestinationReport(rec, { busy: 2, siteFailure: fail }, 102, p);
    expect(dead.answer).toEqual({ window: 0, deadUntil: 402 });
    expect(dead.alarmAt).toBe(402);
    expect(dead.event).toMatchObject({ kind: "site_failure", outcome: "died", window: 0 });
    expect(reviveDestination(dead.record, p)).toMatchObject({ window: 5, deadUntil: 0, reason: null, failCohorts: 0 });
  });

  it("forgets the learned window after destination_idle_memory unused, and keeps it before", () => {
    let rec = createDestination("smtp", p);
    for (let i = 0; i < 3; i++) rec = applyDestinationReport(rec, { busy: 5 + i, siteFailure: null }, 10, p).record;
    expect(rec.window).toBe(8);
    expect(applyDestinationReport(rec, { busy: 1, siteFailure: null }, 10 + 599, p).record.window).toBe(8);
    expect(applyDestinationReport(rec, { busy: 1, siteFailure: null }, 10 + 600, p).record.window).toBe(6);
  });

  const queueWindowTitle =
    "a queue's own record takes the window the scheduler reports with each report (it " +
    "applied them in their true order), while both live; dead detection stays its own";
  it(queueWindowTitle, () => {
    let rec = createDestination("smtp", p);
    const step = applyDestinationReport(rec, { busy: 5, siteFailure: null, window: 7 }, 10, p);
    expect(step.record.window).toBe(7);
    expect(step.event).toMatchObject({ window: 7 });
    rec = step.record;
    // Three site failures still kill it, whatever window the scheduler says.
    for (let i = 0; i < 8 && rec.window > 0; i++)
      rec = applyDestinationReport(rec, { busy: 2, siteFailure: fail, window: 5 }, 11 + i, p).record;
    expect(rec.window).toBe(0);
    expect(applyDestinationReport(rec, { busy: 1, siteFailure: fail, window: 3 }, 30, p).record.window).toBe(0);
  });

  it("a queue's own record takes the scheduler's window and failed cohorts before a report: successes it never got leave no stale count", () => {
    // Two of five failed in a row: 0.4 of a cohort here. The scheduler then had successes this
    // record never got (a success resets the count), and reports its queue's state with the next failure.
    let rec = createDestination("smtp", p);
    rec = applyDestinationReport(rec, { busy: 5, siteFailure: fail }, 100, p).record;
    rec = applyDestinationReport(rec, { busy: 3, siteFailure: fail }, 101, p).record;
    expect(rec.failCohorts).toBeGreaterThan(0);
    const withPrior = applyDestinationReport(
      rec,
      { busy: 2, siteFailure: fail, prior: { window: 5, failCohorts: 0 } },
      102,
      p,
    );
    expect(withPrior.answer.deadUntil).toBe(0);
    expect(withPrior.record.failCohorts).toBeCloseTo(1 / 5);
    // Without it, the stale count kills the destination, as the first test shows.
    expect(applyDestinationReport(rec, { busy: 2, siteFailure: fail }, 102, p).answer.deadUntil).toBeGreaterThan(0);
    // A dead record keeps its own state: the prior of a queue the scheduler thinks alive is ignored.
    const dead = applyDestinationReport(rec, { busy: 2, siteFailure: fail }, 102, p).record;
    expect(
      applyDestinationReport(dead, { busy: 1, siteFailure: fail, prior: { window: 5, failCohorts: 0 } }, 103, p).record,
    ).toMatchObject({ window: 0, deadUntil: dead.deadUntil });
  });
});
