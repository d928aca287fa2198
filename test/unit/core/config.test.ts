import { describe, expect, it } from "vitest";
import {
  createWindowState,
  feedbackValue,
  mustParseSchedulerConfig,
  onNegativeFeedback,
  onPositiveFeedback,
  parseDurationSec,
  parseFeedback,
  parseSchedulerConfig,
  transportParams,
  type WindowParams,
} from "../../../durable-objects/core";

describe("scheduler configuration (spec §1)", () => {
  it("has Postfix's defaults", () => {
    const cfg = mustParseSchedulerConfig({});
    expect(cfg.global).toMatchObject({
      messageActiveLimit: 20000,
      messageRecipientLimit: 20000,
      messageRecipientMinimum: 10,
      queueRunDelay: 300,
      minimalBackoffTime: 300,
      maximalBackoffTime: 4000,
      maximalQueueLifetime: 432000,
      bounceQueueLifetime: 432000,
      delayWarningTime: 0,
      transportRetryTime: 60,
      destinationIdleMemory: 600,
      recipientDelimiter: "",
      deferTransports: [],
    });
    const t = transportParams(cfg, "smtp");
    expect(t).toMatchObject({
      name: "smtp",
      initialConcurrency: 5,
      concurrencyLimit: 20,
      recipientLimit: 50,
      failedCohortLimit: 1,
      destinationRateDelay: 0,
      transportRateDelay: 0,
      slotCost: 5,
      slotLoan: 3,
      slotDiscount: 50,
      minSlots: 3,
      rcptPool: 20000,
      extraRcptPool: 1000,
      refillLimit: 100,
      refillDelay: 5,
      processLimit: 100,
    });
    expect(t.positiveFeedback).toEqual({ kind: "constant", base: 1, spec: "1" });
  });

  it("applies per-transport overrides over the global defaults", () => {
    const cfg = mustParseSchedulerConfig({
      default_destination_concurrency_limit: 10,
      transports: {
        relay: { destination_concurrency_limit: 2, destination_concurrency_positive_feedback: "1/concurrency" },
      },
    });
    expect(transportParams(cfg, "relay")).toMatchObject({ concurrencyLimit: 2, initialConcurrency: 2 });
    expect(transportParams(cfg, "relay").positiveFeedback.kind).toBe("concurrency");
    expect(transportParams(cfg, "smtp")).toMatchObject({ concurrencyLimit: 10, initialConcurrency: 5 });
  });

  it("clips the initial concurrency to the limit, forces limit 1 with a rate delay, and raises the recipient limit to the active limit", () => {
    const cfg = mustParseSchedulerConfig({
      qmgr_message_active_limit: 30000,
      transports: { slow: { destination_rate_delay: "2s" }, tiny: { destination_concurrency_limit: 3 } },
    });
    expect(transportParams(cfg, "slow")).toMatchObject({
      concurrencyLimit: 1,
      initialConcurrency: 1,
      destinationRateDelay: 2,
    });
    expect(transportParams(cfg, "tiny").initialConcurrency).toBe(3);
    expect(cfg.global.messageRecipientLimit).toBe(30000);
  });

  it.each([
    { name: "unknown parameter", input: { default_destination_concurency_limit: 5 }, path: "(root)" },
    {
      name: "negative limit",
      input: { default_destination_concurrency_limit: -1 },
      path: "default_destination_concurrency_limit",
    },
    { name: "fractional count", input: { qmgr_message_active_limit: 1.5 }, path: "qmgr_message_active_limit" },
    { name: "zero active limit", input: { qmgr_message_active_limit: 0 }, path: "qmgr_message_active_limit" },
    {
      name: "discount over 100",
      input: { default_delivery_slot_discount: 101 },
      path: "default_delivery_slot_discount",
    },
    { name: "bad duration", input: { minimal_backoff_time: "5 minutes" }, path: "minimal_backoff_time" },
    { name: "lifetime over 100 days", input: { maximal_queue_lifetime: "101d" }, path: "maximal_queue_lifetime" },
    { name: "zero back-off", input: { minimal_backoff_time: 0 }, path: "minimal_backoff_time" },
    {
      name: "feedback above 1",
      input: { default_destination_concurrency_positive_feedback: "2/concurrency" },
      path: "default_destination_concurrency_positive_feedback",
    },
    {
      name: "unparsable feedback",
      input: { default_destination_concurrency_negative_feedback: "abc" },
      path: "default_destination_concurrency_negative_feedback",
    },
    { name: "unknown per-transport key", input: { transports: { smtp: { window: 3 } } }, path: "transports.smtp" },
    { name: "bad transport name", input: { transports: { "bad name": {} } }, path: "transports.bad name" },
    {
      name: "refill delay zero",
      input: { transports: { smtp: { recipient_refill_delay: 0 } } },
      path: "transports.smtp.recipient_refill_delay",
    },
  ])("rejects $name with a clear error naming the parameter", ({ input, path }) => {
    const r = parseSchedulerConfig(input);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors.join("\n")).toContain(path);
  });

  it.each([
    ["300", 300],
    [300, 300],
    ["300s", 300],
    ["5m", 300],
    ["4h", 14400],
    ["5d", 432000],
    ["1w", 604800],
    ["1.5h", null],
    [-1, null],
  ] as const)("reads the duration %j as %j seconds", (input, want) => {
    expect(parseDurationSec(input)).toBe(want);
  });
});

describe("feedback parsing F13 (spec §9.2) and the relay's own forms", () => {
  it.each([
    { spec: "1/concurrency", kind: "concurrency", base: 1, warn: false },
    { spec: "1/8", kind: "constant", base: 0.125, warn: false },
    { spec: "0.5", kind: "constant", base: 0.5, warn: false },
    { spec: "2/concurrency", kind: "constant", base: 1, warn: true },
    { spec: "3", kind: "constant", base: 1, warn: true },
    { spec: "1/sqrt_concurrency", kind: "constant", base: 1, warn: true },
    { spec: "abc", kind: "constant", base: 1, warn: true },
    { spec: "0", kind: "constant", base: 0, warn: false },
  ])("postfix mode: $spec", ({ spec, kind, base, warn }) => {
    const r = parseFeedback(spec, "postfix");
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect([r.feedback.kind, r.feedback.base, r.warning !== undefined]).toEqual([kind, base, warn]);
  });

  it("relay mode supports x/sqrt_concurrency and refuses what Postfix would repair", () => {
    const r = parseFeedback("1/sqrt_concurrency", "relay");
    expect(r.ok && feedbackValue(r.feedback, 4)).toBe(0.5);
    for (const bad of ["2/concurrency", "3", "abc", "1/0", ""]) expect(parseFeedback(bad, "relay").ok, bad).toBe(false);
  });

  it('"0" means no feedback at all: the window never moves', () => {
    const zero = parseFeedback("0", "postfix");
    if (!zero.ok) throw new Error("parse");
    const p: WindowParams = {
      initialConcurrency: 5,
      concurrencyLimit: 20,
      positiveFeedback: zero.feedback,
      negativeFeedback: zero.feedback,
      failedCohortLimit: 0,
    };
    const s = createWindowState(p);
    for (let i = 0; i < 10; i++) onPositiveFeedback(s, 5, p);
    for (let i = 0; i < 10; i++) onNegativeFeedback(s, p);
    expect(s.window).toBe(5);
  });
});

describe("F-LIM: the idealised limiter (S = 5, spec §6.7)", () => {
  it.each([
    { fb: "1/concurrency", pattern: "SSSSSF", fraction: 1 / 6 },
    { fb: "1/4", pattern: "SSSSF", fraction: 1 / 5 },
    { fb: "0.3", pattern: "SSSF", fraction: 1 / 4 },
    { fb: "1", pattern: "SSF", fraction: 1 / 3 },
  ])("$fb / $fb repeats $pattern", ({ fb, pattern, fraction }) => {
    const f = parseFeedback(fb, "postfix");
    if (!f.ok) throw new Error("parse");
    const p: WindowParams = {
      initialConcurrency: 5,
      concurrencyLimit: 20,
      positiveFeedback: f.feedback,
      negativeFeedback: f.feedback,
      failedCohortLimit: 0,
    };
    const s = createWindowState(p);
    let events = "";
    for (let i = 0; i < 600; i++) {
      if (s.window > 5) {
        onNegativeFeedback(s, p);
        events += "F";
      } else {
        onPositiveFeedback(s, s.window, p);
        events += "S";
      }
    }
    const steady = events.slice(120);
    const start = steady.indexOf(pattern);
    expect(steady.slice(start, start + pattern.length * 10)).toBe(pattern.repeat(10));
    const fails = steady.split("").filter((c) => c === "F").length;
    expect(fails / steady.length).toBeCloseTo(fraction, 2);
  });
});
