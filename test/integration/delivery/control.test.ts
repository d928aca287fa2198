/**
 * Operators' control of messages end to end (routes/control.ts → Outbox → Transport DOs):
 * hold and release, requeue after a route change, cancel one message or by domain filter with
 * email.canceled events, and tenant isolation. Destinations are held back with a transport
 * suspension so the recipients wait in the queue while the operator acts.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { callWithKey, email, eventually, getEmail, newKey } from "../helpers";
import { caught, recipientsWhen } from "./observe";

const sink = inject("sink");
let key: string;
let other: string;

beforeAll(async () => {
  key = await newKey("acme");
  other = await newKey("globex");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('ctl', ?), ('ctlrefused', ?)").bind(
      `[127.0.0.1]:${sink.smtpPort}`,
      `[127.0.0.1]:${sink.closedPort}`,
    ),
    env.DB.prepare(
      "INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'ctl-a.test', 'ctl'), " +
        "(NULL, 'ctl-b.test', 'ctl'), (NULL, 'ctl-move.test', 'ctlrefused')",
    ),
  ]);
});

async function send(to: string[], extra: Record<string, unknown> = {}): Promise<string> {
  const res = await callWithKey(key, "POST", "/emails", email({ to, subject: "control", ...extra }));
  expect(res.status).toBe(200);
  return (await res.json<{ id: string }>()).id;
}

const suspend = (on: boolean) =>
  env.TRANSPORT_QUEUE.getByName("ctl").setPolicy(
    "transport:ctl",
    on ? { suspendedUntil: Math.floor(Date.now() / 1000) + 3600 } : null,
  );
const atSink = async (rcpt: string) => (await caught(sink.httpPort)).filter((m) => m.rcptTo.includes(rcpt)).length;
const post = (k: string, path: string, body?: unknown) => callWithKey(k, "POST", path, body);

describe("hold and release", () => {
  it("a held message is not delivered when its destination opens, shows blocked_by held, and is delivered once released", async () => {
    await suspend(true);
    const id = await send(["hold-1@ctl-a.test"]);
    await recipientsWhen(key, id, (r) => r.status === "ready", "admitted");
    const held = await post(key, `/relay/messages/${id}/hold`);
    expect(held.status).toBe(200);
    expect(await held.json()).toEqual({ object: "email", id, action: "hold", recipients: 1 });
    expect((await post(key, `/relay/messages/${id}/hold`)).status).toBe(422); // already held
    expect((await env.TRANSPORT_QUEUE.getByName("ctl").inspect()).qshape[0]!.total).toBe(0);
    await suspend(false);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await atSink("hold-1@ctl-a.test")).toBe(0);
    expect((await getEmail(key, id)).body.recipients[0]!.blocked_by).toBe("held");
    const released = await post(key, `/relay/messages/${id}/release`);
    expect(released.status).toBe(200);
    await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered after release");
    expect(await atSink("hold-1@ctl-a.test")).toBe(1);
    expect((await post(key, `/relay/messages/${id}/release`)).status).toBe(422); // not held (done)
  });
});

describe("requeue", () => {
  it("after a route change, requeue sends the deferred recipients the new way", async () => {
    const id = await send(["move-1@ctl-move.test"]);
    await recipientsWhen(key, id, (r) => r.status === "deferred", "deferred at the refused destination");
    await env.DB.prepare("UPDATE routes SET transport = 'ctl' WHERE pattern = 'ctl-move.test'").run();
    const res = await post(key, `/relay/messages/${id}/requeue`);
    expect(res.status).toBe(200);
    await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered through the new route", 15_000);
    expect(await atSink("move-1@ctl-move.test")).toBe(1);
  });
});

describe("cancel", () => {
  it("cancels one message's waiting recipients with one email.canceled event each; nothing is sent later", async () => {
    await suspend(true);
    const id = await send(["c-1@ctl-a.test", "c-2@ctl-b.test"]);
    await recipientsWhen(key, id, (r) => r.status === "ready", "admitted");
    const res = await post(key, `/relay/messages/${id}/cancel`);
    expect(await res.json()).toEqual({ object: "email", id, action: "cancel", recipients: 2 });
    expect((await getEmail(key, id)).body.recipients.map((r) => r.status)).toEqual(["cancelled", "cancelled"]);
    const events = await eventually(
      async () => {
        const rows = (
          await env.DB.prepare(
            "SELECT recipient FROM event_log WHERE email_id = ? AND type = 'email.canceled' AND data IS NOT NULL ORDER BY recipient",
          )
            .bind(id)
            .all<{ recipient: string }>()
        ).results;
        return rows.length === 2 ? rows : undefined;
      },
      5000,
      "two email.canceled events in D1",
    );
    expect(events.map((e) => e.recipient)).toEqual(["c-1@ctl-a.test", "c-2@ctl-b.test"]);
    await suspend(false);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await atSink("c-1@ctl-a.test")).toBe(0);
    expect((await post(key, `/relay/messages/${id}/cancel`)).status).toBe(422);
  });

  it("cancels by domain only the recipients at that domain; the others are delivered", async () => {
    await suspend(true);
    const a = await send(["d-1@ctl-a.test", "d-2@ctl-b.test"]);
    const b = await send(["d-3@ctl-a.test"]);
    for (const id of [a, b]) await recipientsWhen(key, id, (r) => r.status === "ready", "admitted");
    // The filter reads the D1 index.
    await eventually(
      async () =>
        (await env.DB.prepare(
          "SELECT count(*) AS n FROM recipients_all WHERE message_id IN (?, ?) AND status = 'ready'",
        )
          .bind(a, b)
          .first<{ n: number }>())!.n === 3
          ? true
          : undefined,
      5000,
      "the index",
    );
    const res = await post(key, "/relay/messages/cancel", { domain: "CTL-A.test" });
    expect(await res.json()).toEqual({ object: "cancellation", messages: 2, recipients: 2, has_more: false });
    await suspend(false);
    const rs = await recipientsWhen(key, a, (r) => r.status === "cancelled" || r.status === "delivered", "final");
    expect(rs.map((r) => `${r.email}:${r.status}`)).toEqual(["d-1@ctl-a.test:cancelled", "d-2@ctl-b.test:delivered"]);
    expect((await getEmail(key, b)).body.recipients[0]!.status).toBe("cancelled");
    expect(await atSink("d-1@ctl-a.test")).toBe(0);
  });

  it("needs a filter, and a tenant key acts only on its own tenant's mail", async () => {
    expect((await post(key, "/relay/messages/cancel", {})).status).toBe(422);
    expect((await post(key, "/relay/messages/cancel", { tenant: "globex" })).status).toBe(403);
    const id = await send(["iso-1@ctl-a.test"]);
    expect((await post(other, `/relay/messages/${id}/hold`)).status).toBe(404);
    expect((await post(other, `/relay/messages/${id}/cancel`)).status).toBe(404);
    expect((await post(key, "/relay/messages/not-an-id/hold")).status).toBe(404);
  });
});
