import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { emailOfEventId, eventId, fnv1a64, LEGACY_EVENT_ID } from "../../../worker/webhooks/core/event-id";
import { fnv1a64ByDefinition } from "../../../bench/fnv-reference";
import {
  buildEvent,
  EMAIL_EVENT_TYPES,
  toFeedItem,
  type DeliveryDetails,
  type EmailEventType,
  type MessageInfo,
} from "../../../worker/webhooks/core/envelope";
import {
  DEFAULT_EVENT_CONFIG,
  eventForTransition,
  INITIAL_DELAY_NOTICE,
  WebhookInvariantError,
  type DelayNoticeState,
  type EventConfig,
  type RecipientState,
  type RecipientTransition,
} from "../../../worker/webhooks/core/events";

const NOW = 1_700_000_000_000;
const MESSAGE: MessageInfo = {
  emailId: "4ef9a417-02e9-4d39-ad75-9611e0fcc33c",
  createdAtMs: NOW - 60_000,
  from: "Acme <onboarding@acme.example>",
  to: ["a@example.net", "b@example.org"],
  subject: "Welcome",
  messageId: "<4ef9a417@acme.example>",
  tags: { category: "welcome" },
};
const BOUNCE: DeliveryDetails = {
  smtpCode: 550,
  enhancedCode: "5.1.1",
  response: "550 5.1.1 The email account that you tried to reach does not exist",
  mx: "mx1.example.net",
  tls: true,
};
const DEFER: DeliveryDetails = {
  smtpCode: 451,
  enhancedCode: "4.4.1",
  response: "connection timed out",
  mx: "mx1.example.net",
  tls: null,
};
const OK: DeliveryDetails = {
  smtpCode: 250,
  enhancedCode: "2.0.0",
  response: "250 2.0.0 OK queued",
  mx: "mx1.example.net",
  tls: true,
};

function transition(
  from: RecipientState,
  to: RecipientState,
  extra: Partial<RecipientTransition> = {},
): RecipientTransition {
  return { message: MESSAGE, recipient: "a@example.net", from, to, attempt: 1, ...extra };
}

describe("eventForTransition: which event", () => {
  it.each<{
    name: string;
    from: RecipientState;
    to: RecipientState;
    delivery?: DeliveryDetails;
    want: EmailEventType | null;
    terminal?: boolean;
  }>([
    { name: "accepted (incoming → ready) is sent", from: "incoming", to: "ready", want: "email.sent", terminal: false },
    { name: "incoming → active is sent", from: "incoming", to: "active", want: "email.sent", terminal: false },
    {
      name: "active → delivered",
      from: "active",
      to: "delivered",
      delivery: OK,
      want: "email.delivered",
      terminal: true,
    },
    {
      name: "active → bounced",
      from: "active",
      to: "bounced",
      delivery: BOUNCE,
      want: "email.bounced",
      terminal: true,
    },
    { name: "deferred → expired is failed", from: "deferred", to: "expired", want: "email.failed", terminal: true },
    { name: "active → failed (internal error)", from: "active", to: "failed", want: "email.failed", terminal: true },
    { name: "incoming → suppressed", from: "incoming", to: "suppressed", want: "email.suppressed", terminal: true },
    { name: "ready → cancelled", from: "ready", to: "cancelled", want: "email.canceled", terminal: true },
    {
      name: "active → deferred (first) is delayed",
      from: "active",
      to: "deferred",
      delivery: DEFER,
      want: "email.delivery_delayed",
      terminal: false,
    },
    { name: "ready → active is silent", from: "ready", to: "active", want: null },
    { name: "deferred → ready is silent", from: "deferred", to: "ready", want: null },
    { name: "deferred → active is silent", from: "deferred", to: "active", want: null },
    { name: "no change is silent", from: "active", to: "active", want: null },
  ])("$name", ({ from, to, delivery, want, terminal }) => {
    const { event } = eventForTransition(INITIAL_DELAY_NOTICE, transition(from, to, delivery ? { delivery } : {}), NOW);
    expect(event?.envelope.type ?? null).toBe(want);
    if (event) expect(event.envelope.data.terminal).toBe(terminal);
  });

  it.each<RecipientState>(["delivered", "bounced", "expired", "suppressed", "cancelled", "failed"])(
    "throws an invariant error when leaving terminal state %s",
    (from) => {
      expect(() => eventForTransition(INITIAL_DELAY_NOTICE, transition(from, "active"), NOW)).toThrow(
        WebhookInvariantError,
      );
    },
  );
});

describe("envelope", () => {
  it("has Resend's shape plus the relay's additive fields", () => {
    const { event } = eventForTransition(
      INITIAL_DELAY_NOTICE,
      transition("active", "bounced", { delivery: BOUNCE, attempt: 3 }),
      NOW,
    );
    expect(event?.envelope).toEqual({
      type: "email.bounced",
      created_at: "2023-11-14T22:13:20.000Z",
      data: {
        email_id: MESSAGE.emailId,
        created_at: "2023-11-14T22:12:20.000Z",
        from: MESSAGE.from,
        to: ["a@example.net", "b@example.org"],
        subject: "Welcome",
        message_id: "<4ef9a417@acme.example>",
        tags: { category: "welcome" },
        recipient: "a@example.net",
        attempt: 3,
        terminal: true,
        delivery: {
          smtp_code: 550,
          enhanced_code: "5.1.1",
          response: BOUNCE.response,
          mx: "mx1.example.net",
          tls: true,
        },
        classification: "invalid_recipient",
        bounce: { type: "Permanent", subType: "invalid_recipient", message: BOUNCE.response },
      },
    });
  });

  it.each<{ name: string; t: RecipientTransition; want: unknown }>([
    {
      name: "expiry is classified expired",
      t: transition("deferred", "expired", { delivery: DEFER }),
      want: { classification: "expired", failed: { reason: "expired" } },
    },
    {
      name: "internal error keeps its reason",
      t: transition("active", "failed", { reason: "render error" }),
      want: { classification: null, failed: { reason: "render error" } },
    },
    {
      name: "suppression carries its type",
      t: transition("incoming", "suppressed", { reason: "hard_bounce" }),
      want: { classification: null, suppressed: { type: "hard_bounce", message: "" } },
    },
    {
      name: "a deferral is classified",
      t: transition("active", "deferred", { delivery: DEFER }),
      want: { classification: "timeout", terminal: false },
    },
    {
      name: "delivered has no classification",
      t: transition("active", "delivered", { delivery: OK }),
      want: { classification: null, terminal: true },
    },
    {
      name: "bounce without SMTP detail is unknown",
      t: transition("active", "bounced"),
      want: { classification: "unknown", delivery: null },
    },
  ])("$name", ({ t, want }) => {
    const { event } = eventForTransition(INITIAL_DELAY_NOTICE, t, NOW);
    expect(event?.envelope.data).toMatchObject(want as object);
  });

  it("omits message_id when there is none and copies tags", () => {
    const tags = { a: "1" };
    const ev = buildEvent({
      type: "email.sent",
      message: { ...MESSAGE, messageId: null, tags },
      recipient: "a@example.net",
      attempt: 0,
      nowMs: NOW,
    });
    expect("message_id" in ev.envelope.data).toBe(false);
    expect(ev.envelope.data.tags).toEqual(tags);
    expect(ev.envelope.data.tags).not.toBe(tags);
  });

  it("feed items are the envelope plus the same id", () => {
    const ev = buildEvent({
      type: "email.delivered",
      message: MESSAGE,
      recipient: "a@example.net",
      attempt: 1,
      nowMs: NOW,
      delivery: OK,
    });
    expect(toFeedItem(ev)).toEqual({ id: ev.id, ...ev.envelope });
  });

  const eventTypesTitle =
    "covers Resend's nine event types (email.received too) and the relay's " +
    "email.unsubscribed, relay.destination.throttled and relay.complaint_rate.exceeded";
  it(eventTypesTitle, () => {
    expect([...EMAIL_EVENT_TYPES].sort()).toEqual([
      "email.bounced",
      "email.canceled",
      "email.complained",
      "email.delivered",
      "email.delivery_delayed",
      "email.failed",
      "email.received",
      "email.sent",
      "email.suppressed",
      "email.unsubscribed",
      "relay.complaint_rate.exceeded",
      "relay.destination.throttled",
    ]);
  });

  it("an unsubscribe names its topic and how it came, and is not terminal", () => {
    const ev = buildEvent({
      type: "email.unsubscribed",
      message: MESSAGE,
      recipient: "a@example.net",
      attempt: 0,
      nowMs: NOW,
      reason: "news",
      method: "mailto",
    });
    expect(ev.envelope.data).toMatchObject({
      recipient: "a@example.net",
      terminal: false,
      unsubscribe: { topic: "news", method: "mailto" },
    });
  });

  it("a throttle names the reply rule, the policy key it suspended and until when, and is not terminal", () => {
    const ev = buildEvent({
      type: "relay.destination.throttled",
      message: MESSAGE,
      recipient: "a@example.net",
      attempt: 1,
      nowMs: NOW,
      throttle: { rule: "yahoo-tss04", policyKey: "site:yahoo", suspendedUntilMs: NOW + 3_600_000 },
    });
    expect(ev.envelope.data).toMatchObject({
      recipient: "a@example.net",
      attempt: 1,
      terminal: false,
      throttle: {
        rule: "yahoo-tss04",
        policy_key: "site:yahoo",
        suspended_until: new Date(NOW + 3_600_000).toISOString(),
      },
    });
  });

  it("a complaint carries its feedback type, is not terminal and has no classification", () => {
    const ev = buildEvent({
      type: "email.complained",
      message: MESSAGE,
      recipient: "a@example.net",
      attempt: 0,
      nowMs: NOW,
      reason: "fraud",
    });
    expect(ev.envelope.data).toMatchObject({
      recipient: "a@example.net",
      terminal: false,
      classification: null,
      delivery: null,
      complaint: { feedback_type: "fraud" },
    });
    expect(
      buildEvent({ type: "email.complained", message: MESSAGE, recipient: "a@example.net", attempt: 0, nowMs: NOW })
        .envelope.data.complaint,
    ).toEqual({ feedback_type: "abuse" });
  });
});

describe("event ids", () => {
  it("are deterministic from (email id, recipient, attempt, type)", () => {
    const t = transition("active", "bounced", { delivery: BOUNCE, attempt: 2 });
    const a = eventForTransition(INITIAL_DELAY_NOTICE, t, NOW).event;
    const b = eventForTransition(INITIAL_DELAY_NOTICE, t, NOW + 99_000).event;
    expect(a?.id).toBe(b?.id);
    expect(a?.id).toBe(
      eventId({ emailId: MESSAGE.emailId, recipient: "a@example.net", attempt: 2, type: "email.bounced" }),
    );
    expect(a?.id).toBe(`evt_${MESSAGE.emailId}_${a!.id.slice(-16)}`);
    expect(a?.id).toMatch(/^evt_[0-9a-f-]{36}_[0-9a-f]{16}$/);
  });

  it("name their email, and the earlier form (32 hex digits) names none", () => {
    fc.assert(
      fc.property(fc.uuid(), fc.string(), fc.nat(20), (emailId, recipient, attempt) => {
        expect(emailOfEventId(eventId({ emailId, recipient, attempt, type: "email.sent" }))).toBe(emailId);
      }),
    );
    expect(emailOfEventId("evt_0123456789abcdef0123456789abcdef")).toBeNull();
    expect(LEGACY_EVENT_ID.test("evt_0123456789abcdef0123456789abcdef")).toBe(true);
    for (const bad of [
      "evt_",
      "evt__0123456789abcdef",
      "msg_x_0123456789abcdef",
      "evt_m1_0123",
      `evt_${MESSAGE.emailId}_0123456789ABCDEF`,
    ])
      expect(emailOfEventId(bad)).toBeNull();
  });

  it("use a supplied id when given", () => {
    const { event } = eventForTransition(
      INITIAL_DELAY_NOTICE,
      transition("active", "delivered", { id: "msg_supplied" }),
      NOW,
    );
    expect(event?.id).toBe("msg_supplied");
  });

  it.each([
    { name: "recipient", other: { recipient: "b@example.net" } },
    { name: "attempt", other: { attempt: 2 } },
    { name: "type", other: { type: "email.delivered" } },
    { name: "email id", other: { emailId: "other" } },
    { name: "field boundary", other: { emailId: "4ef9a417-02e9-4d39-ad75-9611e0fcc33ca@example.net", recipient: "" } },
  ])("differ when the $name differs", ({ other }) => {
    const base = { emailId: MESSAGE.emailId, recipient: "a@example.net", attempt: 1, type: "email.bounced" };
    expect(eventId({ ...base, ...other })).not.toBe(eventId(base));
  });

  it("keep their value: ids already stored and sent as webhook-id never change", () => {
    expect(
      eventId({
        emailId: "0190c0de-aaaa-4bbb-8ccc-0123456789ab",
        recipient: "jöhn.dœ@exämple.test",
        attempt: 3,
        type: "email.delivered",
      }),
    ).toBe("evt_0190c0de-aaaa-4bbb-8ccc-0123456789ab_74f9d083b39c1d65");
    // FNV-1a 64's published vectors (ASCII: one code unit per byte).
    expect([fnv1a64(""), fnv1a64("a"), fnv1a64("foobar")]).toEqual([
      0xcbf29ce484222325n,
      0xaf63dc4c8601ec8cn,
      0x85944171f73967e8n,
    ]);
  });

  it("hash as FNV-1a 64 defined over BigInt, for any UTF-16 text and offset basis", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "binary", maxLength: 300 }),
        fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
        (text, basis) => {
          expect(fnv1a64(text, basis)).toBe(fnv1a64ByDefinition(text, basis));
          expect(fnv1a64(text)).toBe(fnv1a64ByDefinition(text));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("do not collide over random identities", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.tuple(fc.string(), fc.string(), fc.nat(20)), {
          minLength: 2,
          maxLength: 50,
          selector: (x) => JSON.stringify(x),
        }),
        (ids) => {
          const out = ids.map(([e, r, a]) => eventId({ emailId: e, recipient: r, attempt: a, type: "email.sent" }));
          expect(new Set(out).size).toBe(out.length);
        },
      ),
    );
  });
});

describe("delivery_delayed repetition", () => {
  /** Runs n deferrals, dt ms apart, and returns the 1-based deferrals that produced an event. */
  function notices(n: number, dtMs: number, cfg: EventConfig): number[] {
    let notice: DelayNoticeState = INITIAL_DELAY_NOTICE;
    const out: number[] = [];
    for (let i = 1; i <= n; i++) {
      const r = eventForTransition(
        notice,
        transition("active", "deferred", { delivery: DEFER, attempt: i }),
        NOW + i * dtMs,
        cfg,
      );
      notice = r.notice;
      if (r.event) out.push(i);
    }
    return out;
  }

  it.each([
    { name: "default: first deferral only", cfg: DEFAULT_EVENT_CONFIG, dt: 60_000, want: [1] },
    {
      name: "every 3rd deferral",
      cfg: { delayedEveryNth: 3, delayedMinIntervalMs: 0 },
      dt: 60_000,
      want: [1, 4, 7, 10],
    },
    {
      name: "every deferral",
      cfg: { delayedEveryNth: 1, delayedMinIntervalMs: 0 },
      dt: 60_000,
      want: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
    },
    {
      name: "at least 3 min apart",
      cfg: { delayedEveryNth: 0, delayedMinIntervalMs: 180_000 },
      dt: 60_000,
      want: [1, 4, 7, 10],
    },
    {
      name: "either condition",
      cfg: { delayedEveryNth: 5, delayedMinIntervalMs: 240_000 },
      dt: 60_000,
      want: [1, 5, 6, 10],
    },
  ])("$name", ({ cfg, dt, want }) => {
    expect(notices(10, dt, cfg)).toEqual(want);
  });

  it("counts deferrals in the notice state, which round-trips through JSON", () => {
    let notice: DelayNoticeState = INITIAL_DELAY_NOTICE;
    for (let i = 1; i <= 3; i++)
      notice = eventForTransition(notice, transition("active", "deferred", { attempt: i }), NOW + i).notice;
    expect(notice).toEqual({ v: 1, deferrals: 3, lastNoticeMs: NOW + 1 });
    expect(JSON.parse(JSON.stringify(notice))).toEqual(notice);
  });
});
