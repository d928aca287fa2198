/** The classify consumer: rewriting, routes, suppressions, admission, the D1 index and event log, per-message ack/retry. */
import { createExecutionContext, createMessageBatch, env, getQueueResult, runInDurableObject } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listEvents } from "../../worker/db/events";
import worker from "../../worker";
import { callWithKey, classified, email, eventually, getEmail, newKey, settle } from "./helpers";
import { recipientsFrom } from "../../durable-objects/transport/sqlite-source";

let key: string;
beforeAll(async () => {
  key = await newKey("acme");
  const now = Date.now();
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('relay', '[smtp.relay.test]:587'), ('bulk', NULL)"),
    env.DB.prepare(
      "INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'corp.example', 'relay'), (NULL, '*.big.example', 'bulk')",
    ),
    env.DB.prepare(
      "INSERT INTO suppressions (tenant_id, address, reason, created_at, expires_at) VALUES " +
        "('acme', 'gone@example.com', 'hard_bounce', ?1, NULL), ('*', " +
        "'everyone-hates@example.com', 'complaint', ?1, NULL), ('acme', 'was-soft@example.com', " +
        "'soft_bounce', ?1, ?2)",
    ).bind(now, now - 1000),
  ]);
});
afterAll(() => settle());

function admittedIn(transport: string, id: string): Promise<string[]> {
  return runInDurableObject(env.TRANSPORT_QUEUE.getByName(transport), (_o, state) =>
    recipientsFrom(state.storage.sql, id, 0)
      .map((r) => r.address)
      .sort(),
  );
}

async function send(body: Record<string, unknown>): Promise<string> {
  return (await (await callWithKey(key, "POST", "/emails", body)).json<{ id: string }>()).id;
}

describe("the classify consumer", () => {
  it("rewrites, resolves through the routes table and admits each recipient to its Transport DO", async () => {
    const id = await send(
      email({ to: ["a@Corp.Example", "b@mx.big.example", "c@elsewhere.test", "d@Bücher.example"] }),
    );
    const body = await classified(key, id);
    expect(body.recipients.map((r) => [r.email, r.status])).toEqual([
      ["a@corp.example", "ready"],
      ["b@mx.big.example", "ready"],
      ["c@elsewhere.test", "ready"],
      ["d@xn--bcher-kva.example", "ready"],
    ]);
    expect(await admittedIn("relay", id)).toEqual(["a@corp.example"]);
    expect(await admittedIn("bulk", id)).toEqual(["b@mx.big.example"]);
    expect(await admittedIn("smtp", id)).toEqual(["c@elsewhere.test", "d@xn--bcher-kva.example"]);
  });

  it("ends suppressed recipients as suppressed with an event, and admits only the others", async () => {
    const id = await send(
      email({ to: ["gone@example.com", "Everyone-Hates@example.com", "was-soft@example.com", "fine@example.com"] }),
    );
    const body = await classified(key, id);
    expect(body.recipients.map((r) => [r.email, r.status, r.blocked_by])).toEqual([
      ["gone@example.com", "suppressed", "suppressed"],
      ["Everyone-Hates@example.com", "suppressed", "suppressed"],
      // Admitted and selectable (dispatch is manual in this project): the core says "queued".
      ["was-soft@example.com", "ready", "queued"],
      ["fine@example.com", "ready", "queued"],
    ]);
    expect(await admittedIn("smtp", id)).toEqual(["fine@example.com", "was-soft@example.com"]);
    await settle();
    const events = (await listEvents(env.DB, "acme", 0, 1000)).filter((e) => e.email_id === id);
    expect(events.filter((e) => e.type === "email.suppressed").map((e) => e.recipient)).toEqual([
      "gone@example.com",
      "Everyone-Hates@example.com",
    ]);
  });

  it("finishes a message whose recipients are all suppressed and deletes its body", async () => {
    const id = await send(email({ to: "gone@example.com" }));
    const body = await classified(key, id);
    expect(body.last_event).toBe("suppressed");
    await eventually(async () => ((await env.BODIES.head(`mess/${id}`)) === null ? true : undefined));
  });

  it("keeps the D1 index and a per-tenant monotonic event log in step, once per event despite redelivery", async () => {
    const id = await send(email({ subject: "indexed", to: ["x@example.com", "y@example.com"] }));
    await classified(key, id);
    await settle();
    const row = await env.DB.prepare("SELECT tenant_id, subject, last_event FROM messages WHERE id = ?")
      .bind(id)
      .first();
    expect(row).toEqual({ tenant_id: "acme", subject: "indexed", last_event: "queued" });
    const rcpts = await env.DB.prepare(
      "SELECT address, status, transport, nexthop FROM recipients_all WHERE message_id = ? ORDER BY idx",
    )
      .bind(id)
      .all();
    expect(rcpts.results).toEqual([
      { address: "x@example.com", status: "ready", transport: "smtp", nexthop: "example.com" },
      { address: "y@example.com", status: "ready", transport: "smtp", nexthop: "example.com" },
    ]);
    const before = await listEvents(env.DB, "acme", 0, 1000);
    // email.accepted is the message row (no event row); one email.queued row names both recipients, and gives one email.sent each.
    expect(before.filter((e) => e.email_id === id).map((e) => [e.type, e.recipient])).toEqual([["email.queued", null]]);
    const sent = await env.DB.prepare(
      "SELECT count(*) AS n FROM event_log WHERE email_id = ? AND event_type = 'email.sent'",
    )
      .bind(id)
      .first<{ n: number }>();
    expect(sent?.n).toBe(2);
    // Redeliver the queue message: nothing changes.
    const batch = createMessageBatch("classify", [{ id: "m1", timestamp: new Date(), attempts: 2, body: { id } }]);
    const ctx = createExecutionContext();
    await worker.queue(batch, env, ctx);
    expect((await getQueueResult(batch, ctx)).explicitAcks).toEqual(["m1"]);
    const after = await listEvents(env.DB, "acme", 0, 1000);
    expect(after).toEqual(before);
    const seqs = after.map((e) => e.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(seqs).size).toBe(seqs.length);
  });

  it("acks or retries each message on its own: a D1 outage retries only the messages that need D1", async () => {
    const { outboxName } = await import("../../worker/model/ids");
    const stub = env.OUTBOX.getByName(outboxName(1));
    const id = `01${crypto.randomUUID().slice(2)}`;
    await stub.accept({
      tenant: "acme",
      idempotency: null,
      response: { status: 200, body: "{}" },
      messages: [
        {
          id,
          createdAt: Date.now(),
          scheduledAt: null,
          mailFrom: "a@acme.test",
          rcptTo: ["r@example.com"],
          size: 10,
          summary: {
            from: "a@acme.test",
            to: ["r@example.com"],
            cc: null,
            bcc: null,
            reply_to: null,
            subject: "s",
            html: null,
            text: "t",
            tags: null,
            message_id: "<x@acme.test>",
          },
        },
      ],
    });
    await env.DB.exec("ALTER TABLE routes RENAME TO routes_away");
    try {
      const batch = createMessageBatch("classify", [
        { id: "due", timestamp: new Date(), attempts: 1, body: { id } },
        { id: "malformed", timestamp: new Date(), attempts: 1, body: { nope: true } },
        { id: "unknown", timestamp: new Date(), attempts: 1, body: { id: `03${crypto.randomUUID().slice(2)}` } },
      ]);
      const ctx = createExecutionContext();
      await worker.queue(batch, env, ctx);
      const result = await getQueueResult(batch, ctx);
      expect(result.outcome).toBe("ok");
      expect(result.explicitAcks.sort()).toEqual(["malformed", "unknown"]);
      expect(result.retryMessages.map((m: { msgId: string }) => m.msgId)).toEqual(["due"]);
    } finally {
      await env.DB.exec("ALTER TABLE routes_away RENAME TO routes");
    }
    const batch = createMessageBatch("classify", [{ id: "due", timestamp: new Date(), attempts: 2, body: { id } }]);
    const ctx = createExecutionContext();
    await worker.queue(batch, env, ctx);
    expect((await getQueueResult(batch, ctx)).explicitAcks).toEqual(["due"]);
    expect((await getEmail(key, id)).body.recipients[0]!.status).toBe("ready");
  });
});
