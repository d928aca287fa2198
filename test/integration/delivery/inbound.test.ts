/**
 * Mail that comes back, in the Workers runtime: VERP envelope senders on delivery (one SMTP
 * transaction per recipient, each from its own signed bounce address), and the email() handler
 * (worker/inbound/email.ts) taking the fixtures of test/fixtures/inbound: a DSN to a VERP address
 * bounces exactly the recipient it names (delivered → bounced, email.bounced after
 * email.delivered, a suppression); a DSN elsewhere is mapped through the original's Message-ID;
 * an ARF report is a complaint; delay notices and out-of-office replies change nothing; unrelated
 * mail and forged tokens are refused. GET /relay/inbound counts them.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import worker from "../../../worker";
import { handleInbound } from "../../../worker/inbound/email";
import { addressTokenKey } from "../../../worker/inbound/tokens";
import { readTokenAddress } from "../../../worker/mail/verp";
import { callWithKey, email, eventually, getEmail, newKey, newOperatorKey } from "../helpers";
import { caught, recipientsWhen, type Caught } from "./observe";
import gmail from "../../fixtures/inbound/gmail-5.1.1.eml?raw";
import outlook from "../../fixtures/inbound/outlook-5.1.10.eml?raw";
import yahoo from "../../fixtures/inbound/yahoo-554.eml?raw";
import delay from "../../fixtures/inbound/postfix-delay.eml?raw";
import ooo from "../../fixtures/inbound/out-of-office.eml?raw";
import arf from "../../fixtures/inbound/arf.eml?raw";
import unrelated from "../../fixtures/inbound/unrelated.eml?raw";

const sink = inject("sink");
const BOUNCE_DOMAIN = "bounces.cohort.test";
let key: string;
let operator: string;

beforeAll(async () => {
  key = await newKey("acme");
  operator = await newOperatorKey("ops-inbound");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('sink', ?)").bind(`[127.0.0.1]:${sink.smtpPort}`),
    env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'sink.test', 'sink')"),
  ]);
});

/** POST /emails with the operator's BOUNCE_DOMAIN set (or not). */
async function send(to: string[], subject: string, bounceDomain: string | null): Promise<string> {
  const ctx = createExecutionContext();
  const req = new Request("http://relay.test/emails", {
    method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify(email({ to, subject })),
  }) as Request<unknown, IncomingRequestCfProperties>;
  const res = await worker.fetch(req, bounceDomain === null ? env : { ...env, BOUNCE_DOMAIN: bounceDomain } as Env, ctx);
  await waitOnExecutionContext(ctx);
  expect(res.status).toBe(200);
  return (await res.json<{ id: string }>()).id;
}

/** The transaction the sink received for `rcpt`. */
const arrival = (rcpt: string) => eventually(async () => (await caught(sink.httpPort)).find((m) => m.rcptTo.includes(rcpt)), 10_000, `mail for ${rcpt}`);

function messageIdOf(m: Caught): string {
  return /^Message-ID:\s*(<[^>]+>)/im.exec(atob(m.body))![1]!;
}

/** Hands `text` (a fixture with its placeholders) to the email() handler as Email Routing would. */
async function inbound(template: string, vars: Record<string, string>, from = "") {
  const text = template.replace(/\{\{(\w+)\}\}/g, (_, k: string) => vars[k] ?? "").replace(/\r?\n/g, "\r\n");
  const bytes = new TextEncoder().encode(text);
  let rejected: string | null = null;
  const kind = await handleInbound({ from, to: vars.TO!, raw: new Response(bytes).body!, rawSize: bytes.length, setReject: (r) => { rejected = r; } }, env);
  return { kind, rejected: rejected as string | null };
}

const events = async (id: string, rcpt: string) => (await env.DB.prepare("SELECT type FROM event_log WHERE email_id = ? AND recipient = ? AND type IS NOT NULL ORDER BY seq").bind(id, rcpt).all<{ type: string }>()).results.map((r) => r.type);

describe("VERP and mail that comes back", () => {
  let id: string;
  let verp: Record<string, string>;
  let msgid: string;

  it("sends each recipient its own transaction from a signed bounce address on BOUNCE_DOMAIN", async () => {
    id = await send(["verp-ann@sink.test", "verp-bob@sink.test"], "VERP", BOUNCE_DOMAIN);
    const [ann, bob] = [await arrival("verp-ann@sink.test"), await arrival("verp-bob@sink.test")];
    expect(ann.rcptTo).toEqual(["verp-ann@sink.test"]);
    expect(bob.rcptTo).toEqual(["verp-bob@sink.test"]);
    for (const [m, idx] of [[ann, 0], [bob, 1]] as const) {
      expect(m.mailFrom).toMatch(new RegExp(`^bounces\\+${id.replace(/-/g, "")}-${idx}-[0-9a-f]{12}@bounces\\.cohort\\.test$`));
      expect(await readTokenAddress(await addressTokenKey(env), m.mailFrom)).toEqual({ kind: "bounces", emailId: id, idx });
    }
    expect(ann.body).toBe(bob.body);
    verp = { "verp-ann@sink.test": ann.mailFrom, "verp-bob@sink.test": bob.mailFrom };
    msgid = messageIdOf(ann);
    await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered");
  });

  it("a Gmail DSN to ann's VERP address bounces ann only: email.bounced after email.delivered, and a suppression", async () => {
    const vars = { TO: verp["verp-ann@sink.test"]!, RCPT: "verp-ann@sink.test", MSGID: msgid, SUBJECT: "VERP" };
    expect(await inbound(gmail, vars)).toEqual({ kind: "bounce", rejected: null });
    const rs = await recipientsWhen(key, id, (r) => r.status === (r.email === "verp-ann@sink.test" ? "bounced" : "delivered"), "ann bounced, bob delivered");
    expect(rs.find((r) => r.email === "verp-ann@sink.test")!.last_response).toMatchObject({ code: 550, enhanced: "5.1.1" });
    await eventually(async () => ((await events(id, "verp-ann@sink.test")).includes("email.bounced") ? true : undefined), 10_000, "email.bounced indexed");
    expect((await events(id, "verp-ann@sink.test")).filter((t) => t !== "email.sent")).toEqual(["email.delivered", "email.bounced"]);
    const s = await eventually(async () => {
      const r = await (await callWithKey(key, "GET", "/relay/suppressions?address=verp-ann@sink.test")).json<{ data: { address: string; reason: string }[] }>();
      return r.data[0];
    }, 10_000, "the suppression");
    expect(s).toMatchObject({ address: "verp-ann@sink.test", reason: "bounce:invalid_recipient" });
    // The same DSN again changes nothing.
    expect((await inbound(gmail, vars)).kind).toBe("bounce");
    await new Promise((r) => setTimeout(r, 500));
    expect((await events(id, "verp-ann@sink.test")).filter((t) => t === "email.bounced")).toHaveLength(1);
  });

  it("Yahoo's plain-text notice to bob's address bounces bob; a delay warning and an out-of-office reply change nothing", async () => {
    const vars = { TO: verp["verp-bob@sink.test"]!, RCPT: "verp-bob@sink.test", MSGID: msgid, SUBJECT: "VERP" };
    expect(await inbound(delay, vars)).toEqual({ kind: "delay", rejected: null });
    expect(await inbound(ooo, vars, "verp-bob@sink.test")).toEqual({ kind: "auto_reply", rejected: null });
    expect((await getEmail(key, id)).body.recipients.find((r) => r.email === "verp-bob@sink.test")!.status).toBe("delivered");
    expect(await inbound(yahoo, vars)).toEqual({ kind: "bounce", rejected: null });
    const rs = await recipientsWhen(key, id, (r) => r.status === "bounced", "both bounced");
    expect(rs.find((r) => r.email === "verp-bob@sink.test")!.last_response).toMatchObject({ code: 554, enhanced: "5.0.0" });
  });

  it("without VERP, an Outlook.com DSN is mapped through the original's Message-ID, and an ARF report is a complaint", async () => {
    const other = await send(["verp-cat@sink.test", "verp-dan@sink.test"], "plain", null);
    const m = await arrival("verp-cat@sink.test");
    expect(m.mailFrom).toBe("no-reply@acme.test");
    expect(m.rcptTo).toEqual(["verp-cat@sink.test", "verp-dan@sink.test"]);
    await recipientsWhen(key, other, (r) => r.status === "delivered", "delivered");
    const vars = { TO: `postmaster@${BOUNCE_DOMAIN}`, RCPT: "verp-cat@sink.test", MSGID: messageIdOf(m), SUBJECT: "plain" };
    expect(await inbound(outlook, vars)).toEqual({ kind: "bounce", rejected: null });
    expect(await inbound(arf, { ...vars, RCPT: "verp-dan@sink.test" }, "fbl@isp.example")).toEqual({ kind: "complaint", rejected: null });
    await recipientsWhen(key, other, (r) => r.status === (r.email === "verp-cat@sink.test" ? "bounced" : "delivered"), "cat bounced");
    await eventually(async () => ((await events(other, "verp-dan@sink.test")).includes("email.complained") ? true : undefined), 10_000, "email.complained");
  });

  it("refuses unrelated mail, a DSN about no message of this relay, and a forged VERP token", async () => {
    const refused = { kind: "rejected", rejected: expect.stringMatching(/^550 5\.1\.1 /) };
    expect(await inbound(unrelated, { TO: verp["verp-ann@sink.test"]! }, "someone@example.org")).toEqual(refused);
    expect(await inbound(gmail, { TO: `postmaster@${BOUNCE_DOMAIN}`, RCPT: "x@example.net", MSGID: "<nothing@example.net>" })).toEqual(refused);
    const forged = verp["verp-ann@sink.test"]!.replace(/-[0-9a-f]{12}@/, "-000000000000@");
    expect(await inbound(gmail, { TO: forged, RCPT: "verp-ann@sink.test", MSGID: "<nothing@example.net>" })).toEqual(refused);
  });

  it("GET /relay/inbound counts what came back, by day and kind (operator only)", async () => {
    const res = await callWithKey(operator, "GET", "/relay/inbound?days=1");
    expect(res.status).toBe(200);
    const body = await res.json<{ totals: Record<string, number>; days: { day: string; counts: Record<string, number> }[] }>();
    expect(body.totals).toEqual({ bounce: 4, delay: 1, auto_reply: 1, complaint: 1, rejected: 3 });
    expect(body.days).toEqual([{ day: new Date().toISOString().slice(0, 10), counts: body.totals }]);
    expect((await callWithKey(key, "GET", "/relay/inbound")).status).toBe(403);
  });

  it("GET /relay/complaint-rate: complaints per delivery, for the tenant and each sending domain, against the threshold", async () => {
    const res = await callWithKey(key, "GET", "/relay/complaint-rate?days=1");
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      object: "complaint_rate", tenant: "acme", days: 1, threshold: 0.003,
      totals: { delivered: 4, complained: 1, rate: 0.25 }, domains: [{ domain: "acme.test", delivered: 4, complained: 1, rate: 0.25 }],
    });
    // Another tenant's key sees its own (nothing), whatever it asks for.
    const other = await newKey("someone-else");
    expect(await (await callWithKey(other, "GET", "/relay/complaint-rate?tenant=acme")).json()).toMatchObject({ tenant: "someone-else", totals: { delivered: 0, complained: 0, rate: 0 }, domains: [] });
    // An operator may name the tenant.
    expect(await (await callWithKey(operator, "GET", "/relay/complaint-rate?tenant=acme")).json()).toMatchObject({ tenant: "acme", totals: { delivered: 4, complained: 1 } });
    expect((await callWithKey(key, "GET", "/relay/complaint-rate?days=0")).status).toBe(422);
  });
});
