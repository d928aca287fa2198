/**
 * Cloudflare Email Service's sending events (worker/inbound/email-service.ts) through the real
 * `email-events` queue in workerd: a recipient handed to the service by the cf-email egress
 * (the local send_email simulation gives it a message id) gets each event type — delivered,
 * deferred, bounced, failed, rejected, complained — in its state (GET /emails/:id) and in its
 * webhooks' events (the D1 event log the webhooks and the feed publish from).
 */
import { createExecutionContext, createMessageBatch, env, getQueueResult } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import worker from "../../../worker/index";
import { callWithKey, email, eventually, getEmail, newKey, settle } from "../helpers";
import { recipientsWhen } from "./observe";

let key: string;

beforeAll(async () => {
  key = await newKey("cf-events");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('cfevents', 'cf-email')"),
    env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'cfevents.test', 'cfevents')"),
  ]);
});

/** Sends to `to` through Email Service; answers the email id and the service's message id. */
async function handOver(to: string): Promise<{ id: string; serviceId: string }> {
  const res = await callWithKey(key, "POST", "/emails", email({ to: [to] }));
  const { id } = await res.json<{ id: string }>();
  const [r] = await recipientsWhen(key, id, (x) => x.status === "delivered", "handed to Email Service", 15_000);
  const serviceId = /^accepted by Cloudflare Email Service (\S+)$/.exec(r!.last_response!.text!)![1]!;
  expect(
    await env.DB.prepare("SELECT email_id FROM cf_email_sends WHERE cf_message_id = ?")
      .bind(serviceId)
      .first<string>("email_id"),
  ).toBe(id);
  return { id, serviceId };
}

/** Runs the queue consumer on events, as the queue delivers them. */
async function publish(events: unknown[]) {
  const batch = createMessageBatch(
    "email-events",
    events.map((body, i) => ({ id: `m${i}-${Math.random()}`, timestamp: new Date(), attempts: 1, body })),
  );
  const ctx = createExecutionContext();
  await worker.queue!(batch, env, ctx);
  return getQueueResult(batch, ctx);
}

const event = (kind: string, serviceId: string, recipient: string, extra: Record<string, unknown> = {}) => ({
  type: `cf.email.sending.message.${kind}`,
  source: { type: "email.sending", zoneId: "z", domain: "acme.test" },
  payload: {
    eventId: crypto.randomUUID(),
    messageId: serviceId,
    sender: "no-reply@acme.test",
    recipient,
    terminal: true,
    ...extra,
  },
  metadata: {
    accountId: "a",
    eventSubscriptionId: "s",
    eventSchemaVersion: 1,
    eventTimestamp: new Date().toISOString(),
  },
});

const eventTypes = async (id: string) =>
  (
    await env.DB.prepare("SELECT type FROM event_log WHERE email_id = ? ORDER BY seq").bind(id).all<{ type: string }>()
  ).results.map((r) => r.type);

describe("Email Service's events", () => {
  it("delivered: the receiving server's reply becomes the recipient's last_response", async () => {
    const { id, serviceId } = await handOver("del@cfevents.test");
    const res = await publish([
      event("delivered", serviceId, "del@cfevents.test", {
        delivery: {
          status: "delivered",
          provider: "gmail",
          smtpStatusCode: "250",
          smtpEnhancedStatusCode: "2.0.0",
          smtpResponse: "250 2.0.0 OK 1714820445 - gsmtp",
        },
      }),
    ]);
    expect(res.explicitAcks).toHaveLength(1);
    const r = (await getEmail(key, id)).body.recipients[0] as unknown as { status: string; last_response: unknown };
    expect(r).toMatchObject({
      status: "delivered",
      last_response: {
        code: 250,
        enhanced: "2.0.0",
        text: "250 2.0.0 OK 1714820445 - gsmtp",
        mx: "email-service/gmail",
      },
    });
  });

  it("deferred: email.delivery_delayed with the receiving server's reply; bounced: a late bounce, email.bounced", async () => {
    const { id, serviceId } = await handOver("bob@cfevents.test");
    await publish([
      event("deferred", serviceId, "bob@cfevents.test", {
        terminal: false,
        delivery: {
          status: "deferred",
          provider: "external_smtp",
          smtpStatusCode: "451",
          smtpEnhancedStatusCode: "4.2.0",
          smtpResponse: "451 4.2.0 Temporary mailbox error",
        },
      }),
    ]);
    await eventually(
      async () => ((await eventTypes(id)).includes("email.delivery_delayed") ? true : undefined),
      10_000,
      "email.delivery_delayed in the event log",
    );
    await publish([
      event("bounced", serviceId, "bob@cfevents.test", {
        delivery: {
          status: "bounced",
          provider: "external_smtp",
          smtpStatusCode: "550",
          smtpEnhancedStatusCode: "5.1.1",
          smtpResponse: "550 5.1.1 User unknown",
        },
        bounce: { type: "hard", classification: "permanent_failure", reason: "550 5.1.1 User unknown" },
      }),
    ]);
    const [r] = await recipientsWhen(key, id, (x) => x.status === "bounced", "bounced", 10_000);
    expect(r!.last_response).toMatchObject({
      code: 550,
      enhanced: "5.1.1",
      text: "550 5.1.1 User unknown",
      mx: "email-service/external_smtp",
    });
    await eventually(
      async () => ((await eventTypes(id)).includes("email.bounced") ? true : undefined),
      10_000,
      "email.bounced in the event log",
    );
  });

  it("failed and rejected: late bounces saying so", async () => {
    const a = await handOver("fail@cfevents.test");
    const b = await handOver("rej@cfevents.test");
    await publish([
      event("failed", a.serviceId, "fail@cfevents.test", {
        delivery: { status: "failed" },
        failure: { reason: "delivery_failed" },
      }),
      event("rejected", b.serviceId, "rej@cfevents.test", {
        delivery: { status: "rejected" },
        rejection: { reason: "suppressed", party: "recipient", detail: "Recipient is suppressed" },
      }),
    ]);
    const [fa] = await recipientsWhen(key, a.id, (x) => x.status === "bounced", "bounced", 10_000);
    expect(fa!.last_response!.text).toBe("failed in Cloudflare Email Service: delivery_failed");
    const [rj] = await recipientsWhen(key, b.id, (x) => x.status === "bounced", "bounced", 10_000);
    expect(rj!.last_response).toMatchObject({
      code: 550,
      enhanced: "5.7.1",
      text: "rejected by Cloudflare Email Service: suppressed (Recipient is suppressed)",
    });
  });

  it("complained: email.complained; the same event again changes nothing; an unknown message id is acknowledged", async () => {
    const { id, serviceId } = await handOver("cmp@cfevents.test");
    const complaint = event("complained", serviceId, "cmp@cfevents.test", {
      delivery: { status: "complained" },
      complaint: { type: "abuse" },
    });
    const res = await publish([complaint, complaint, event("delivered", "not-ours", "x@cfevents.test")]);
    expect(res.explicitAcks).toHaveLength(3);
    await eventually(
      async () => ((await eventTypes(id)).filter((t) => t === "email.complained").length === 1 ? true : undefined),
      10_000,
      "one email.complained",
    );
    expect((await getEmail(key, id)).body.last_event).toBe("complained");
  });
});

describe("teardown", () => {
  it("lets the queues settle", async () => {
    await settle();
  });
});
