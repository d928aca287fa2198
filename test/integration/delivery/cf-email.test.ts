/**
 * The cf-email transport kind (worker/delivery/cf-email.ts) through the local
 * send_email simulation: a transport whose nexthop is "cf-email" hands each recipient's message
 * to the EMAIL binding; the scheduler, the Outbox and the index record the outcome as for SMTP.
 * A refusal the service gives for an address it will not send to is a bounce; any other error a
 * deferral; without the binding, a deferral that says so.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { sendViaEmailService } from "../../../worker/delivery/cf-email";
import type { PreparedJob } from "../../../worker/delivery/session";
import { callWithKey, email, newKey } from "../helpers";
import { recipientsWhen } from "./observe";

let key: string;
beforeAll(async () => {
  key = await newKey("acme");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('cfmail', 'cf-email')"),
    env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'cf.test', 'cfmail')"),
  ]);
});

const RAW =
  "From: Acme <no-reply@acme.test>\r\nTo: a@cf.test\r\nSubject: x\r\nMessage-ID: <m1@acme.test>\r\nDate: Thu, 26 Nov 2026 20:00:00 +0000\r\n\r\nhello\r\n";
const prepared = (): PreparedJob[] => [
  {
    job: {
      entryId: 7,
      messageId: "00000000-0000-4000-8000-000000000000",
      transport: "cfmail",
      nexthop: "cf-email",
      attempt: 1,
      rcpts: [{ idx: 0, address: "a@cf.test" }],
    } as unknown as PreparedJob["job"],
    envelope: {
      id: "00000000-0000-4000-8000-000000000000",
      mailFrom: "no-reply@acme.test",
      size: RAW.length,
      rcpts: [{ idx: 0, address: "a@cf.test", status: "ready", attempts: 0 }],
      body: RAW,
    },
    matched: [{ idx: 0, address: "a@cf.test", outboxIdx: 0, final: false }],
  },
];

describe("the cf-email transport kind", () => {
  it("delivers each recipient through the send_email binding, and the outcome is the recipient's", async () => {
    const res = await callWithKey(
      key,
      "POST",
      "/emails",
      email({ to: ["a@cf.test", "b@cf.test"], subject: "via Email Service" }),
    );
    expect(res.status).toBe(200);
    const { id } = await res.json<{ id: string }>();
    const rs = await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered through the binding", 15_000);
    for (const r of rs)
      expect(r.last_response).toMatchObject({
        code: 250,
        enhanced: "2.0.0",
        text: expect.stringMatching(/^accepted by Cloudflare Email Service/),
        mx: "email-service.cloudflare",
        tls: true,
      });
  });

  it("maps a refusal for the address to a bounce, other errors to a deferral, and a missing binding to a deferral", async () => {
    const refusing = {
      ...env,
      EMAIL: {
        send: async () => {
          throw new Error("destination address is not a verified address");
        },
      },
    } as unknown as Env;
    const failing = {
      ...env,
      EMAIL: {
        send: async () => {
          throw new Error("internal error, try again");
        },
      },
    } as unknown as Env;
    const none = { ...env, EMAIL: undefined } as unknown as Env;
    const got = async (e: Env) => (await sendViaEmailService(e, prepared()))[0]!.txn!.recipients[0];
    expect(await got(refusing)).toMatchObject({
      status: "bounced",
      code: 550,
      enhanced: "5.7.1",
      text: "destination address is not a verified address",
    });
    expect(await got(failing)).toMatchObject({ status: "deferred", code: 451, enhanced: "4.3.0" });
    expect(await got(none)).toMatchObject({
      status: "deferred",
      code: 451,
      text: expect.stringMatching(/no send_email binding/),
    });
    const big = prepared();
    big[0]!.envelope!.size = 6 * 1024 * 1024;
    expect((await sendViaEmailService(none, big))[0]!.txn!.recipients[0]).toMatchObject({
      status: "bounced",
      code: 552,
      enhanced: "5.3.4",
    });
    const calls: { from: string; to: string }[] = [];
    const recording = {
      ...env,
      EMAIL: {
        send: async (m: { from: string; to: string }) => {
          calls.push({ from: m.from, to: m.to });
        },
      },
    } as unknown as Env;
    expect(await got(recording)).toMatchObject({ status: "delivered", code: 250 });
    expect(calls).toEqual([{ from: "no-reply@acme.test", to: "a@cf.test" }]);
  });
});
