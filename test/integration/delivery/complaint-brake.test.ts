/**
 * The complaint-rate brake (worker/policy/complaint-brake.ts) in the Workers runtime: three emails
 * delivered to the sink, then a complaint takes the tenant's rate (1 of 3) above the threshold
 * (COMPLAINT_MIN_DELIVERED lowered to 2 for the test): relay.complaint_rate.exceeded is recorded
 * on the complained email, GET /relay/complaint-rate shows the pause, bulk mail (with
 * unsubscribe) is refused with 429 complaint_rate_exceeded while transactional mail is taken, a
 * second complaint raises no second event, and an operator lifts the brake. Below the minimum
 * volume nothing is paused.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import worker from "../../../worker";
import { callWithKey, email, eventually, newKey, newOperatorKey } from "../helpers";
import { recipientsWhen } from "./observe";
import { feedBodyOf } from "../../../worker/db/feed";

const sink = inject("sink");
let key: string;
let operator: string;

beforeAll(async () => {
  key = await newKey("braked");
  operator = await newOperatorKey("ops-brake");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('sink', ?)").bind(`[127.0.0.1]:${sink.smtpPort}`),
    env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'sink.test', 'sink')"),
  ]);
});

/** A call with environment overrides (the brake's minimum volume). */
async function callEnv(
  k: string,
  method: string,
  path: string,
  body: unknown,
  extra: Record<string, string>,
): Promise<Response> {
  const ctx = createExecutionContext();
  const req = new Request(`http://relay.test${path}`, {
    method,
    headers: { authorization: `Bearer ${k}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  }) as Request<unknown, IncomingRequestCfProperties>;
  const res = await worker.fetch(req, { ...env, ...extra } as Env, ctx);
  await waitOnExecutionContext(ctx);
  return res;
}

async function deliveredEmail(k: string, to: string): Promise<string> {
  const res = await callWithKey(k, "POST", "/emails", email({ to, subject: "brake" }));
  expect(res.status).toBe(200);
  const { id } = await res.json<{ id: string }>();
  await recipientsWhen(k, id, (r) => r.status === "delivered", `${to} delivered`);
  await eventually(
    async () =>
      (await env.DB.prepare("SELECT 1 AS x FROM event_log WHERE email_id = ? AND type = 'email.delivered'")
        .bind(id)
        .first())
        ? true
        : undefined,
    10_000,
    "email.delivered indexed",
  );
  return id;
}

/** The tenant's relay.complaint_rate.exceeded rows, each with its envelope whole (as the feed gives it). */
const brakeEvents = async (tenant: string) =>
  Promise.all(
    (
      await env.DB.prepare(
        "SELECT email_id, event_id FROM event_log WHERE tenant_id = ? AND type = 'relay.complaint_rate.exceeded' AND body IS NOT NULL",
      )
        .bind(tenant)
        .all<{ email_id: string; event_id: string }>()
    ).results.map(async (r) => ({ email_id: r.email_id, body: (await feedBodyOf(env.DB, r.event_id))! })),
  );
const LOW = { COMPLAINT_MIN_DELIVERED: "2" };

describe("the complaint-rate brake", () => {
  it("pauses bulk mail when a complaint takes the rate above the threshold, with the event, until an operator lifts it", async () => {
    const ids = [
      await deliveredEmail(key, "brake-1@sink.test"),
      await deliveredEmail(key, "brake-2@sink.test"),
      await deliveredEmail(key, "brake-3@sink.test"),
    ];
    expect((await callWithKey(key, "POST", "/emails", email({ to: "bulk@sink.test", unsubscribe: true }))).status).toBe(
      200,
    );

    const res = await callEnv(
      key,
      "POST",
      `/relay/messages/${ids[0]}/complaint`,
      { recipient: "brake-1@sink.test", feedback_type: "abuse" },
      LOW,
    );
    expect(res.status).toBe(200);
    const [e] = await eventually(
      async () => ((await brakeEvents("braked")).length > 0 ? brakeEvents("braked") : undefined),
      10_000,
      "relay.complaint_rate.exceeded",
    );
    expect(e!.email_id).toBe(ids[0]);
    const data = JSON.parse(e!.body) as {
      type: string;
      data: {
        recipient: string;
        complaint_rate: {
          rate: number;
          threshold: number;
          delivered: number;
          complained: number;
          paused_until: string;
        };
      };
    };
    expect(data).toMatchObject({
      type: "relay.complaint_rate.exceeded",
      data: {
        recipient: "brake-1@sink.test",
        complaint_rate: { rate: 0.333333, threshold: 0.003, delivered: 3, complained: 1 },
      },
    });
    const until = Date.parse(data.data.complaint_rate.paused_until);
    expect(until).toBeGreaterThan(Date.now() + 23 * 3_600_000);

    const rate = await (
      await callWithKey(key, "GET", "/relay/complaint-rate")
    ).json<{ bulk_paused_until: string | null }>();
    expect(rate.bulk_paused_until).toBe(new Date(until).toISOString());

    const bulk = await callWithKey(key, "POST", "/emails", email({ to: "bulk@sink.test", unsubscribe: true }));
    expect(bulk.status).toBe(429);
    expect(await bulk.json()).toMatchObject({
      name: "complaint_rate_exceeded",
      message: expect.stringContaining(new Date(until).toISOString()),
    });
    expect((await callWithKey(key, "POST", "/emails", email({ to: "receipt@sink.test" }))).status).toBe(200);

    // A second complaint while paused: no second event.
    expect(
      (
        await callEnv(
          key,
          "POST",
          `/relay/messages/${ids[1]}/complaint`,
          { recipient: "brake-2@sink.test", feedback_type: "abuse" },
          LOW,
        )
      ).status,
    ).toBe(200);
    await new Promise((r) => setTimeout(r, 500));
    expect(await brakeEvents("braked")).toHaveLength(1);

    // Only an operator lifts it.
    expect((await callWithKey(key, "DELETE", "/relay/complaint-rate/pause?tenant=braked")).status).toBe(403);
    expect((await callWithKey(operator, "DELETE", "/relay/complaint-rate/pause?tenant=braked")).status).toBe(200);
    expect((await callWithKey(key, "POST", "/emails", email({ to: "bulk@sink.test", unsubscribe: true }))).status).toBe(
      200,
    );
  }, 60_000);

  it("holds bulk mail already queued (blocked_by complaint_brake), never transactional mail, until an operator lifts it", async () => {
    const k = await newKey("braked-queued");
    const ids = [await deliveredEmail(k, "bq-1@sink.test"), await deliveredEmail(k, "bq-2@sink.test")];
    // Queued before the brake: both wait behind a suspended destination.
    const nexthop = `[127.0.0.1]:${sink.smtpPort}`;
    const suspend = await callWithKey(operator, "POST", "/relay/suspensions", {
      target: "destination",
      transport: "sink",
      name: nexthop,
      ttl_seconds: 600,
    });
    expect(suspend.status).toBe(201);
    const send = async (body: Record<string, unknown>) =>
      (await (await callWithKey(k, "POST", "/emails", email(body))).json<{ id: string }>()).id;
    const bulk = await send({
      to: "bq-bulk@sink.test",
      unsubscribe: { topic: "news" },
      tags: [{ name: "campaign", value: "spring" }],
    });
    const receipt = await send({ to: "bq-receipt@sink.test" });
    await recipientsWhen(k, bulk, (r) => r.status === "ready", "bulk mail queued");
    await recipientsWhen(k, receipt, (r) => r.status === "ready", "transactional mail queued");
    expect(
      (
        await callEnv(
          k,
          "POST",
          `/relay/messages/${ids[0]}/complaint`,
          { recipient: "bq-1@sink.test", feedback_type: "abuse" },
          LOW,
        )
      ).status,
    ).toBe(200);
    await eventually(
      async () => ((await brakeEvents("braked-queued")).length > 0 ? true : undefined),
      10_000,
      "the brake",
    );
    expect(
      (
        await callWithKey(
          operator,
          "DELETE",
          `/relay/suspensions/destination/${encodeURIComponent(nexthop)}?transport=sink`,
        )
      ).status,
    ).toBe(200);

    await recipientsWhen(k, receipt, (r) => r.status === "delivered", "transactional mail delivered", 20_000);
    const held = await eventually(
      async () => {
        const r = (
          await (
            await callWithKey(k, "GET", `/emails/${bulk}`)
          ).json<{ recipients: { status: string; blocked_by: string | null }[] }>()
        ).recipients[0]!;
        return r.blocked_by === "complaint_brake" ? r : undefined;
      },
      20_000,
      "bulk mail held by the brake",
    );
    expect(held.status).toBe("ready");
    const suspensions = await (
      await callWithKey(operator, "GET", "/relay/suspensions")
    ).json<{ data: { key: string; set_by: string | null }[] }>();
    expect(suspensions.data).toContainEqual(
      expect.objectContaining({ key: "bulk:braked-queued", set_by: "complaint_brake" }),
    );
    await new Promise((r) => setTimeout(r, 1000));
    expect(
      ((await (await fetch(`http://127.0.0.1:${sink.httpPort}/messages`)).json()) as { rcptTo: string[] }[]).some((m) =>
        m.rcptTo.includes("bq-bulk@sink.test"),
      ),
    ).toBe(false);

    expect((await callWithKey(operator, "DELETE", "/relay/complaint-rate/pause?tenant=braked-queued")).status).toBe(
      200,
    );
    await recipientsWhen(k, bulk, (r) => r.status === "delivered", "bulk mail delivered once lifted", 20_000);
  }, 90_000);

  it("does not pause below the minimum volume (COMPLAINT_MIN_DELIVERED, 1000 by default)", async () => {
    const small = await newKey("small-sender");
    const id = await deliveredEmail(small, "only@sink.test");
    expect(
      (
        await callWithKey(small, "POST", `/relay/messages/${id}/complaint`, {
          recipient: "only@sink.test",
          feedback_type: "abuse",
        })
      ).status,
    ).toBe(200);
    await new Promise((r) => setTimeout(r, 500));
    expect(await brakeEvents("small-sender")).toEqual([]);
    expect(
      (await callWithKey(small, "POST", "/emails", email({ to: "bulk@sink.test", unsubscribe: true }))).status,
    ).toBe(200);
  }, 60_000);
});
