// A message deferred only because sessions were refused at a learned ceiling (relay §12.7, a
// probe or a limit that fell) is tried again minimal_backoff_time later, not after the back-off
// its age gives: the refusal said nothing about the message. Any other deferral in the same
// pass, or the ceiling off, gives Postfix's age-based back-off.
import { describe, expect, it } from "vitest";
import { admitMessage, dispatchAll, drainEffects, reportDelivery, type Effect } from "../../../durable-objects/core";
import { makeQmgr, rcpts } from "./harness";

const REFUSAL = {
  dsnStatus: "4.7.0",
  reason: "host mx.test[192.0.2.1] refused to talk to me: 421 4.7.0 Too many sessions, try again later",
};
const OTHER = { dsnStatus: "4.4.2", reason: "lost connection with mx.test[192.0.2.1] while sending end of data" };
const BASE = {
  minimal_backoff_time: 10,
  maximal_backoff_time: 1000,
  default_destination_recipient_limit: 1,
  initial_destination_concurrency: 5,
};

/** A 3-recipient message created at t = 0, tried at t = 500: the reports given per entry, in order. */
function nextAttempt(ceilingMemory: number, reports: ("ok" | "refused" | "other")[]): number {
  const { q, src } = makeQmgr({ ...BASE, default_destination_concurrency_ceiling_memory: ceilingMemory });
  src.files.set("m1", rcpts(reports.length));
  admitMessage(q, { id: "m1", createTime: 0, rcptTotal: reports.length }, 500);
  const entries = dispatchAll(q, 500, 100);
  expect(entries).toHaveLength(reports.length);
  entries.forEach((e, i) => {
    const r = reports[i]!;
    reportDelivery(
      q,
      e.id,
      r === "ok" ? { status: "ok" } : { status: "defer", siteFailure: r === "refused" ? REFUSAL : OTHER },
      500,
    );
  });
  const d = drainEffects(q).find(
    (x): x is Extract<Effect, { kind: "message-deferred" }> => x.kind === "message-deferred",
  );
  expect(d).toBeDefined();
  return d!.nextAttemptAt - 500;
}

describe("the retry of a message deferred only by refusals at a learned ceiling", () => {
  it("is minimal_backoff_time away with the ceiling on", () => {
    expect(nextAttempt(3600, ["ok", "refused", "ok"])).toBe(10);
    expect(nextAttempt(3600, ["refused", "refused", "ok"])).toBe(10);
  });

  it("is the age-based back-off when another deferral is in the same pass, or with the ceiling off (Postfix)", () => {
    expect(nextAttempt(3600, ["refused", "other", "ok"])).toBe(500);
    expect(nextAttempt(3600, ["other", "refused", "ok"])).toBe(500);
    expect(nextAttempt(0, ["ok", "refused", "ok"])).toBe(500);
  });
});
