/**
 * IP warm-up in the Workers runtime (issue 13, item 4): a plan for the egress the delivery
 * project uses (the Dante bridge EGRESS names) caps mail to the provider "localprov" (a provider
 * rule for the DoH fixture's ".localhost" MX). Once the Transport DO knows the destination's
 * provider and egress (from its first report), mail beyond the hour's cap waits with
 * blocked_by warmup (not bounced); advancing the plan past its ramp lifts the caps and it goes.
 * The same reports name the MX address a delivery connected to (the remoteip policy field).
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { egressIdOf } from "../../../worker/delivery/mx";
import { callWithKey, email, eventually, newKey, newOperatorKey } from "../helpers";
import { recipientsWhen } from "./observe";

let key: string;
let operator: string;
const egress = egressIdOf(env as unknown as Env);

beforeAll(async () => {
  key = await newKey("warm");
  operator = await newOperatorKey("ops-warm");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('mx', NULL)"),
    env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'mx-one.test', 'mx')"),
    env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'loopback-mx.test', 'mx')"),
    env.DB.prepare("INSERT OR REPLACE INTO provider_rules (name, rule, updated_at) VALUES ('localprov', ?, 0)").bind(
      JSON.stringify({ name: "localprov", mx: [".localhost"] }),
    ),
  ]);
});

const send = async (to: string) =>
  (await (await callWithKey(key, "POST", "/emails", email({ to: [to] }))).json<{ id: string }>()).id;
const recipient = async (id: string) =>
  (
    await (
      await callWithKey(key, "GET", `/emails/${id}`)
    ).json<{ recipients: { status: string; blocked_by: string | null }[] }>()
  ).recipients[0]!;

describe("IP warm-up", () => {
  it("caps mail to a provider per hour on its first day, holds the rest as warmup, and lets go when advanced past the ramp", async () => {
    expect(egress).toMatch(/^127\.0\.0\.1:\d+$/);
    const put = await callWithKey(operator, "PUT", `/relay/warmup/${egress}`, { ramp: [{ per_day: 10, per_hour: 2 }] });
    expect(put.status).toBe(200);
    expect(await put.json()).toMatchObject({
      object: "warmup",
      egress,
      day: 1,
      days: 1,
      done: false,
      caps_today: { localprov: { per_day: 10, per_hour: 2 }, google: { per_day: 10, per_hour: 2 } },
    });
    expect((await callWithKey(operator, "PUT", "/relay/warmup/not%20an%20egress", {})).status).toBe(422);
    expect(
      (await callWithKey(operator, "PUT", `/relay/warmup/${egress}`, { ramp: [{ per_day: 5 }, { per_day: 1 }] }))
        .status,
    ).toBe(422);

    // The first delivery teaches the Transport DO the destination's provider and egress, and
    // counts against the hour's cap of 2 once it is known.
    const first = await send("w-0@mx-one.test");
    await recipientsWhen(key, first, (r) => r.status === "delivered", "the first delivered", 20_000);
    const more = [await send("w-1@mx-one.test"), await send("w-2@mx-one.test"), await send("w-3@mx-one.test")];
    const held = await eventually(
      async () => {
        const rs = await Promise.all(more.map(recipient));
        const delivered = rs.filter((r) => r.status === "delivered").length;
        const waiting = rs.filter((r) => r.blocked_by === "warmup");
        return delivered === 1 && waiting.length === 2 ? waiting : undefined;
      },
      20_000,
      "one delivered, two held by the warm-up",
    );
    expect(held.map((r) => r.status)).toEqual(["ready", "ready"]);

    const advanced = await callWithKey(operator, "POST", `/relay/warmup/${egress}/advance`, { days: 1 });
    expect(await advanced.json()).toMatchObject({ day: 2, done: true, caps_today: {} });
    for (const id of more)
      await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered once the ramp is over", 20_000);
    expect(await (await callWithKey(operator, "DELETE", `/relay/warmup/${egress}`)).json()).toEqual({
      object: "warmup",
      egress,
      deleted: true,
    });
    expect((await callWithKey(operator, "GET", "/relay/warmup")).status).toBe(200);
  }, 90_000);
});

describe("the remoteip policy field", () => {
  it("a delivery's report names the MX address it connected to; a connect interval on remoteip:<ip> spaces the next ones", async () => {
    const first = await send("ip-0@loopback-mx.test");
    await recipientsWhen(key, first, (r) => r.status === "delivered", "the first delivered", 20_000);
    const set = await callWithKey(operator, "PUT", "/relay/policies/remoteip:127.0.0.1", { interval_seconds: 600 });
    expect(set.status).toBe(200);
    const next = [await send("ip-1@loopback-mx.test"), await send("ip-2@loopback-mx.test")];
    const waiting = await eventually(
      async () => {
        const rs = await Promise.all(next.map(recipient));
        return rs.filter((r) => r.status === "delivered").length === 1 &&
          rs.some((r) => r.blocked_by === "connect_interval")
          ? rs
          : undefined;
      },
      20_000,
      "one delivered, one waiting for the address's interval",
    );
    expect(waiting.map((r) => r.status).sort()).toEqual(["delivered", "ready"]);
    expect((await callWithKey(operator, "DELETE", "/relay/policies/remoteip:127.0.0.1")).status).toBe(200);
  }, 60_000);
});
