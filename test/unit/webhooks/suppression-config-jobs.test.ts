import { describe, expect, it } from "vitest";
import { DEFAULT_HEALTH_CONFIG } from "../../../worker/webhooks/core/endpoint-health";
import { DEFAULT_EVENT_CONFIG } from "../../../worker/webhooks/core/events";
import { DEFAULT_RETRY_CONFIG, WEBHOOK_RETRY_DELAYS_MS } from "../../../worker/webhooks/core/retry";
import {
  suppressionFor,
  suppressionScopes,
  SUPPRESSION_TTL_MS,
} from "../../../worker/webhooks/core/suppression-policy";
import { parseWebhookConfig, WEBHOOK_TIMEOUT_MS } from "../../../worker/webhooks/core/webhook-config";
import {
  delaySecondsFor,
  isWebhookJob,
  JOB_BODY_LIMIT_BYTES,
  makeJob,
  MAX_DELAY_SECONDS,
} from "../../../worker/webhooks/jobs";

const NOW = 1_700_000_000_000;
const DAY = 86_400_000;

describe("suppressionFor", () => {
  it.each([
    {
      name: "invalid recipient: 30 days",
      type: "email.bounced",
      cls: "invalid_recipient",
      want: { reason: "bounce:invalid_recipient", expiresAtMs: NOW + 30 * DAY },
    },
    {
      name: "bad domain: 7 days",
      type: "email.bounced",
      cls: "bad_domain",
      want: { reason: "bounce:bad_domain", expiresAtMs: NOW + 7 * DAY },
    },
    {
      name: "mailbox full: 1 day",
      type: "email.bounced",
      cls: "mailbox_full",
      want: { reason: "bounce:mailbox_full", expiresAtMs: NOW + DAY },
    },
    {
      name: "unclassified 5xx: 7 days",
      type: "email.bounced",
      cls: null,
      want: { reason: "bounce:unknown", expiresAtMs: NOW + 7 * DAY },
    },
    {
      name: "complaint: forever",
      type: "email.complained",
      cls: null,
      want: { reason: "complaint", expiresAtMs: null },
    },
    { name: "policy bounce: not the address's fault", type: "email.bounced", cls: "policy", want: null },
    { name: "spam block: not the address's fault", type: "email.bounced", cls: "spam_block", want: null },
    { name: "expiry is no hard bounce", type: "email.failed", cls: "expired", want: null },
    { name: "delivered", type: "email.delivered", cls: null, want: null },
  ])("$name", ({ type, cls, want }) => {
    const got = suppressionFor({ type, data: { recipient: " Ann@Example.NET ", classification: cls } }, NOW);
    expect(got).toEqual(want === null ? null : { address: "ann@example.net", scope: "", ...want });
  });

  it("an unsubscribe suppresses bulk mail until removed, only its topic's when the email had one", () => {
    expect(
      suppressionFor(
        {
          type: "email.unsubscribed",
          data: { recipient: "Ann@Example.NET", classification: null, unsubscribe: { topic: null } },
        },
        NOW,
      ),
    ).toEqual({ address: "ann@example.net", scope: "bulk", reason: "unsubscribe", expiresAtMs: null });
    expect(
      suppressionFor(
        {
          type: "email.unsubscribed",
          data: { recipient: "ann@example.net", classification: null, unsubscribe: { topic: "news" } },
        },
        NOW,
      ),
    ).toEqual({ address: "ann@example.net", scope: "bulk:news", reason: "unsubscribe:news", expiresAtMs: null });
  });

  it("holds back transactional mail by '' entries only, bulk mail also by 'bulk', a topic's also by its own", () => {
    expect(suppressionScopes(undefined)).toEqual([""]);
    expect(suppressionScopes({ topic: null })).toEqual(["", "bulk"]);
    expect(suppressionScopes({ topic: "news" })).toEqual(["", "bulk", "bulk:news"]);
    // Every entry an event writes is held by exactly the emails it should hold.
    const scopeOf = (topic: string | null) =>
      suppressionFor(
        { type: "email.unsubscribed", data: { recipient: "a@b.c", classification: null, unsubscribe: { topic } } },
        NOW,
      )!.scope;
    expect(suppressionScopes(undefined)).not.toContain(scopeOf(null));
    expect(suppressionScopes({ topic: "other" })).not.toContain(scopeOf("news"));
    expect(suppressionScopes({ topic: null })).not.toContain(scopeOf("news"));
    expect(suppressionScopes({ topic: "news" })).toContain(scopeOf("news"));
    expect(suppressionScopes({ topic: "news" })).toContain(scopeOf(null));
  });

  it("keeps complaints forever and every other entry finite", () => {
    for (const [category, ttl] of Object.entries(SUPPRESSION_TTL_MS))
      expect(ttl === null, category).toBe(category === "complaint");
  });
});

describe("parseWebhookConfig", () => {
  it("gives exactly the production defaults with no vars", () => {
    const cfg = parseWebhookConfig({});
    expect(cfg.retry).toEqual(DEFAULT_RETRY_CONFIG);
    expect(cfg.health).toEqual(DEFAULT_HEALTH_CONFIG);
    expect(cfg.events).toEqual(DEFAULT_EVENT_CONFIG);
    expect(cfg.timeoutMs).toBe(WEBHOOK_TIMEOUT_MS);
    expect(cfg.warnings).toEqual([]);
  });

  it("scales the retry schedule and dead periods, and reads the delay-notice vars", () => {
    const cfg = parseWebhookConfig({
      WEBHOOK_RETRY_SCALE: "0.001",
      WEBHOOK_DELAYED_EVERY_NTH: "3",
      WEBHOOK_DELAYED_MIN_INTERVAL_SECONDS: "600",
      WEBHOOK_TIMEOUT_MS: "5000",
    });
    expect(cfg.retry.delaysMs).toEqual(WEBHOOK_RETRY_DELAYS_MS.map((d) => d / 1000));
    expect(cfg.health).toMatchObject({ minDeadMs: 60, maxDeadMs: 3600 });
    expect(cfg.events).toEqual({ delayedEveryNth: 3, delayedMinIntervalMs: 600_000 });
    expect(cfg.timeoutMs).toBe(5000);
  });

  it.each([
    { name: "scale above 1", vars: { WEBHOOK_RETRY_SCALE: "2" } },
    { name: "scale 0", vars: { WEBHOOK_RETRY_SCALE: "0" } },
    { name: "fractional Nth", vars: { WEBHOOK_DELAYED_EVERY_NTH: "1.5" } },
    { name: "negative interval", vars: { WEBHOOK_DELAYED_MIN_INTERVAL_SECONDS: "-1" } },
    { name: "timeout above 15 s", vars: { WEBHOOK_TIMEOUT_MS: "60000" } },
    { name: "not a number", vars: { WEBHOOK_RETRY_SCALE: "fast" } },
  ])("falls back to the default with a warning for $name", ({ vars }) => {
    const cfg = parseWebhookConfig(vars);
    expect(cfg.warnings).toHaveLength(1);
    expect(cfg.retry).toEqual(DEFAULT_RETRY_CONFIG);
    expect(cfg.timeoutMs).toBe(WEBHOOK_TIMEOUT_MS);
  });
});

describe("webhook jobs", () => {
  it("carries the body when it fits, and leaves it to D1 when it does not", () => {
    const small = makeJob("acme", "ep1", { id: "evt_1", type: "email.sent", body: "{}" });
    expect(small).toEqual({
      v: 1,
      tenant: "acme",
      endpointId: "ep1",
      eventId: "evt_1",
      type: "email.sent",
      attempt: 1,
      body: "{}",
    });
    const big = makeJob("acme", "ep1", {
      id: "evt_1",
      type: "email.sent",
      body: "é".repeat(JOB_BODY_LIMIT_BYTES / 2 + 1),
    });
    expect(big.body).toBeUndefined();
    expect(isWebhookJob(small) && isWebhookJob(big)).toBe(true);
  });

  it.each([
    { name: "due now", atMs: NOW, want: 0 },
    { name: "past due", atMs: NOW - 5000, want: 0 },
    { name: "rounded up", atMs: NOW + 1, want: 1 },
    { name: "5 minutes", atMs: NOW + 300_000, want: 300 },
    { name: "capped at 12 h", atMs: NOW + 36_000_000 * 2, want: MAX_DELAY_SECONDS },
  ])("queue delay: $name", ({ atMs, want }) => {
    expect(delaySecondsFor(atMs, NOW)).toBe(want);
  });

  it.each([
    { name: "null", body: null },
    { name: "wrong version", body: { v: 2, tenant: "a", endpointId: "e", eventId: "x", type: "t", attempt: 1 } },
    { name: "attempt 0", body: { v: 1, tenant: "a", endpointId: "e", eventId: "x", type: "t", attempt: 0 } },
    { name: "missing endpoint", body: { v: 1, tenant: "a", eventId: "x", type: "t", attempt: 1 } },
  ])("rejects a malformed job: $name", ({ body }) => {
    expect(isWebhookJob(body)).toBe(false);
  });
});
