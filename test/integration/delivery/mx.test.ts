/**
 * The `mx` transport kind end to end in the Workers runtime: a recipient domain without a fixed
 * nexthop is resolved over DNS-over-HTTPS (the fixture resolver of doh-server.ts, bound as
 * DOH_RESOLVER_URL) and delivered to its MX hosts on MX_PORT (the sink's port) through the SOCKS5
 * bridge EGRESS names (Dante, with username/password), in preference order within one attempt;
 * lookups that fail bounce or defer without a site failure.
 */
import { env, runInDurableObject } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { egressPathOf, mxSettingsOf } from "../../../worker/delivery/mx";
import { callWithKey, email, eventually, newKey, settle } from "../helpers";
import { caught as sinkMessages, recipientsWhen as waitRecipients, type Rcpt } from "./observe";

type Queue = { window: number; dsn: string | null };

const sink = inject("sink");
const doh = inject("doh");
let key: string;

const DOMAINS = ["mx-one.test", "mx-two.test", "null-mx.test", "nx.test", "servfail.test"];

beforeAll(async () => {
  key = await newKey("acme");
  // A transport without a fixed nexthop: the nexthop is the recipient domain (the mx kind).
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('mx', NULL)"),
    ...DOMAINS.map((d) =>
      env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, ?, 'mx')").bind(d),
    ),
  ]);
});

const caught = () => sinkMessages(sink.httpPort);

async function send(to: string[]): Promise<string> {
  const res = await callWithKey(key, "POST", "/emails", email({ to }));
  expect(res.status).toBe(200);
  return (await res.json<{ id: string }>()).id;
}

/** Waits until every recipient of the email satisfies `done`. */
const recipientsWhen = (id: string, done: (r: Rcpt) => boolean, what: string, timeoutMs?: number) =>
  waitRecipients(key, id, done, what, timeoutMs);

/** The `mx` Transport DO's queue for a nexthop (null when it has none now). */
function queueOf(nexthop: string): Promise<Queue | null> {
  return runInDurableObject(env.TRANSPORT_QUEUE.getByName("mx"), (obj) => {
    const q = (obj as unknown as { qmgr: { transports: Map<string, { queues: Map<string, Queue> }> } }).qmgr;
    const queue = q.transports.get("mx")?.queues.get(nexthop);
    return queue ? { window: queue.window, dsn: queue.dsn } : null;
  });
}

/** No negative feedback was given for the nexthop: no dead queue, no failure reason. */
async function expectNoSiteFailure(nexthop: string): Promise<void> {
  const queue = await queueOf(nexthop);
  if (queue) expect(queue).toMatchObject({ dsn: null, window: expect.any(Number) });
  if (queue) expect(queue.window).toBeGreaterThan(0);
}

describe("delivery to MX hosts (the mx transport kind)", () => {
  it("a domain whose MX is localhost is delivered to the sink through the SOCKS5 bridge; the outcome names the MX host", async () => {
    const id = await send(["ann@mx-one.test", "bob@mx-one.test"]);
    const got = await eventually(
      async () => (await caught()).find((m) => m.rcptTo.includes("ann@mx-one.test")),
      10_000,
      "arrival at the sink",
    );
    expect(got.mailFrom).toBe("no-reply@acme.test");
    expect(got.rcptTo).toEqual(["ann@mx-one.test", "bob@mx-one.test"]);
    const rs = await recipientsWhen(id, (r) => r.status === "delivered", "delivered");
    expect(rs[0]!.last_response).toMatchObject({ code: 250, mx: "localhost", tls: false });
    expect(rs[0]!.attempts).toBe(1);
    // EGRESS is the Dante bridge here: the connection went through it, with RFC 1929 login.
    const socksLog = await (await fetch(new URL("/log/socks", doh.url))).text();
    expect(socksLog).toMatch(
      new RegExp(`tcp/connect .*username%${inject("socks").username}@.* -> .* 127\\.0\\.0\\.1\\.${sink.smtpPort}\\b`),
    );
  });

  it("with DESTINATION_GROUPING=site (this project) the feedback goes to the MX site's Destination DO, shared by its domains", async () => {
    const id = await send(["site-a@mx-one.test"]);
    await recipientsWhen(id, (r) => r.status === "delivered", "delivered");
    const site = await eventually(
      async () => {
        const g = await env.DESTINATION_QUEUE.getByName("mx/site:localhost").get();
        return g.history.length > 0 ? g : undefined;
      },
      5000,
      "the site's DO to hear of it",
    );
    expect(site.record).toMatchObject({ transport: "mx", deadUntil: 0 });
    expect((await env.DESTINATION_QUEUE.getByName("mx/mx-one.test").get()).history).toHaveLength(0);
  });

  it("when the better MX host refuses the connection, the next one is tried in the same attempt", async () => {
    const id = await send(["carol@mx-two.test"]);
    const rs = await recipientsWhen(id, (r) => r.status === "delivered" || r.status === "deferred", "an outcome");
    expect(rs[0]).toMatchObject({ status: "delivered", attempts: 1, last_response: { code: 250, mx: "localhost" } });
    expect((await caught()).filter((m) => m.rcptTo.includes("carol@mx-two.test"))).toHaveLength(1);
    await expectNoSiteFailure("mx-two.test");
  });

  it("a null MX (RFC 7505) bounces with 5.1.10 and is no site failure", async () => {
    const id = await send(["dave@null-mx.test"]);
    const rs = await recipientsWhen(
      id,
      (r) => r.status !== "ready" && r.status !== "incoming" && r.status !== "active",
      "an outcome",
    );
    expect(rs[0]).toMatchObject({ status: "bounced", last_response: { code: 556, enhanced: "5.1.10" } });
    expect(rs[0]!.last_response!.mx).toBeUndefined();
    await expectNoSiteFailure("null-mx.test");
  });

  it("NXDOMAIN bounces with 5.1.2", async () => {
    const id = await send(["erin@nx.test"]);
    const rs = await recipientsWhen(
      id,
      (r) => r.status !== "ready" && r.status !== "incoming" && r.status !== "active",
      "an outcome",
    );
    expect(rs[0]).toMatchObject({ status: "bounced", last_response: { code: 550, enhanced: "5.1.2" } });
  });

  it("a resolver answering SERVFAIL defers (4.4.3) without a site failure", async () => {
    const id = await send(["frank@servfail.test"]);
    const rs = await recipientsWhen(
      id,
      (r) => r.status !== "ready" && r.status !== "incoming" && r.status !== "active",
      "an outcome",
    );
    expect(rs[0]).toMatchObject({ status: "deferred", last_response: { enhanced: "4.4.3" } });
    expect(rs[0]!.next_attempt_at).not.toBeNull();
    await expectNoSiteFailure("servfail.test");
    expect((await caught()).some((m) => m.rcptTo.includes("frank@servfail.test"))).toBe(false);
  });
});

describe("the mx kind's settings", () => {
  it("EGRESS names a direct path or a SOCKS5 bridge (credentials from the secrets); anything else throws", () => {
    expect(egressPathOf("direct", {})).toEqual({ kind: "direct" });
    expect(egressPathOf("", {})).toEqual({ kind: "direct" });
    expect(egressPathOf("socks5://127.0.0.1:1080", {})).toEqual({
      kind: "socks5",
      hostname: "127.0.0.1",
      port: 1080,
      credentials: null,
    });
    expect(egressPathOf("socks5://[::1]:1080/", { EGRESS_USERNAME: "u", EGRESS_PASSWORD: "p" })).toEqual({
      kind: "socks5",
      hostname: "::1",
      port: 1080,
      credentials: { username: "u", password: "p" },
    });
    for (const bad of ["socks4://h:1", "socks5://h", "socks5://h:0", "socks5://h:70000", "http://h:1"])
      expect(() => egressPathOf(bad, {})).toThrow(/EGRESS/);
  });

  it("MX_PORT defaults to 25 and must be a TCP port", () => {
    expect(mxSettingsOf({ ...env, MX_PORT: "" }).port).toBe(25);
    expect(mxSettingsOf({ ...env, MX_PORT: "2525", DOH_RESOLVER_URL: "" }).resolverUrl).toBe(
      "https://cloudflare-dns.com/dns-query",
    );
    expect(() => mxSettingsOf({ ...env, MX_PORT: "x" })).toThrow(/MX_PORT/);
  });
});

describe("teardown", () => {
  it("lets the queues settle", async () => {
    await settle();
  });
});
