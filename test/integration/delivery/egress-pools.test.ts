/**
 * Egress pools with failover (worker/egress/, worker/delivery/pooled.ts) against Dante and the
 * local sinks: a pool per tenant (vitest.config.ts EGRESS_POOLS), every kind of member (a SOCKS5
 * bridge, a smarthost, Email Service, direct), and gates in front of Dante (gates.ts) that the
 * tests close and open. An egress that fails its health twice within a minute (EGRESS_FAILURES)
 * is suspended for 2 s (EGRESS_SUSPEND_SECONDS): its traffic goes to the pool's next member, and
 * comes back once it is healthy; each step is an event and a blocked_by.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { callWithKey, email, eventually, getEmail, newKey, newOperatorKey, settle } from "../helpers";
import { recipientsWhen } from "./observe";

const gates = inject("gates");
const socks = inject("socks");
const doh = inject("doh");
const keys: Record<string, string> = {};

beforeAll(async () => {
  for (const t of ["failover", "solo", "smarthost", "cf", "direct"]) keys[t] = await newKey(`pool-${t}`);
});

async function send(tenant: string, to: string): Promise<string> {
  const res = await callWithKey(keys[tenant]!, "POST", "/emails", email({ to: [to] }));
  expect(res.status).toBe(200);
  return (await res.json<{ id: string }>()).id;
}

const gate = (name: string, up: boolean) =>
  fetch(`${gates.controlUrl}/${name}/${up ? "up" : "down"}`, { method: "POST" });
const gateStats = async () =>
  (await fetch(gates.controlUrl)).json<Record<string, { up: boolean; connections: number }>>();
const events = async (egress: string) =>
  (
    await env.DB.prepare("SELECT kind FROM egress_events WHERE egress = ? ORDER BY id")
      .bind(egress)
      .all<{ kind: string }>()
  ).results.map((r) => r.kind);
const delivered = (tenant: string, id: string) =>
  recipientsWhen(keys[tenant]!, id, (r) => r.status === "delivered", "delivered", 15_000);
const danteLog = async () => (await fetch(doh.url.replace("/dns-query", "/log/socks"))).text();
const g1 = `127.0.0.1:${gates.ports.g1}`;
const g2 = `127.0.0.1:${gates.ports.g2}`;

describe("every kind of egress", () => {
  it("a SOCKS5 bridge (through the gate to Dante), a smarthost, Email Service and direct each deliver their pool's mail", async () => {
    const before = (await gateStats()).g1!.connections;
    const [viaSocks, viaSmarthost, viaCf, viaDirect] = await Promise.all([
      send("failover", "s1@mx-one.test"),
      send("smarthost", "s2@mx-one.test"),
      send("cf", "s3@mx-one.test"),
      send("direct", "s4@mx-one.test"),
    ]);
    expect((await delivered("failover", viaSocks))[0]!.last_response).toMatchObject({ code: 250, mx: "localhost" });
    expect((await gateStats()).g1!.connections).toBeGreaterThan(before);
    expect(await danteLog()).toMatch(/pass\(1\): tcp\/connect/);
    expect((await delivered("smarthost", viaSmarthost))[0]!.last_response).toMatchObject({
      code: 250,
      mx: "127.0.0.1",
    });
    expect((await delivered("cf", viaCf))[0]!.last_response).toMatchObject({
      code: 250,
      mx: "email-service.cloudflare",
      text: expect.stringMatching(/^accepted by Cloudflare Email Service/),
    });
    expect((await delivered("direct", viaDirect))[0]!.last_response).toMatchObject({ code: 250, mx: "localhost" });
  });
});

describe("failover", () => {
  it("an egress that fails is passed over within the attempt, suspended after two failures, and comes back once healthy", async () => {
    await gate("g1", false);
    // Two deliveries: each fails on the gate and goes on through Dante itself in the same attempt.
    for (const to of ["f1@mx-one.test", "f2@mx-one.test"]) {
      const id = await send("failover", to);
      expect((await delivered("failover", id))[0]!.attempts).toBe(1);
    }
    await eventually(
      async () => ((await events(g1)).includes("suspended") ? true : undefined),
      5_000,
      "a suspension event",
    );
    expect(await events(g1)).toEqual(["failover", "failover", "suspended"]);
    // Suspended: the next delivery does not even try the gate.
    const tried = (await gateStats()).g1!.connections;
    await delivered("failover", await send("failover", "f3@mx-one.test"));
    expect((await gateStats()).g1!.connections).toBe(tried);
    // Healthy again and past its suspension: the gate is tried first again, and it is back.
    await gate("g1", true);
    await new Promise((r) => setTimeout(r, 2_500));
    await delivered("failover", await send("failover", "f4@mx-one.test"));
    expect((await gateStats()).g1!.connections).toBeGreaterThan(tried);
    await eventually(async () => ((await events(g1)).includes("resumed") ? true : undefined), 5_000, "a resumed event");
    const health = await env.DB.prepare("SELECT health FROM egress_health WHERE egress = ?")
      .bind(g1)
      .first<string>("health");
    expect(JSON.parse(health!)).toMatchObject({ state: "healthy", strikes: 0 });
    // The operator's view: the pool's members and the events, newest first.
    const view = await (
      await callWithKey(await newOperatorKey("egress-operator"), "GET", "/relay/egress")
    ).json<{
      pools: { name: string; members: { id: string; state: string }[] }[];
      events: { egress: string; kind: string }[];
    }>();
    expect(view.pools.find((p) => p.name === "failover")!.members).toEqual([
      expect.objectContaining({ id: g1, state: "healthy" }),
      expect.objectContaining({ id: `127.0.0.1:${socks.port}`, state: "healthy" }),
    ]);
    expect(
      view.events
        .filter((e) => e.egress === g1)
        .map((e) => e.kind)
        .reverse(),
    ).toEqual(["failover", "failover", "suspended", "resumed"]);
  });

  it("a pool with no member left defers with blocked_by egress:<id>, then egress_suspended:<pool>, and delivers once its egress is back", async () => {
    await gate("g2", false);
    const id = await send("solo", "s@loopback-mx.test");
    const blocked = (label: string) =>
      eventually(
        async () => {
          const r = (await getEmail(keys.solo!, id)).body.recipients[0]!;
          return r.status === "deferred" && r.blocked_by === label ? r : undefined;
        },
        15_000,
        `blocked_by ${label}`,
      );
    await blocked(`egress:${g2}`);
    await blocked("egress_suspended:solo");
    expect(await events(g2)).toContain("suspended");
    await gate("g2", true);
    await recipientsWhen(
      keys.solo!,
      id,
      (r) => r.status === "delivered",
      "delivered after the egress came back",
      20_000,
    );
    expect(await events(g2)).toEqual(expect.arrayContaining(["suspended", "resumed"]));
  });
});

describe("teardown", () => {
  it("lets the queues settle", async () => {
    await settle();
  });
});
