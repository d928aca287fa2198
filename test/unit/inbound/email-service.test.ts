// Cloudflare Email Service's sending events as what they mean for a recipient (worker/inbound/core/email-service.ts).
import { describe, expect, it } from "vitest";
import { readEmailServiceEvent } from "../../../worker/inbound/core/email-service";

const ev = (kind: string, payload: Record<string, unknown> = {}) => ({
  type: `cf.email.sending.message.${kind}`,
  payload: { messageId: "m1", recipient: "u@example.net", ...payload },
});

describe("Email Service events", () => {
  it("maps each event type to one action", () => {
    const smtp = {
      status: "x",
      provider: "gmail",
      smtpStatusCode: "250",
      smtpEnhancedStatusCode: "2.0.0",
      smtpResponse: "250 2.0.0 OK",
    };
    expect(readEmailServiceEvent(ev("delivered", { delivery: smtp }))).toEqual({
      messageId: "m1",
      recipient: "u@example.net",
      action: {
        kind: "relayed",
        delayed: false,
        response: { code: 250, enhanced: "2.0.0", text: "250 2.0.0 OK", mx: "email-service/gmail" },
      },
    });
    expect(readEmailServiceEvent(ev("deferred", { delivery: { ...smtp, smtpStatusCode: "451" } }))).toMatchObject({
      action: { kind: "relayed", delayed: true, response: { code: 451 } },
    });
    expect(
      readEmailServiceEvent(ev("bounced", { delivery: { smtpStatusCode: "550", smtpResponse: "550 5.1.1 unknown" } })),
    ).toMatchObject({
      action: { kind: "bounce", response: { code: 550, text: "550 5.1.1 unknown", mx: "email-service" } },
    });
    expect(readEmailServiceEvent(ev("failed", { failure: { reason: "delivery_failed" } }))).toMatchObject({
      action: { kind: "bounce", response: { code: null, text: "failed in Cloudflare Email Service: delivery_failed" } },
    });
    expect(
      readEmailServiceEvent(ev("rejected", { rejection: { reason: "suppressed", detail: "Recipient is suppressed" } })),
    ).toMatchObject({ action: { kind: "bounce", response: { code: 550, enhanced: "5.7.1" } } });
    expect(readEmailServiceEvent(ev("complained", { complaint: { type: "abuse" } }))).toMatchObject({
      action: { kind: "complaint", feedbackType: "abuse" },
    });
  });

  it("refuses events of another shape", () => {
    expect(readEmailServiceEvent({ type: "cf.workers.x", payload: {} })).toMatchObject({ error: expect.any(String) });
    expect(readEmailServiceEvent(ev("opened"))).toMatchObject({ error: expect.stringMatching(/unknown/) });
    expect(
      readEmailServiceEvent({ type: "cf.email.sending.message.delivered", payload: { recipient: "u@x" } }),
    ).toMatchObject({ error: expect.any(String) });
    expect(readEmailServiceEvent(null)).toMatchObject({ error: expect.any(String) });
  });
});
