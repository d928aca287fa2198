/**
 * How a receiver's answers steer delivery: 410 disables the endpoint, 429 with Retry-After
 * delays the retry at least that long, a delivery that fails every try of the schedule is
 * dead-lettered (listed through the API), and a replay re-sends it under the same webhook-id.
 * The schedule runs at 1/10 000 (WEBHOOK_RETRY_SCALE in vitest.config.ts).
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { insertEndpoint } from "../../../worker/db/webhooks";
import { sealSecret, secretsKey } from "../../../worker/lib/secrets";
import { callWithKey, eventually, newKey } from "../helpers";
import { createEndpoint, envelopeOf, logWhen, newReceiver, readFeed, send } from "./hooks";

type DeadLetters = {
  data: { event_id: string; type: string; attempts: number; reason: string; replayed_at: string | null }[];
};

function deadLetters(key: string, endpointId: string): Promise<DeadLetters> {
  return callWithKey(key, "GET", `/relay/webhooks/${endpointId}/dead-letters`).then((r) => r.json<DeadLetters>());
}

describe("webhook status handling", () => {
  it("disables the endpoint on 410, dead-letters the event, and replays it once re-enabled", async () => {
    const key = await newKey("gone");
    const receiver = await newReceiver();
    await receiver.script([{ status: 410 }]);
    const ep = await createEndpoint(key, receiver.url, ["email.delivered"]);
    const t0 = new Date().toISOString();
    await send(key, { to: "gone@sink.test" });
    const log = await logWhen(receiver, (l) => l.length >= 1, "the 410");
    const view = await eventually(
      async () => {
        const v = await (await callWithKey(key, "GET", `/webhooks/${ep.id}`)).json<{ status: string }>();
        return v.status === "disabled" ? v : undefined;
      },
      10_000,
      "the endpoint to be disabled",
    );
    expect(view.status).toBe("disabled");
    const dead = await eventually(
      async () => (await deadLetters(key, ep.id)).data[0] ?? undefined,
      10_000,
      "the dead letter",
    );
    expect(dead).toMatchObject({
      event_id: log[0]!.headers["webhook-id"],
      type: "email.delivered",
      attempts: 1,
      replayed_at: null,
    });
    expect(dead.reason).toContain("410");
    // Disabled: replay is refused until it is enabled again.
    expect((await callWithKey(key, "POST", `/relay/webhooks/${ep.id}/replay`, { from: t0 })).status).toBe(422);
    expect((await callWithKey(key, "PATCH", `/webhooks/${ep.id}`, { status: "enabled" })).status).toBe(200);
    const res = await callWithKey(key, "POST", `/relay/webhooks/${ep.id}/replay`, {
      from: t0,
      to: new Date(Date.now() + 1000).toISOString(),
    });
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ object: "replay", enqueued: 1, has_more: false });
    const again = await logWhen(receiver, (l) => l.length >= 2, "the replayed delivery");
    expect(again[1]).toMatchObject({ status: 200, body: log[0]!.body });
    expect(again[1]!.headers["webhook-id"]).toBe(log[0]!.headers["webhook-id"]);
    expect((await deadLetters(key, ep.id)).data[0]!.replayed_at).not.toBeNull();
  });

  it("waits at least Retry-After after a 429, and retries under the same webhook-id", async () => {
    const key = await newKey("throttled");
    const receiver = await newReceiver();
    await receiver.script([{ status: 429, retryAfter: "3" }]);
    await createEndpoint(key, receiver.url, ["email.delivered"]);
    await send(key, { to: "slow@sink.test" });
    const log = await logWhen(receiver, (l) => l.some((d) => d.status === 200), "the retry after 429");
    expect(log.map((d) => d.status)).toEqual([429, 200]);
    expect(log[1]!.headers["webhook-id"]).toBe(log[0]!.headers["webhook-id"]);
    expect(log[1]!.body).toBe(log[0]!.body);
    // The scaled schedule's next delay is ~1 ms; only Retry-After explains the wait.
    expect(log[1]!.at - log[0]!.at).toBeGreaterThanOrEqual(3000);
  });

  it("dead-letters after the last try of the schedule, lists it, and replays it by event id range", async () => {
    const key = await newKey("failing");
    const receiver = await newReceiver();
    await receiver.setDefault(500);
    const ep = await createEndpoint(key, receiver.url, ["email.delivered"]);
    await send(key, { to: "fails@sink.test" });
    const dead = await eventually(
      async () => (await deadLetters(key, ep.id)).data[0] ?? undefined,
      45_000,
      "the dead letter",
    );
    const log = await receiver.log();
    expect(log).toHaveLength(8); // immediately, then the 7 delays of the schedule
    expect(new Set(log.map((d) => d.headers["webhook-id"]))).toEqual(new Set([dead.event_id]));
    expect(dead).toMatchObject({ type: "email.delivered", attempts: 8 });
    expect(dead.reason).toContain("HTTP 500");
    const health = await env.DB.prepare("SELECT state FROM webhook_endpoint_health WHERE endpoint_id = ?")
      .bind(ep.id)
      .first<{ state: string }>();
    expect(JSON.parse(health!.state)).toMatchObject({ v: 1, window: 1 });

    await receiver.setDefault(200);
    const res = await callWithKey(key, "POST", `/relay/webhooks/${ep.id}/replay`, { until: dead.event_id });
    expect(await res.json()).toMatchObject({ enqueued: 1, last_event_id: dead.event_id });
    const after = await logWhen(receiver, (l) => l.length >= 9, "the replayed delivery");
    expect(after[8]).toMatchObject({ status: 200, body: log[0]!.body });
    expect(after[8]!.headers["webhook-id"]).toBe(dead.event_id);
    expect(envelopeOf(after[8]!).type).toBe("email.delivered");
    // The feed holds the event whatever happened to its pushes.
    expect((await readFeed(key, "&type=email.delivered")).map((e) => e.id)).toEqual([dead.event_id]);
  });

  it("refuses replay ranges that are empty or name unknown events, and other tenants' endpoints", async () => {
    const key = await newKey("replay-input");
    const receiver = await newReceiver();
    const ep = await createEndpoint(key, receiver.url);
    const cases: [unknown, number][] = [
      [{}, 422],
      [{ from: "yesterday" }, 422],
      [{ after: "evt_" + "0".repeat(32) }, 422],
      [{ bogus: 1 }, 422],
    ];
    for (const [body, status] of cases) {
      const r = await callWithKey(key, "POST", `/relay/webhooks/${ep.id}/replay`, body);
      expect(r.status, JSON.stringify(body)).toBe(status);
      expect(await r.json()).toMatchObject({ name: "validation_error" });
    }
    const other = await newKey("replay-other");
    expect(
      (await callWithKey(other, "POST", `/relay/webhooks/${ep.id}/replay`, { from: new Date(0).toISOString() })).status,
    ).toBe(404);
    expect((await callWithKey(other, "GET", `/relay/webhooks/${ep.id}/dead-letters`)).status).toBe(404);
  });

  it("checks the SSRF guard again at send time: a stored private-range target is dead-lettered, never called", async () => {
    const key = await newKey("ssrf");
    const id = crypto.randomUUID();
    // Stored directly, as if written before the guard or by a later rule change: the API refuses it.
    expect(
      (await callWithKey(key, "POST", "/webhooks", { endpoint: "http://10.1.2.3/hook", events: ["email.sent"] }))
        .status,
    ).toBe(422);
    const sealed = await sealSecret(await secretsKey(env), "whsec_" + btoa("k".repeat(32)));
    await insertEndpoint(env.DB, {
      id,
      tenant_id: "ssrf",
      endpoint: "http://10.1.2.3/hook",
      events: JSON.stringify(["email.sent"]),
      status: "enabled",
      secret_enc: sealed,
      created_at: Date.now(),
    });
    await send(key, { to: "guarded@sink.test" });
    const dead = await eventually(
      async () => (await deadLetters(key, id)).data[0] ?? undefined,
      10_000,
      "the dead letter",
    );
    expect(dead).toMatchObject({ type: "email.sent", attempts: 1 });
    expect(dead.reason).toContain("SSRF guard");
  });
});
