import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  DEFAULT_RETRY_CONFIG,
  decideAfterAttempt,
  maxAttempts,
  parseRetryAfter,
  retryDelayMs,
  WEBHOOK_RETRY_DELAYS_MS,
  type HttpOutcome,
  type RetryDecision,
} from "../../../worker/webhooks/core/retry";

const NOW = 1_700_000_000_000; // 2023-11-14T22:13:20Z
const S = 1000;
const MIN = 60 * S;
const H = 60 * MIN;

const status = (code: number, retryAfter?: string, deliveryHeader?: string): HttpOutcome => ({
  kind: "response",
  status: code,
  ...(retryAfter !== undefined ? { retryAfter } : {}),
  ...(deliveryHeader !== undefined ? { deliveryHeader } : {}),
});

describe("retry schedule", () => {
  it("is immediately, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h", () => {
    expect(WEBHOOK_RETRY_DELAYS_MS).toEqual([5 * S, 5 * MIN, 30 * MIN, 2 * H, 5 * H, 10 * H, 10 * H]);
    expect(maxAttempts()).toBe(8);
  });

  it.each([
    { name: "after the first try", attempt: 1, wantAt: NOW + 5 * S },
    { name: "after the second", attempt: 2, wantAt: NOW + 5 * MIN },
    { name: "after the third", attempt: 3, wantAt: NOW + 30 * MIN },
    { name: "after the fourth", attempt: 4, wantAt: NOW + 2 * H },
    { name: "after the fifth", attempt: 5, wantAt: NOW + 5 * H },
    { name: "after the sixth", attempt: 6, wantAt: NOW + 10 * H },
    { name: "after the seventh", attempt: 7, wantAt: NOW + 10 * H },
  ])("retries $name at the scheduled delay", ({ attempt, wantAt }) => {
    expect(decideAfterAttempt({ attempt, outcome: status(500), nowMs: NOW })).toEqual({
      kind: "retry",
      atMs: wantAt,
      nextAttempt: attempt + 1,
      reason: "HTTP 500",
    });
  });

  it("dead-letters after the eighth try", () => {
    expect(decideAfterAttempt({ attempt: 8, outcome: { kind: "timeout" }, nowMs: NOW }).kind).toBe("dead-letter");
  });

  it.each([
    { name: "attempt 1 has no delay (it is immediate)", next: 1, want: null },
    { name: "attempt 2", next: 2, want: 5 * S },
    { name: "attempt 9 is past the end", next: 9, want: null },
    { name: "non-integer", next: 2.5, want: null },
  ])("retryDelayMs: $name", ({ next, want }) => {
    expect(retryDelayMs(next)).toBe(want);
  });
});

describe("decideAfterAttempt: status handling", () => {
  it.each<{ name: string; outcome: HttpOutcome; want: RetryDecision["kind"] }>([
    { name: "200 is delivered", outcome: status(200), want: "delivered" },
    { name: "204 is delivered", outcome: status(204), want: "delivered" },
    { name: "299 is delivered", outcome: status(299), want: "delivered" },
    { name: "410 disables the endpoint", outcome: status(410), want: "disable-endpoint" },
    { name: "301 is a failure (not followed)", outcome: status(301), want: "retry" },
    { name: "308 is a failure (not followed)", outcome: status(308), want: "retry" },
    { name: "400 retries", outcome: status(400), want: "retry" },
    { name: "404 retries", outcome: status(404), want: "retry" },
    { name: "429 retries", outcome: status(429), want: "retry" },
    { name: "500 retries", outcome: status(500), want: "retry" },
    { name: "502 retries", outcome: status(502), want: "retry" },
    { name: "network error retries", outcome: { kind: "network-error", message: "ECONNREFUSED" }, want: "retry" },
    { name: "timeout retries", outcome: { kind: "timeout" }, want: "retry" },
    {
      name: "abort-message header dead-letters",
      outcome: status(400, undefined, "abort-message"),
      want: "dead-letter",
    },
    {
      name: "abort-message on a 2xx is still delivered",
      outcome: status(200, undefined, "abort-message"),
      want: "delivered",
    },
  ])("$name", ({ outcome, want }) => {
    expect(decideAfterAttempt({ attempt: 1, outcome, nowMs: NOW }).kind).toBe(want);
  });

  it("says redirects are not followed", () => {
    const d = decideAfterAttempt({ attempt: 1, outcome: status(302), nowMs: NOW });
    expect(d.kind === "retry" && d.reason).toContain("not followed");
  });
});

describe("Retry-After", () => {
  it.each([
    {
      name: "429 with a long delta wins over the schedule",
      outcome: status(429, "120"),
      attempt: 1,
      wantAt: NOW + 120 * S,
    },
    {
      name: "503 with a long delta wins over the schedule",
      outcome: status(503, "600"),
      attempt: 1,
      wantAt: NOW + 600 * S,
    },
    { name: "429 with a short delta keeps the schedule", outcome: status(429, "1"), attempt: 2, wantAt: NOW + 5 * MIN },
    {
      name: "429 with an HTTP-date",
      outcome: status(429, "Tue, 14 Nov 2023 23:13:20 GMT"),
      attempt: 1,
      wantAt: NOW + H,
    },
    {
      name: "503 with a date in the past keeps the schedule",
      outcome: status(503, "Tue, 14 Nov 2023 20:00:00 GMT"),
      attempt: 1,
      wantAt: NOW + 5 * S,
    },
    {
      name: "429 with a huge delta is capped at 24 h",
      outcome: status(429, "999999999"),
      attempt: 1,
      wantAt: NOW + 24 * H,
    },
    {
      name: "429 with an absurd delta is capped at 24 h",
      outcome: status(429, "99999999999999999999999"),
      attempt: 1,
      wantAt: NOW + 24 * H,
    },
    { name: "500 ignores Retry-After", outcome: status(500, "3600"), attempt: 1, wantAt: NOW + 5 * S },
    { name: "502 ignores Retry-After", outcome: status(502, "3600"), attempt: 1, wantAt: NOW + 5 * S },
    { name: "garbage Retry-After is ignored", outcome: status(429, "soon"), attempt: 1, wantAt: NOW + 5 * S },
  ])("$name", ({ outcome, attempt, wantAt }) => {
    const d = decideAfterAttempt({ attempt, outcome, nowMs: NOW });
    expect(d.kind === "retry" ? d.atMs : d.kind).toBe(wantAt);
  });

  it("still dead-letters after the last try", () => {
    expect(decideAfterAttempt({ attempt: 8, outcome: status(429, "10"), nowMs: NOW }).kind).toBe("dead-letter");
  });

  it.each([
    { name: "delta seconds", value: "30", want: 30 * S },
    { name: "zero", value: "0", want: 0 },
    { name: "IMF-fixdate", value: "Tue, 14 Nov 2023 22:14:20 GMT", want: 60 * S },
    { name: "RFC 850 date", value: "Tuesday, 14-Nov-23 22:14:20 GMT", want: 60 * S },
    { name: "asctime date", value: "Tue Nov 14 22:14:20 2023", want: 60 * S },
    { name: "negative", value: "-5", want: null },
    { name: "fraction", value: "1.5", want: null },
    { name: "ISO date is not an HTTP-date", value: "2023-11-14T22:14:20Z", want: null },
    { name: "empty", value: "", want: null },
    { name: "absent", value: null, want: null },
  ])("parseRetryAfter: $name", ({ value, want }) => {
    expect(parseRetryAfter(value, NOW)).toBe(want);
  });
});

describe("retry decisions: properties", () => {
  const outcomes = fc.oneof(
    fc
      .integer({ min: 300, max: 599 })
      .filter((s) => s !== 410)
      .map((s) => status(s)),
    fc.constant<HttpOutcome>({ kind: "timeout" }),
    fc.constant<HttpOutcome>({ kind: "network-error" }),
    fc.tuple(fc.constantFrom(429, 503), fc.nat({ max: 10 ** 9 })).map(([s, ra]) => status(s, String(ra))),
  );

  it("retries are in the future, bounded, and not earlier than the schedule", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 7 }), outcomes, fc.nat({ max: 2 ** 40 }), (attempt, outcome, nowMs) => {
        const d = decideAfterAttempt({ attempt, outcome, nowMs });
        expect(d.kind).toBe("retry");
        if (d.kind !== "retry") return;
        const scheduled = retryDelayMs(attempt + 1) ?? -1;
        expect(d.atMs - nowMs).toBeGreaterThanOrEqual(scheduled);
        expect(d.atMs - nowMs).toBeLessThanOrEqual(Math.max(10 * H, DEFAULT_RETRY_CONFIG.maxRetryAfterMs));
      }),
    );
  });

  it("the scheduled delay never shrinks as attempts grow", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), outcomes, (attempt, outcome) => {
        const a = decideAfterAttempt({ attempt, outcome, nowMs: NOW });
        const b = decideAfterAttempt({ attempt: attempt + 1, outcome, nowMs: NOW });
        if (a.kind === "retry" && b.kind === "retry") expect(b.atMs).toBeGreaterThanOrEqual(a.atMs);
      }),
    );
  });

  it("every failure ends in a dead letter within the schedule's length", () => {
    fc.assert(
      fc.property(outcomes, (outcome) => {
        let attempt = 1;
        let d = decideAfterAttempt({ attempt, outcome, nowMs: NOW });
        while (d.kind === "retry") {
          attempt = d.nextAttempt;
          d = decideAfterAttempt({ attempt, outcome, nowMs: d.atMs });
        }
        expect(d.kind).toBe("dead-letter");
        expect(attempt).toBe(maxAttempts());
      }),
    );
  });
});
