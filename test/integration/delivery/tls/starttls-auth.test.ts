/**
 * STARTTLS and AUTH to a smarthost (the relay kind) in the Workers runtime, against smtp-server
 * smarthosts started by tls-setup.ts. The project runs with RELAY_TLS = "required" and the
 * credentials RELAY_USERNAME / RELAY_PASSWORD (vitest.config.ts, project `delivery-tls`).
 *
 *   - a certificate signed by a CA in the trust store: delivered over TLS, AUTH PLAIN (or LOGIN
 *     when that is all the server offers), the server saw our user;
 *   - a wrong password (535): deferred, never bounced (Postfix's smtp_sasl_auth_soft_bounce);
 *   - a self-signed certificate in no trust store: verification fails, the recipient is deferred
 *     and the server never receives the message.
 *
 *   - a self-signed certificate the test chose to trust (added to the runtime's trust store,
 *     NODE_EXTRA_CA_CERTS in vitest.config.ts): delivered over TLS. That is the relaxed case
 *     "when the test says so": verification still runs, against an anchor the test supplied.
 *
 * Not covered, because workerd cannot do it: delivery with certificate verification switched
 * off. cloudflare:sockets' startTls() takes only expectedServerHostname; there is no option to
 * skip verification, so no RELAY_TLS_VERIFY setting can be honoured in this runtime (with
 * RELAY_TLS = "opportunistic" an unverifiable server is retried in plaintext instead, and then
 * AUTH is refused locally because credentials are never sent without TLS). On Cloudflare a
 * Worker cannot add trust anchors either: there, only publicly trusted certificates verify.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { callWithKey, email, newKey, settle } from "../../helpers";
import { recipientsWhen as waitRecipients, type Rcpt } from "../observe";

const sinks = inject("tlsSinks");
const NAMES = ["trusted", "login", "wrongpw", "untrusted", "pinned"] as const;
let key: string;

type Stats = {
  connections: number;
  sessions: number;
  authFailures: number;
  messages: { mailFrom: string; rcptTo: string[]; user: string | null; secure: boolean }[];
};

beforeAll(async () => {
  key = await newKey("acme");
  await env.DB.batch([
    ...NAMES.map((n) =>
      env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES (?, ?)").bind(n, `[127.0.0.1]:${sinks.ports[n]}`),
    ),
    ...NAMES.map((n) =>
      env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, ?, ?)").bind(`${n}.test`, n),
    ),
  ]);
});

async function stats(name: string): Promise<Stats> {
  return (await fetch(`${sinks.statsUrl}/${name}`)).json<Stats>();
}

async function send(to: string): Promise<string> {
  const res = await callWithKey(key, "POST", "/emails", email({ to: [to] }));
  expect(res.status).toBe(200);
  return (await res.json<{ id: string }>()).id;
}

const outcome = (id: string) =>
  waitRecipients(key, id, (r: Rcpt) => ["delivered", "deferred", "bounced"].includes(r.status), "an outcome", 15_000);

describe("STARTTLS with certificate verification", () => {
  it("a certificate from a trusted CA: delivered over TLS after AUTH PLAIN; the server saw our user", async () => {
    const id = await send("tina@trusted.test");
    const [r] = await outcome(id);
    expect(r).toMatchObject({
      status: "delivered",
      attempts: 1,
      last_response: { code: 250, mx: "127.0.0.1", tls: true },
    });
    const got = (await stats("trusted")).messages.filter((m) => m.rcptTo.includes("tina@trusted.test"));
    expect(got).toEqual([
      {
        mailFrom: "no-reply@acme.test",
        rcptTo: ["tina@trusted.test"],
        user: "cohort",
        secure: true,
        body: expect.any(String),
      },
    ]);
  });

  it("a self-signed certificate in no trust store: verification fails, the recipient is deferred and nothing is sent", async () => {
    const id = await send("uma@untrusted.test");
    const [r] = await outcome(id);
    expect(r!.status).toBe("deferred");
    expect(r!.last_response).toMatchObject({
      code: 421,
      enhanced: "4.7.5",
      tls: false,
      text: expect.stringContaining("TLS handshake"),
    });
    const s = await stats("untrusted");
    expect(s.connections).toBeGreaterThanOrEqual(1);
    expect(s.messages).toEqual([]);
    expect(s.authFailures).toBe(0);
  });

  it("a self-signed certificate the test trusts: delivered over TLS after AUTH", async () => {
    const id = await send("pia@pinned.test");
    const [r] = await outcome(id);
    expect(r).toMatchObject({
      status: "delivered",
      attempts: 1,
      last_response: { code: 250, mx: "127.0.0.1", tls: true },
    });
    const got = (await stats("pinned")).messages.filter((m) => m.rcptTo.includes("pia@pinned.test"));
    expect(got).toMatchObject([{ rcptTo: ["pia@pinned.test"], user: "cohort", secure: true }]);
  });
});

describe("AUTH to a smarthost", () => {
  it("AUTH LOGIN when the server offers only LOGIN", async () => {
    const id = await send("lou@login.test");
    const [r] = await outcome(id);
    expect(r).toMatchObject({ status: "delivered", last_response: { code: 250, tls: true } });
    expect((await stats("login")).messages.map((m) => [m.rcptTo[0], m.user])).toEqual([["lou@login.test", "cohort"]]);
  });

  it("a wrong password (535) defers the recipient (soft bounce); the server gets nothing", async () => {
    const id = await send("wes@wrongpw.test");
    const [r] = await outcome(id);
    expect(r).toMatchObject({
      status: "deferred",
      last_response: {
        code: 535,
        enhanced: "5.7.8",
        tls: true,
        text: expect.stringContaining("SASL authentication failed"),
      },
    });
    expect(r!.next_attempt_at).not.toBeNull();
    const s = await stats("wrongpw");
    expect(s.authFailures).toBeGreaterThanOrEqual(1);
    expect(s.messages).toEqual([]);
  });
});

describe("teardown", () => {
  it("lets the queues settle", async () => {
    await settle();
  });
});
