/**
 * Message fields as pickup-policy keys in the Workers runtime (issue 13, item 5): the campaign
 * tag travels from the send request through the Outbox to the Transport DO (its admission row),
 * so an operator's suspension of jobid:<tenant>/<campaign> holds exactly that campaign's mail
 * (blocked_by suspended) while the tenant's other mail is delivered; resuming lets it go.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { callWithKey, email, eventually, newKey, newOperatorKey } from "../helpers";
import { recipientsWhen } from "./observe";

const sink = inject("sink");
let key: string;
let operator: string;

beforeAll(async () => {
  key = await newKey("camp");
  operator = await newOperatorKey("ops-camp");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('sink', ?)").bind(`[127.0.0.1]:${sink.smtpPort}`),
    env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'sink.test', 'sink')"),
  ]);
});

describe("a campaign as a pickup-policy key", () => {
  it("a suspended campaign waits with blocked_by suspended; the tenant's other mail goes; resuming sends it", async () => {
    const s = await callWithKey(operator, "POST", "/relay/suspensions", {
      target: "jobid",
      name: "camp/spring-sale",
      ttl_seconds: 600,
    });
    expect(s.status).toBe(201);
    expect(await s.json()).toMatchObject({ key: "jobid:camp/spring-sale" });
    const send = async (body: Record<string, unknown>) =>
      (await (await callWithKey(key, "POST", "/emails", email(body))).json<{ id: string }>()).id;
    const sale = await send({ to: "sale@sink.test", tags: [{ name: "campaign", value: "spring-sale" }] });
    const other = await send({ to: "other@sink.test", tags: [{ name: "campaign", value: "welcome" }] });
    await recipientsWhen(key, other, (r) => r.status === "delivered", "the other campaign delivered");
    const held = await eventually(
      async () => {
        const r = (
          await (
            await callWithKey(key, "GET", `/emails/${sale}`)
          ).json<{ recipients: { status: string; blocked_by: string | null }[] }>()
        ).recipients[0]!;
        return r.blocked_by === "suspended" ? r : undefined;
      },
      10_000,
      "the campaign held",
    );
    expect(held.status).toBe("ready");
    expect((await callWithKey(operator, "DELETE", "/relay/suspensions/jobid/camp%2Fspring-sale")).status).toBe(200);
    await recipientsWhen(key, sale, (r) => r.status === "delivered", "delivered once resumed");
  }, 30_000);

  it("/relay/policies sets a connect interval on a key: its deliveries go at least that far apart, blocked_by connect_interval between", async () => {
    const bad = await callWithKey(operator, "PUT", "/relay/policies/planet:mars", { concurrency: 2 });
    expect(bad.status).toBe(422);
    expect((await callWithKey(operator, "PUT", "/relay/policies/tenant:camp", { rate: "fast" })).status).toBe(422);
    expect((await callWithKey(key, "GET", "/relay/policies")).status).toBe(403);
    const set = await callWithKey(operator, "PUT", "/relay/policies/jobid:camp%2Fdrip", {
      interval_seconds: 5,
      concurrency: 1,
    });
    expect(set.status).toBe(200);
    // A campaign's key is held by every transport (its mail may go through any).
    const setIn = (await set.json<{ data: { transport: string }[] }>()).data;
    expect(setIn.map((p) => p.transport).sort()).toEqual(["sink", "smtp"]);
    expect(setIn[0]).toMatchObject({
      key: "jobid:camp/drip",
      concurrency: 1,
      interval_seconds: 5,
      rate: null,
      suspended_until: null,
    });
    const send = async (to: string) =>
      (
        await (
          await callWithKey(key, "POST", "/emails", email({ to, tags: [{ name: "campaign", value: "drip" }] }))
        ).json<{ id: string }>()
      ).id;
    const a = await send("drip-a@sink.test");
    const b = await send("drip-b@sink.test");
    const waiting = await eventually(
      async () => {
        for (const id of [a, b]) {
          const r = (
            await (
              await callWithKey(key, "GET", `/emails/${id}`)
            ).json<{ recipients: { blocked_by: string | null }[] }>()
          ).recipients[0]!;
          if (r.blocked_by === "connect_interval") return r;
        }
        return undefined;
      },
      10_000,
      "one waiting for the interval",
    );
    expect(waiting.blocked_by).toBe("connect_interval");
    await recipientsWhen(key, a, (r) => r.status === "delivered", "a delivered", 20_000);
    await recipientsWhen(key, b, (r) => r.status === "delivered", "b delivered", 20_000);
    const times = await eventually(
      async () => {
        const rows = (
          await env.DB.prepare(
            "SELECT created_at FROM event_log WHERE email_id IN (?, ?) AND type = 'email.delivered' ORDER BY created_at",
          )
            .bind(a, b)
            .all<{ created_at: number }>()
        ).results;
        return rows.length === 2 ? rows.map((r) => r.created_at) : undefined;
      },
      10_000,
      "both deliveries indexed",
    );
    // The interval spaces the connects on the scheduler's whole-second clock (5 s apart there is
    // at least 4 s of real time), and each delivery's event is stamped by its agent's index
    // stage, which gathers for up to AGENT_STAGE_MS (200 ms here): CI once saw 3,994 ms.
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(4000 - 200);
    const list = await (await callWithKey(operator, "GET", "/relay/policies")).json<{ data: { key: string }[] }>();
    expect(list.data.map((p) => p.key)).toContain("jobid:camp/drip");
    expect(await (await callWithKey(operator, "DELETE", "/relay/policies/jobid:camp%2Fdrip")).json()).toEqual({
      object: "policy",
      key: "jobid:camp/drip",
      deleted: true,
    });
    expect((await callWithKey(operator, "DELETE", "/relay/policies/jobid:camp%2Fdrip")).status).toBe(404);
  }, 60_000);
});
