import { describe, expect, it } from "vitest";
import type { MessageInfo } from "../../../worker/webhooks/core/envelope";
import { INITIAL_DELAY_NOTICE, type EventConfig } from "../../../worker/webhooks/core/events";
import {
  deliveryFrom,
  endpointWants,
  noticeKey,
  planPublication,
  type NoticeRecord,
  type SourceEvent,
  type SourceMessage,
} from "../../../worker/webhooks/core/publication";

const NOW = 1_700_000_000_000;
const MESSAGE: MessageInfo = {
  emailId: "0f000000-0000-4000-8000-000000000001",
  createdAtMs: NOW,
  from: "a@acme.test",
  to: ["x@example.net", "y@example.net"],
  subject: "Hi",
  messageId: "<m@acme.test>",
  tags: { k: "v" },
};
const DEFER = { code: 451, enhanced: "4.3.0", text: "451 4.3.0 try later", mx: "mx.example.net", tls: false };
const BOUNCE = { code: 550, enhanced: "5.1.1", text: "550 5.1.1 no such user", mx: "mx.example.net", tls: true };
const FIRST_ONLY: EventConfig = { delayedEveryNth: 0, delayedMinIntervalMs: 0 };

function msg(events: SourceEvent[], cancelled: string[] = []): SourceMessage {
  return { message: MESSAGE, tenant: "acme", cancelledRecipients: cancelled, events };
}

function row(
  seq: number,
  type: string,
  recipient: string | null,
  data: Record<string, unknown> = {},
  atMs = NOW + seq * 1000,
): SourceEvent {
  return { seq, type, recipient, createdAtMs: atMs, data };
}

const deferral = (seq: number, attempt: number, atMs?: number) =>
  row(seq, "email.delivery_delayed", "x@example.net", { attempt, response: DEFER }, atMs);

describe("planPublication", () => {
  it.each([
    {
      name: "accepted and scheduled are not pushed",
      rows: [row(1, "email.accepted", null), row(2, "email.scheduled", null)],
      want: [],
    },
    {
      name: "queued is Resend's email.sent",
      rows: [row(1, "email.queued", "x@example.net", { transport: "smtp" })],
      want: ["email.sent x@example.net"],
    },
    {
      name: "delivered and bounced keep their type",
      rows: [
        row(1, "email.delivered", "x@example.net", { attempt: 1 }),
        row(2, "email.bounced", "y@example.net", { attempt: 1, response: BOUNCE }),
      ],
      want: ["email.delivered x@example.net", "email.bounced y@example.net"],
    },
    {
      name: "expiry is email.failed",
      rows: [row(1, "email.failed", "x@example.net", { attempt: 3, reason: "expired" })],
      want: ["email.failed x@example.net"],
    },
    {
      name: "suppressed is pushed",
      rows: [row(1, "email.suppressed", "x@example.net", { reason: "on the suppression list" })],
      want: ["email.suppressed x@example.net"],
    },
    { name: "an unknown internal type is skipped", rows: [row(1, "email.rewritten", "x@example.net")], want: [] },
  ])("$name", ({ rows, want }) => {
    const plan = planPublication([msg(rows)], new Map(), FIRST_ONLY);
    expect(plan.events.map((e) => `${e.type} ${e.recipient}`)).toEqual(want);
  });

  it("expands a message-level email.canceled to one event per cancelled recipient", () => {
    const plan = planPublication(
      [msg([row(1, "email.canceled", null)], ["x@example.net", "y@example.net"])],
      new Map(),
      FIRST_ONLY,
    );
    expect(plan.events.map((e) => `${e.type} ${e.recipient}`)).toEqual([
      "email.canceled x@example.net",
      "email.canceled y@example.net",
    ]);
    expect(new Set(plan.events.map((e) => e.id)).size).toBe(2);
  });

  it("expands a message-level email.queued to one email.sent per listed recipient, each as its own row would give", () => {
    const merged = planPublication(
      [msg([row(1, "email.queued", null, { recipients: ["x@example.net", "y@example.net", 7] })])],
      new Map(),
      FIRST_ONLY,
    );
    expect(merged.events.map((e) => `${e.type} ${e.recipient}`)).toEqual([
      "email.sent x@example.net",
      "email.sent y@example.net",
    ]);
    // The same envelopes, ids and bytes as one row per recipient would have given.
    const single = planPublication(
      [
        msg([
          row(1, "email.queued", "x@example.net", { transport: "smtp" }),
          row(1, "email.queued", "y@example.net", { transport: "smtp" }),
        ]),
      ],
      new Map(),
      FIRST_ONLY,
    );
    expect(merged.events.map((e) => [e.id, e.body])).toEqual(single.events.map((e) => [e.id, e.body]));
    expect(planPublication([msg([row(1, "email.queued", null, {})])], new Map(), FIRST_ONLY).events).toEqual([]);
  });

  it("stores the envelope as the exact JSON pushed, with the bounce details and category", () => {
    const plan = planPublication(
      [msg([row(1, "email.bounced", "y@example.net", { attempt: 2, response: BOUNCE })])],
      new Map(),
      FIRST_ONLY,
    );
    const e = plan.events[0]!;
    const env = JSON.parse(e.body) as { type: string; created_at: string; data: Record<string, unknown> };
    expect(Object.keys(env)).toEqual(["type", "created_at", "data"]);
    expect(env.created_at).toBe(new Date(e.createdAtMs).toISOString());
    expect(env.data).toMatchObject({
      email_id: MESSAGE.emailId,
      recipient: "y@example.net",
      attempt: 2,
      terminal: true,
      classification: "invalid_recipient",
      delivery: { smtp_code: 550, enhanced_code: "5.1.1", mx: "mx.example.net", tls: true },
    });
    expect(e.id).toMatch(new RegExp(`^evt_${MESSAGE.emailId}_[0-9a-f]{16}$`));
  });

  it("gives the same ids and bytes when the same rows are planned again", () => {
    const rows = [row(1, "email.queued", "x@example.net"), row(2, "email.delivered", "x@example.net", { attempt: 1 })];
    expect(planPublication([msg(rows)], new Map(), FIRST_ONLY).events).toEqual(
      planPublication([msg(rows)], new Map(), FIRST_ONLY).events,
    );
  });

  it("sends delivery_delayed on the first deferral only by default, counting every deferral", () => {
    const plan = planPublication([msg([deferral(1, 1), deferral(2, 2), deferral(3, 3)])], new Map(), FIRST_ONLY);
    expect(plan.events.map((e) => JSON.parse(e.body).data.attempt)).toEqual([1]);
    expect(plan.notices).toEqual([
      {
        emailId: MESSAGE.emailId,
        recipient: "x@example.net",
        lastSourceSeq: 3,
        state: { v: 1, deferrals: 3, lastNoticeMs: NOW + 1000 },
      },
    ]);
  });

  it.each([
    { name: "every 3rd deferral", cfg: { delayedEveryNth: 3, delayedMinIntervalMs: 0 }, want: [1, 4] },
    { name: "every 10 minutes", cfg: { delayedEveryNth: 0, delayedMinIntervalMs: 600_000 }, want: [1, 3, 5] },
    { name: "every 20 minutes", cfg: { delayedEveryNth: 0, delayedMinIntervalMs: 1_200_000 }, want: [1, 5] },
  ])("repeats delivery_delayed as configured: $name", ({ cfg, want }) => {
    const rows = [1, 2, 3, 4, 5].map((n) => deferral(n, n, NOW + (n - 1) * 300_000)); // one every 5 minutes
    const plan = planPublication([msg(rows)], new Map(), cfg);
    expect(plan.events.map((e) => JSON.parse(e.body).data.attempt)).toEqual(want);
  });

  it("continues from the stored notice state, across publications", () => {
    const stored: NoticeRecord = {
      emailId: MESSAGE.emailId,
      recipient: "x@example.net",
      lastSourceSeq: 1,
      state: { v: 1, deferrals: 1, lastNoticeMs: NOW },
    };
    const notices = new Map([[noticeKey(MESSAGE.emailId, "x@example.net"), stored]]);
    const plan = planPublication([msg([deferral(2, 2), deferral(3, 3)])], notices, {
      delayedEveryNth: 2,
      delayedMinIntervalMs: 0,
    });
    expect(plan.events.map((e) => JSON.parse(e.body).data.attempt)).toEqual([3]);
    expect(plan.notices[0]).toMatchObject({ lastSourceSeq: 3, state: { deferrals: 3 } });
  });

  it("never counts a deferral twice: an already counted row is only rechecked", () => {
    const first = planPublication([msg([deferral(1, 1)])], new Map(), FIRST_ONLY);
    const stored = new Map(first.notices.map((n) => [noticeKey(n.emailId, n.recipient), n]));
    const again = planPublication([msg([deferral(1, 1)])], stored, FIRST_ONLY);
    expect(again.events).toEqual([]);
    expect(again.notices).toEqual([]);
    expect(again.recheck).toEqual([first.events[0]!.id]);
  });

  it("starts from the initial notice state for a recipient never deferred", () => {
    const plan = planPublication([msg([deferral(7, 1)])], new Map(), FIRST_ONLY);
    expect(plan.notices[0]!.state).toEqual({ ...INITIAL_DELAY_NOTICE, deferrals: 1, lastNoticeMs: NOW + 7000 });
  });
});

describe("deliveryFrom", () => {
  it.each([
    {
      name: "full response",
      input: BOUNCE,
      want: {
        smtpCode: 550,
        enhancedCode: "5.1.1",
        response: "550 5.1.1 no such user",
        mx: "mx.example.net",
        tls: true,
      },
    },
    {
      name: "partial response",
      input: { text: "timeout" },
      want: { smtpCode: null, enhancedCode: null, response: "timeout", mx: null, tls: null },
    },
    { name: "null", input: null, want: null },
    { name: "not an object", input: "550", want: null },
  ])("reads $name", ({ input, want }) => {
    expect(deliveryFrom(input)).toEqual(want);
  });
});

describe("endpointWants", () => {
  it.each([
    { name: "no filter takes everything", filter: null, type: "email.bounced", want: true },
    { name: "listed type", filter: ["email.bounced"], type: "email.bounced", want: true },
    { name: "unlisted type", filter: ["email.delivered"], type: "email.bounced", want: false },
  ])("$name", ({ filter, type, want }) => {
    expect(endpointWants(filter, type)).toBe(want);
  });
});
