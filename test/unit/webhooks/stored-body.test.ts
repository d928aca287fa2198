/**
 * An envelope stored without the fields its messages row holds (core/stored-body.ts): made whole
 * again byte for byte, and stored whole whenever the row could not give it back.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { buildEvent, EMAIL_EVENT_TYPES, type MessageInfo } from "../../../worker/webhooks/core/envelope";
import {
  compactBody,
  expandBody,
  ROW_COMPACT_MARK,
  type EventFields,
  type MessageFields,
} from "../../../worker/webhooks/core/stored-body";

/** The row indexStatements writes for a message (db/messages.ts messageFields). */
function rowOf(m: MessageInfo, subject: string | null): MessageFields {
  return {
    id: m.emailId,
    created_at: m.createdAtMs,
    from_addr: m.from,
    to_json: JSON.stringify(m.to),
    subject,
  };
}

const text = fc.string({ unit: "binary", maxLength: 40 });
const message = fc.record({
  emailId: fc.stringMatching(/^[0-9a-f]{32}$/),
  createdAtMs: fc.integer({ min: 0, max: 4_000_000_000_000 }),
  from: text,
  to: fc.array(text, { minLength: 1, maxLength: 12 }),
  subject: fc.option(text, { nil: null }),
  messageId: fc.option(text, { nil: null }),
  tags: fc.dictionary(fc.string({ maxLength: 8 }), text, { maxKeys: 3 }),
});
const event = fc.record({
  type: fc.constantFrom(...EMAIL_EVENT_TYPES.filter((t) => t !== "relay.complaint_rate.exceeded")),
  attempt: fc.nat(30),
  nowMs: fc.integer({ min: 0, max: 4_000_000_000_000 }),
  recipientIdx: fc.nat(11),
  delivery: fc.option(
    fc.record({
      smtpCode: fc.option(fc.integer({ min: 200, max: 599 }), { nil: null }),
      enhancedCode: fc.option(fc.constantFrom("2.0.0", "4.7.1", "5.1.1"), { nil: null }),
      response: text,
      mx: fc.option(text, { nil: null }),
      tls: fc.option(fc.boolean(), { nil: null }),
    }),
    { nil: null },
  ),
  reason: fc.option(text, { nil: null }),
});

describe("stored envelopes", () => {
  it("a compact body is made whole byte for byte from its messages row, and is shorter", () => {
    fc.assert(
      fc.property(message, event, ({ subject, ...m }, e) => {
        const info: MessageInfo = { ...m, subject: subject ?? "" };
        const body = JSON.stringify(
          buildEvent({ ...e, message: info, recipient: m.to[e.recipientIdx % m.to.length]! }).envelope,
        );
        const stored = compactBody(body, rowOf(info, subject));
        expect(stored.startsWith("~")).toBe(true);
        expect(stored.length).toBeLessThan(body.length);
        expect(expandBody(stored, rowOf(info, subject))).toBe(body);
      }),
      { numRuns: 500 },
    );
  });

  it("stores whole what a row would give back otherwise, and bodies of other shapes", () => {
    fc.assert(
      fc.property(message, event, text, ({ subject, ...m }, e, other) => {
        const info: MessageInfo = { ...m, subject: subject ?? "" };
        const body = JSON.stringify(buildEvent({ ...e, message: info, recipient: m.to[0]! }).envelope);
        const row = rowOf(info, subject);
        // Any one column that differs from what the envelope says keeps it whole.
        for (const wrong of [
          { ...row, id: `${row.id}x` },
          { ...row, created_at: row.created_at + 1 },
          { ...row, from_addr: `${row.from_addr}${other}x` },
          { ...row, to_json: JSON.stringify([...m.to, other]) },
          { ...row, subject: `${subject ?? ""}x` },
        ])
          expect(compactBody(body, wrong)).toBe(body);
      }),
      { numRuns: 200 },
    );
    const row = rowOf({ emailId: "e", createdAtMs: 0, from: "a", to: ["b"], subject: "s" }, "s");
    for (const body of ['{"id":"x"}', "[1,2]", "not json", '{"type":"email.received","created_at":"x","data":{"a":1}}'])
      expect(compactBody(body, row)).toBe(body);
    // A body stored whole reads as itself, with or without a row.
    expect(expandBody('{"type":"email.sent"}', null)).toBe('{"type":"email.sent"}');
    // A compact body without its row cannot be made whole.
    const b = JSON.stringify(
      buildEvent({
        type: "email.sent",
        message: { emailId: "e", createdAtMs: 0, from: "a", to: ["b"], subject: "s" },
        recipient: "b",
        attempt: 0,
        nowMs: 0,
      }).envelope,
    );
    expect(expandBody(compactBody(b, row), null)).toBeNull();
  });

  it("a body compact of its event's row too is shorter still, and any row it does not match keeps it whole", () => {
    const ev = fc.record({
      type: fc.option(fc.constantFrom(...EMAIL_EVENT_TYPES), { nil: null }),
      created_at: fc.integer({ min: 0, max: 4_000_000_000_000 }),
      recipient: fc.option(text, { nil: null }),
    });
    fc.assert(
      fc.property(message, event, ev, fc.boolean(), ({ subject, ...m }, e, other, own) => {
        const info: MessageInfo = {
          ...m,
          subject: subject ?? "",
          messageId: own ? `<${m.emailId}@relay.example>` : m.messageId,
        };
        const recipient = m.to[e.recipientIdx % m.to.length]!;
        const body = JSON.stringify(buildEvent({ ...e, message: info, recipient }).envelope);
        const row = rowOf(info, subject);
        const mine: EventFields = { type: e.type, created_at: e.nowMs, recipient };
        const stored = compactBody(body, row, mine);
        expect(stored.startsWith(ROW_COMPACT_MARK)).toBe(true);
        expect(stored.length).toBeLessThan(compactBody(body, row).length);
        expect(expandBody(stored, row, mine)).toBe(body);
        expect(expandBody(stored, row)).toBeNull();
        // Another event's row: whatever form it takes gives the body back from that row.
        expect(expandBody(compactBody(body, row, other), row, other)).toBe(body);
      }),
      { numRuns: 500 },
    );
  });
});
