/**
 * Mail that comes back, against `wrangler dev` (issue 14): every message goes in through wrangler's
 * /cdn-cgi/handler/email endpoint to the Worker's email() handler, byte for byte as written in
 * test/fixtures/inbound (DSNs in the structures Gmail, Outlook.com, Yahoo and qmail document, a
 * Postfix delay warning, an ARF report, an out-of-office reply, unrelated mail). The relay sends
 * with BOUNCE_DOMAIN set, so each recipient's transaction comes from its own VERP address, which
 * the smtp-server sink records; each notice is addressed to the VERP address of the recipient it
 * is about. Observed through the API only: GET /emails/:id (recipient states), GET /relay/events
 * (the feed: email.bounced after email.delivered, email.complained), GET /relay/suppressions,
 * GET /relay/inbound (the counts). A DSN that real Postfix generated is tested in
 * test/e2e/postfix/inbound-postfix.test.ts.
 */
import { generateKeyPairSync } from "node:crypto";
import type { AddressInfo } from "node:net";
import { dkimVerify } from "mailauth/lib/dkim/verify.js";
import { SMTPServer } from "smtp-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devFetch, startDevServer, type DevServer } from "../../scripts/lib/dev-server";
import { apiOf, until } from "./dev-api";
import { fixtureText } from "../fixtures/inbound/fixture";

const BOUNCE_DOMAIN = "bounces.cohort.test";
let sink: SMTPServer;
const envelopes = new Map<string, { mailFrom: string; messageId: string; raw: Buffer }>();
// The operator's DKIM key for acme.test (wrangler dev signs development mail with DKIM_KEYS), and
// its public half as the TXT record mailauth's resolver answers.
const dkim = generateKeyPairSync("rsa", { modulusLength: 2048 });
const DKIM_TXT = `v=DKIM1; k=rsa; p=${dkim.publicKey.export({ format: "der", type: "spki" }).toString("base64")}`;
let server: DevServer;

beforeAll(async () => {
  sink = new SMTPServer({
    logger: false, disableReverseLookup: true, authOptional: true, disabledCommands: ["STARTTLS", "AUTH"],
    onData: (stream, session, cb) => {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        const raw = Buffer.concat(chunks);
        const messageId = /^Message-ID:\s*(<[^>]+>)/im.exec(raw.toString("latin1"))?.[1] ?? "";
        for (const r of session.envelope.rcptTo) envelopes.set(r.address, { mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "", messageId, raw });
        cb();
      });
    },
  });
  await new Promise<void>((r) => sink.listen(0, "127.0.0.1", r));
  const port = (sink.server.address() as AddressInfo).port;
  server = await startDevServer({
    tenant: "inbound", role: "operator",
    vars: {
      SMARTHOST: `[127.0.0.1]:${port}`, RELAY_TLS: "off", COHORT_ENV: "development", BOUNCE_DOMAIN,
      DKIM_KEYS: JSON.stringify([{ domain: "acme.test", selector: "k1", algorithm: "rsa-sha256", private_key: dkim.privateKey.export({ format: "pem", type: "pkcs8" }).toString() }]),
    },
  });
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await new Promise<void>((r) => (sink ? sink.close(() => r()) : r()));
});

const api = apiOf(() => server);

type Rcpt = { email: string; status: string; last_response: { code?: number; enhanced?: string; text?: string } | null };
const recipients = async (id: string) => (await api<{ recipients: Rcpt[] }>("GET", `/emails/${id}`)).recipients;

/** Posts a fixture to wrangler dev's email endpoint, as Email Routing would hand it to the Worker. */
async function deliverInbound(name: string, vars: Record<string, string>, from: string): Promise<{ status: number; text: string }> {
  const url = new URL("/cdn-cgi/handler/email", server.url);
  url.searchParams.set("from", from);
  url.searchParams.set("to", vars.TO!);
  const res = await devFetch(url.toString(), { method: "POST", body: fixtureText(name, vars) });
  return { status: res.status, text: await res.text() };
}

describe("mail that comes back through Email Routing", () => {
  const rcpts = ["gmail@sink.test", "outlook@sink.test", "yahoo@sink.test", "qmail@sink.test", "away@sink.test"] as const;
  let id: string;
  const vars = (rcpt: string) => ({ TO: envelopes.get(rcpt)!.mailFrom, RCPT: rcpt, MSGID: envelopes.get(rcpt)!.messageId, SUBJECT: "Your receipt" });

  it("sends each recipient from its own VERP address on BOUNCE_DOMAIN", async () => {
    id = (await api<{ id: string }>("POST", "/emails", { from: "Acme <no-reply@acme.test>", to: rcpts, subject: "Your receipt", text: "Thanks" })).id;
    await until(async () => ((await recipients(id)).every((r) => r.status === "delivered") ? true : undefined), "delivered");
    for (const r of rcpts) expect(envelopes.get(r)!.mailFrom).toMatch(/^bounces\+[0-9a-f]{32}-[0-9a-z]+-[0-9a-f]{12}@bounces\.cohort\.test$/);
    expect(new Set(rcpts.map((r) => envelopes.get(r)!.mailFrom)).size).toBe(rcpts.length);
  }, 60_000);

  it("Gmail, Outlook.com, Yahoo and qmail bounces move their recipient to bounced, with the reply, the event and a suppression", async () => {
    for (const [name, rcpt] of [["gmail-5.1.1.eml", rcpts[0]], ["outlook-5.1.10.eml", rcpts[1]], ["yahoo-554.eml", rcpts[2]], ["qmail-5.1.1.eml", rcpts[3]]] as const) {
      const res = await deliverInbound(name, vars(rcpt), "MAILER-DAEMON@mx.example.net");
      expect(res.status, `${name}: ${res.text}`).toBe(200);
    }
    const rs = await until(async () => {
      const r = await recipients(id);
      return r.filter((x) => x.status === "bounced").length === 4 ? r : undefined;
    }, "four bounced");
    const by = new Map(rs.map((r) => [r.email, r]));
    expect(by.get(rcpts[0])!.last_response).toMatchObject({ code: 550, enhanced: "5.1.1" });
    expect(by.get(rcpts[1])!.last_response).toMatchObject({ code: 550, enhanced: "5.1.10", text: expect.stringContaining("RecipientNotFound") });
    expect(by.get(rcpts[2])!.last_response).toMatchObject({ code: 554 });
    expect(by.get(rcpts[3])!.last_response).toMatchObject({ code: 550, enhanced: "5.1.1" });
    expect(by.get(rcpts[4])!.status).toBe("delivered");
    const feed = await until(async () => {
      const f = await api<{ data: { type: string; data: { recipient: string } }[] }>("GET", "/relay/events?limit=100");
      return f.data.filter((e) => e.type === "email.bounced").length === 4 ? f.data : undefined;
    }, "four email.bounced in the feed");
    for (const r of rcpts.slice(0, 4)) {
      const types = feed.filter((e) => e.data.recipient === r).map((e) => e.type);
      expect(types.indexOf("email.delivered")).toBeLessThan(types.indexOf("email.bounced"));
    }
    const s = await until(async () => {
      const l = await api<{ data: { address: string; reason: string }[] }>("GET", "/relay/suppressions");
      return l.data.length >= 2 ? l.data : undefined;
    }, "suppressions");
    expect(s.find((x) => x.address === rcpts[0])).toMatchObject({ reason: "bounce:invalid_recipient" });
  }, 60_000);

  it("a delay warning and an out-of-office reply change nothing; an ARF report is a complaint", async () => {
    const away = vars(rcpts[4]);
    expect((await deliverInbound("postfix-delay.eml", away, "MAILER-DAEMON@mx.example.net")).status).toBe(200);
    expect((await deliverInbound("out-of-office.eml", away, rcpts[4])).status).toBe(200);
    expect((await recipients(id)).find((r) => r.email === rcpts[4])!.status).toBe("delivered");
    expect((await deliverInbound("arf.eml", { ...away, TO: `fbl@${BOUNCE_DOMAIN}` }, "fbl@isp.example")).status).toBe(200);
    await until(async () => {
      const f = await api<{ data: { type: string; data: { recipient: string } }[] }>("GET", "/relay/events?limit=100");
      return f.data.some((e) => e.type === "email.complained" && e.data.recipient === rcpts[4]) ? true : undefined;
    }, "email.complained");
  }, 60_000);

  it("refuses mail with no relation to any message", async () => {
    const res = await deliverInbound("unrelated.eml", { TO: envelopes.get(rcpts[0])!.mailFrom }, "someone@example.org");
    expect(res.status).not.toBe(200);
    expect(res.text).toMatch(/550 5\.1\.1 this address takes only delivery status notifications/);
    const counts = await api<{ totals: Record<string, number> }>("GET", "/relay/inbound");
    expect(counts.totals).toEqual({ bounce: 4, delay: 1, auto_reply: 1, complaint: 1, rejected: 1 });
  }, 60_000);
});

describe("one-click unsubscribe (RFC 8058)", () => {
  const rcpt = "reader@sink.test";
  let id: string;
  let link: URL;
  let mailto: string;

  it("the sent message carries List-Unsubscribe and List-Unsubscribe-Post inside a DKIM signature that verifies", async () => {
    id = (await api<{ id: string }>("POST", "/emails", { from: "Acme <news@acme.test>", to: rcpt, subject: "News", text: "Hello", unsubscribe: { topic: "news" } })).id;
    const got = await until(async () => envelopes.get(rcpt), "the message at the sink");
    const resolver = async (name: string, type: string) => {
      if (type === "TXT" && name.toLowerCase() === "k1._domainkey.acme.test") return [[DKIM_TXT]];
      throw Object.assign(new Error(`NXDOMAIN ${name}`), { code: "ENOTFOUND" });
    };
    const result = await dkimVerify(got.raw, { resolver: resolver as never });
    expect(result.results.map((r) => ({ result: r.status.result, domain: r.signingDomain }))).toEqual([{ result: "pass", domain: "acme.test" }]);
    const signed = (result.results[0] as unknown as { signingHeaders: { keys: string } }).signingHeaders.keys.toLowerCase().split(": ").join(":").split(":");
    expect(signed).toEqual(expect.arrayContaining(["list-unsubscribe", "list-unsubscribe-post"]));
    const head = got.raw.toString("latin1").split("\r\n\r\n")[0]!.replace(/\r\n[ \t]+/g, " ");
    expect(/^List-Unsubscribe-Post: (.*)$/im.exec(head)?.[1]).toBe("List-Unsubscribe=One-Click");
    const links = /^List-Unsubscribe: (.*)$/im.exec(head)![1]!;
    link = new URL(/<(http[^>]+)>/.exec(links)![1]!);
    mailto = /<mailto:([^>]+)>/.exec(links)![1]!;
    expect(link.origin).toBe(server.url);
    expect(mailto).toMatch(/^unsubscribe\+[0-9a-f]{32}-0-[0-9a-f]{12}@bounces\.cohort\.test$/);
  }, 60_000);

  it("GET changes nothing; a POST suppresses the address and emits email.unsubscribed", async () => {
    const page = await devFetch(link.toString());
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/Unsubscribe/);
    await new Promise((r) => setTimeout(r, 1000));
    expect((await api<{ data: { address: string }[] }>("GET", `/relay/suppressions?address=${rcpt}`)).data).toEqual([]);
    const res = await devFetch(link.toString(), { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "List-Unsubscribe=One-Click" });
    expect(res.status).toBe(200);
    const s = await until(async () => (await api<{ data: { address: string; reason: string }[] }>("GET", `/relay/suppressions?address=${rcpt}`)).data[0], "the suppression");
    expect(s).toMatchObject({ address: rcpt, reason: "unsubscribe:news" });
    const e = await until(async () => (await api<{ data: { type: string; data: { email_id: string; unsubscribe?: unknown } }[] }>("GET", "/relay/events?limit=100&type=email.unsubscribed")).data.find((x) => x.data.email_id === id), "email.unsubscribed in the feed");
    expect(e.data.unsubscribe).toEqual({ topic: "news", method: "one-click" });
  }, 60_000);

  it("mail to the List-Unsubscribe mailto address unsubscribes too", async () => {
    const other = "other@sink.test";
    const id2 = (await api<{ id: string }>("POST", "/emails", { from: "Acme <news@acme.test>", to: other, subject: "News", text: "Hello", unsubscribe: true })).id;
    const got = await until(async () => envelopes.get(other), "the message at the sink");
    const to = /<mailto:([^>]+)>/.exec(got.raw.toString("latin1"))![1]!;
    const url = new URL("/cdn-cgi/handler/email", server.url);
    url.searchParams.set("from", other);
    url.searchParams.set("to", to);
    const res = await devFetch(url.toString(), { method: "POST", body: `From: ${other}\r\nTo: ${to}\r\nSubject: unsubscribe\r\nMessage-ID: <unsub-1@sink.test>\r\nDate: Thu, 26 Nov 2026 20:00:00 +0000\r\n\r\nunsubscribe\r\n` });
    expect(res.status, await res.clone().text()).toBe(200);
    const e = await until(async () => (await api<{ data: { type: string; data: { email_id: string; unsubscribe?: unknown } }[] }>("GET", "/relay/events?limit=100&type=email.unsubscribed")).data.find((x) => x.data.email_id === id2), "email.unsubscribed by mail");
    expect(e.data.unsubscribe).toEqual({ topic: null, method: "mailto" });
    expect((await api<{ data: { reason: string }[] }>("GET", `/relay/suppressions?address=${other}`)).data[0]).toMatchObject({ reason: "unsubscribe" });
  }, 60_000);
});
