/**
 * Provider rules (issue 13, item 2) in the Workers runtime: rules in D1 (as the admin API keeps
 * them) are matched by the delivery stage against the MX hosts the fixture resolver gives
 * (doh-server.ts). A rule for ".localhost" rolls mx-one.test into the site "localprov": its
 * Transport DO queue takes the rule's window bounds and site, the provider's key gets the cap
 * and rate, each transaction carries at most recipients_per_message recipients, and the site's
 * Destination DO (DESTINATION_GROUPING=site here) hears of it; a rule with require_tls defers
 * mail to a server without STARTTLS instead of sending it in the clear.
 */
import { env, runInDurableObject } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { callWithKey, email, eventually, newKey, newOperatorKey } from "../helpers";
import { caught, recipientsWhen } from "./observe";

const sink = inject("sink");
let key: string;
let operator: string;

const RULES = [
  { name: "localprov", mx: [".localhost"], window: { initial: 2, limit: 3 }, rate: "100/m", recipients_per_message: 1 },
  { name: "tlsprov", mx: ["127.0.0.1"], require_tls: true },
];

beforeAll(async () => {
  key = await newKey("acme");
  operator = await newOperatorKey("ops");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('mx', NULL)"),
    ...["mx-one.test", "loopback-mx.test"].map((d) =>
      env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, ?, 'mx')").bind(d),
    ),
    ...RULES.map((r) =>
      env.DB.prepare("INSERT OR REPLACE INTO provider_rules (name, rule, updated_at) VALUES (?, ?, 0)").bind(
        r.name,
        JSON.stringify(r),
      ),
    ),
  ]);
});

async function send(to: string[]): Promise<string> {
  const res = await callWithKey(key, "POST", "/emails", email({ to }));
  expect(res.status).toBe(200);
  return (await res.json<{ id: string }>()).id;
}

type CoreQueue = { window: number; site: string | null; shape?: { initial?: number; limit?: number } | null };
type CorePolicy = { rule: { concurrency?: number; rate?: { count: number; perSec: number }; provider?: string } };

function coreOf(nexthop: string): Promise<{ queue: CoreQueue | null; policy: CorePolicy | null }> {
  return runInDurableObject(env.TRANSPORT_QUEUE.getByName("mx"), (obj) => {
    const q = (
      obj as unknown as {
        qmgr: { transports: Map<string, { queues: Map<string, CoreQueue> }>; policies: Map<string, CorePolicy> };
      }
    ).qmgr;
    const queue = q.transports.get("mx")?.queues.get(nexthop);
    return {
      queue: queue ? { window: queue.window, site: queue.site, shape: queue.shape ?? null } : null,
      policy: q.policies.get("site:localprov") ?? null,
    };
  });
}

describe("provider rules", () => {
  it("roll a destination into the provider's site, with its window bounds, cap, rate and recipients per message", async () => {
    const id = await send(["pr-ann@mx-one.test", "pr-bob@mx-one.test"]);
    await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered", 20_000);
    // recipients_per_message 1: two transactions, one recipient each.
    const got = (await caught(sink.httpPort)).filter((m) => m.rcptTo.some((r) => r.startsWith("pr-")));
    expect(got.map((m) => m.rcptTo)).toEqual([["pr-ann@mx-one.test"], ["pr-bob@mx-one.test"]]);
    const core = await eventually(
      async () => {
        const c = await coreOf("mx-one.test");
        return c.policy ? c : undefined;
      },
      10_000,
      "the Transport DO to learn the site",
    );
    expect(core.policy!.rule).toEqual({ concurrency: 3, rate: { count: 100, perSec: 60 }, provider: "localprov" });
    if (core.queue) {
      // the queue may be gone again (idle), its shape with it
      expect(core.queue).toMatchObject({ site: "localprov", shape: { initial: 2, limit: 3 } });
      expect(core.queue.window).toBeLessThanOrEqual(3);
    }
    const site = await eventually(
      async () => {
        const g = await env.DESTINATION_QUEUE.getByName("mx/site:localprov").get();
        return g.history.length > 0 ? g : undefined;
      },
      10_000,
      "the provider's Destination DO to hear of it",
    );
    expect(site.record).toMatchObject({ transport: "mx" });
  }, 30_000);

  it("require_tls defers mail to a server that offers no STARTTLS; nothing reaches it in the clear", async () => {
    const id = await send(["pr-tls@loopback-mx.test"]);
    const [r] = await recipientsWhen(key, id, (x) => x.status === "deferred", "deferred", 20_000);
    expect(r!.last_response?.text ?? "").toMatch(/TLS/i);
    expect((await caught(sink.httpPort)).some((m) => m.rcptTo.includes("pr-tls@loopback-mx.test"))).toBe(false);
  }, 30_000);

  it("are data: the shipped rules are listed with their sources, an operator edits them, bad ones are refused, tenants may not", async () => {
    const list = await (
      await callWithKey(operator, "GET", "/relay/providers")
    ).json<{ data: { name: string; mx: string[]; sources?: Record<string, string> }[] }>();
    expect(list.data.map((r) => r.name)).toEqual(["apple", "google", "localprov", "microsoft", "tlsprov", "yahoo"]);
    expect(list.data.find((r) => r.name === "google")).toMatchObject({
      mx: [".google.com", ".googlemail.com"],
      require_tls: true,
      sources: { require_tls: expect.stringContaining("TLS") },
    });
    const put = await callWithKey(operator, "PUT", "/relay/providers/fastmail", {
      mx: [".messagingengine.com"],
      window: { initial: 3, limit: 8 },
      rate: "600/m",
      sources: { window: "our own measurement" },
    });
    expect(put.status).toBe(200);
    expect(await put.json()).toEqual({
      object: "provider",
      name: "fastmail",
      mx: [".messagingengine.com"],
      window: { initial: 3, limit: 8 },
      rate: "600/m",
      sources: { window: "our own measurement" },
    });
    expect(await (await callWithKey(operator, "GET", "/relay/providers/fastmail")).json()).toMatchObject({
      name: "fastmail",
      rate: "600/m",
    });
    const bad = await callWithKey(operator, "PUT", "/relay/providers/Bad%20Name", {
      mx: ["not a suffix"],
      window: { initial: 9, limit: 2 },
      rate: "fast",
    });
    expect(bad.status).toBe(422);
    expect((await bad.json<{ message: string }>()).message).toMatch(
      /name: .*mx: .*window: initial above limit.*rate: /,
    );
    expect((await callWithKey(key, "GET", "/relay/providers")).status).toBe(403);
    expect(await (await callWithKey(operator, "DELETE", "/relay/providers/fastmail")).json()).toEqual({
      object: "provider",
      name: "fastmail",
      deleted: true,
    });
    expect((await callWithKey(operator, "DELETE", "/relay/providers/fastmail")).status).toBe(404);
  });

  it("GET /relay/destinations shows which rule a destination falls under, and why", async () => {
    const id = await send(["pr-why@mx-one.test"]);
    await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered", 20_000);
    const d = await eventually(
      async () => {
        const res = await callWithKey(operator, "GET", "/relay/destinations/mx/mx-one.test");
        return res.status === 200 ? res.json<{ provider: unknown }>() : undefined;
      },
      10_000,
      "the destination",
    );
    expect(d.provider).toEqual({
      rule: "localprov",
      mx_hosts: ["localhost"],
      matched: { mx_host: "localhost", suffix: ".localhost" },
    });
  }, 30_000);
});
