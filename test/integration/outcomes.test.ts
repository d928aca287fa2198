/** The Outbox's outcome recording (for the delivery stage): the recipient state machine; done means body deleted. */
import { env } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { outboxName, shardOf } from "../../worker/model/ids";
import { listEvents } from "../../worker/db/events";
import { callWithKey, classified, email, eventually, getEmail, newKey, settle } from "./helpers";

let key: string;
beforeAll(async () => {
  key = await newKey("acme");
});
afterAll(() => settle());

async function readyEmail(to: string[]): Promise<string> {
  const { id } = await (await callWithKey(key, "POST", "/emails", email({ to }))).json<{ id: string }>();
  await classified(key, id);
  return id;
}

const outboxOf = (id: string) => env.OUTBOX.getByName(outboxName(shardOf(id)));

describe("recording delivery outcomes in the Outbox", () => {
  it("walks ready → active → deferred → delivered and shows attempts, next_attempt_at and last_response", async () => {
    const id = await readyEmail(["a@example.com", "b@example.com"]);
    const next = Date.now() + 600_000;
    await outboxOf(id).recordOutcome(id, [{ idx: 0, status: "active", attempt: 1 }]);
    await outboxOf(id).recordOutcome(id, [
      {
        idx: 0,
        status: "deferred",
        attempt: 1,
        nextAttemptAt: next,
        response: { code: 451, enhanced: "4.7.1", text: "try later", mx: "mx.example.com" },
        blockedBy: "rate",
      },
    ]);
    const { body } = await getEmail(key, id);
    expect(body.last_event).toBe("delivery_delayed");
    expect(body.recipients[0]).toEqual({
      email: "a@example.com",
      status: "deferred",
      attempts: 1,
      next_attempt_at: new Date(next).toISOString(),
      // The recorded reason is "rate", but the recipient is still in the Transport DO's core here
      // (these reports bypass it), and GET /emails/:id prefers the core's live reason.
      last_response: { code: 451, enhanced: "4.7.1", text: "try later", mx: "mx.example.com" },
      blocked_by: "queued",
      blocked_until: null,
    });
    const r = await outboxOf(id).recordOutcome(id, [
      { idx: 0, status: "delivered", attempt: 2, response: { code: 250, text: "ok" } },
    ]);
    expect(r).toMatchObject({ applied: 1, done: false });
    expect((await getEmail(key, id)).body.recipients[0]).toMatchObject({
      status: "delivered",
      attempts: 2,
      next_attempt_at: null,
    });
  });

  it("ignores reports for an older attempt and reports after a final state", async () => {
    const id = await readyEmail(["c@example.com"]);
    await outboxOf(id).recordOutcome(id, [
      { idx: 0, status: "deferred", attempt: 2, nextAttemptAt: Date.now() + 1000 },
    ]);
    expect((await outboxOf(id).recordOutcome(id, [{ idx: 0, status: "delivered", attempt: 1 }])).applied).toBe(0);
    await outboxOf(id).recordOutcome(id, [
      { idx: 0, status: "bounced", attempt: 3, response: { code: 550, text: "no such user" } },
    ]);
    expect((await outboxOf(id).recordOutcome(id, [{ idx: 0, status: "delivered", attempt: 4 }])).applied).toBe(0);
    expect((await getEmail(key, id)).body.recipients[0]!.status).toBe("bounced");
  });

  it("finishes the message when every recipient is final and deletes its body from R2", async () => {
    const id = await readyEmail(["d@example.com", "e@example.com"]);
    await outboxOf(id).recordOutcome(id, [{ idx: 0, status: "delivered", attempt: 1 }]);
    expect(await env.BODIES.head(`mess/${id}`)).not.toBeNull();
    const r = await outboxOf(id).recordOutcome(id, [{ idx: 1, status: "expired", attempt: 5 }]);
    expect(r).toMatchObject({ applied: 1, done: true });
    expect(await env.BODIES.head(`mess/${id}`)).toBeNull();
    expect((await getEmail(key, id)).body.last_event).toBe("failed");
    await settle();
    const types = (await listEvents(env.DB, "acme", 0, 1000)).filter((e) => e.email_id === id).map((e) => e.type);
    expect(types).toEqual(["email.queued", "email.delivered", "email.failed"]); // one email.queued row names both recipients
    await eventually(async () => {
      const row = await env.DB.prepare("SELECT last_event FROM messages WHERE id = ?")
        .bind(id)
        .first<{ last_event: string }>();
      return row?.last_event === "failed" ? true : undefined;
    });
  });

  it("refuses outcomes for recipients that were never classified", async () => {
    const { id } = await (
      await callWithKey(key, "POST", "/emails", email({ scheduled_at: "in 1 hour" }))
    ).json<{ id: string }>();
    expect((await outboxOf(id).recordOutcome(id, [{ idx: 0, status: "delivered", attempt: 1 }])).applied).toBe(0);
  });
});
