/**
 * Mail that comes back, against `wrangler dev` (issue 14): every message goes in through wrangler's
 * /cdn-cgi/handler/email endpoint to the Worker's email() handler, byte for byte as written in
 * test/fixtures/inbound (DSNs in the structures Gmail, Outlook.com, Yahoo and qmail document, a
 * Postfix delay warning, an ARF report, an out-of-office reply, unrelated mail). The relay sends
 * with BOUNCE_DOMAIN set, so each recipient's transaction comes from its own VERP address, which
 * the smtp-server sink records; each notice is addressed to the VERP address of the recipient it
 * is about. Then the forged reports of issue 37 (a VERP DSN naming another recipient, a
 * co-recipient's DSN and ARF report without VERP, a stranger's ARF report by a custom
 * Message-ID) each change nothing and show in GET /relay/inbound/reports; an ARF report that
 * mailauth DKIM-signed for a configured feedback loop (FEEDBACK_LOOP_SENDERS, its key served by a
 * DoH fixture) is a complaint. Observed through the API only: GET /emails/:id (recipient
 * states), GET /relay/events (the feed: email.bounced after email.delivered, email.complained),
 * GET /relay/suppressions, GET /relay/inbound (the counts) and /relay/inbound/reports. A DSN
 * that real Postfix generated is tested in test/e2e/postfix/inbound-postfix.test.ts.
 */
import { generateKeyPairSync } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { dkimSign } from "mailauth/lib/dkim/sign.js";
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
// The feedback loop's signing key, its public half served by a DoH fixture at s1._domainkey.isp.example.
const fbl = generateKeyPairSync("rsa", { modulusLength: 2048 });
let doh: Server;

beforeAll(async () => {
  const fblTxt =
    `"v=DKIM1; k=rsa; p=${fbl.publicKey.export({ format: "der", type: "spki" }).toString("base64")}"`.replace(
      /(.{250})/g,
      '$1" "',
    );
  doh = createServer((req, res) => {
    const u = new URL(req.url ?? "/", "http://x");
    const found =
      (u.searchParams.get("name") ?? "").toLowerCase().replace(/\.$/, "") === "s1._domainkey.isp.example" &&
      u.searchParams.get("type") === "TXT";
    const body = found
      ? { Status: 0, Answer: [{ name: "s1._domainkey.isp.example.", type: 16, TTL: 60, data: fblTxt }] }
      : { Status: 3 };
    res.writeHead(200, { "content-type": "application/dns-json" }).end(JSON.stringify(body));
  });
  await new Promise<void>((r) => doh.listen(0, "127.0.0.1", r));
  sink = new SMTPServer({
    logger: false,
    disableReverseLookup: true,
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    onData: (stream, session, cb) => {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        const raw = Buffer.concat(chunks);
        const messageId = /^Message-ID:\s*(<[^>]+>)/im.exec(raw.toString("latin1"))?.[1] ?? "";
        for (const r of session.envelope.rcptTo)
          envelopes.set(r.address, {
            mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
            messageId,
            raw,
          });
        cb();
      });
    },
  });
  await new Promise<void>((r) => sink.listen(0, "127.0.0.1", r));
  const port = (sink.server.address() as AddressInfo).port;
  server = await startDevServer({
    tenant: "inbound",
    role: "operator",
    vars: {
      SMARTHOST: `[127.0.0.1]:${port}`,
      RELAY_TLS: "off",
      COHORT_ENV: "development",
      BOUNCE_DOMAIN,
      DOH_RESOLVER_URL: `http://127.0.0.1:${(doh.address() as AddressInfo).port}/dns-query`,
      FEEDBACK_LOOP_SENDERS: "isp.example",
      DKIM_KEYS: JSON.stringify([
        {
          domain: "acme.test",
          selector: "k1",
          algorithm: "rsa-sha256",
          private_key: dkim.privateKey.export({ format: "pem", type: "pkcs8" }).toString(),
        },
      ]),
    },
  });
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await new Promise<void>((r) => (sink ? sink.close(() => r()) : r()));
  await new Promise<void>((r) => (doh ? doh.close(() => r()) : r()));
});

const api = apiOf(() => server);

type Rcpt = {
  email: string;
  status: string;
  last_response: { code?: number; enhanced?: string; text?: string } | null;
};
const recipients = async (id: string) => (await api<{ recipients: Rcpt[] }>("GET", `/emails/${id}`)).recipients;

/** Posts a message to wrangler dev's email endpoint, as Email Routing would hand it to the Worker. */
async function post(text: string, to: string, from: string): Promise<{ status: number; text: string }> {
  const url = new URL("/cdn-cgi/handler/email", server.url);
  url.searchParams.set("from", from);
  url.searchParams.set("to", to);
  const res = await devFetch(url.toString(), { method: "POST", body: text });
  return { status: res.status, text: await res.text() };
}

/** A fixture, its own Message-ID replaced by `id` when given, posted to `vars.TO`. */
function deliverInbound(
  name: string,
  vars: Record<string, string>,
  from: string,
  id?: string,
): Promise<{ status: number; text: string }> {
  const text = fixtureText(name, vars);
  return post(id === undefined ? text : text.replace(/^Message-I[Dd]: <[^>]+>/m, `Message-ID: ${id}`), vars.TO!, from);
}

/** The feedback loop's ARF report about `rcpt`, DKIM-signed by mailauth as isp.example. */
async function signedArf(vars: Record<string, string>): Promise<string> {
  const text = fixtureText("arf.eml", vars).replace(/^Message-ID: <[^>]+>/m, "Message-ID: <arf-signed@isp.example>");
  const privateKey = fbl.privateKey.export({ format: "pem", type: "pkcs8" }).toString();
  const signed = await dkimSign(text, {
    signatureData: [
      {
        signingDomain: "isp.example",
        selector: "s1",
        privateKey,
        algorithm: "rsa-sha256",
        canonicalization: "relaxed/relaxed",
      },
    ],
  } as never);
  return signed.signatures + text;
}

type Feed = { data: { type: string; data: { recipient: string } }[] };

describe("mail that comes back through Email Routing", () => {
  const rcpts = [
    "gmail@sink.test",
    "outlook@sink.test",
    "yahoo@sink.test",
    "qmail@sink.test",
    "away@sink.test",
    "co@sink.test",
  ] as const;
  let id: string;
  const vars = (rcpt: string) => ({
    TO: envelopes.get(rcpt)!.mailFrom,
    RCPT: rcpt,
    MSGID: envelopes.get(rcpt)!.messageId,
    SUBJECT: "Your receipt",
  });

  it("sends each recipient from its own VERP address on BOUNCE_DOMAIN", async () => {
    id = (
      await api<{ id: string }>("POST", "/emails", {
        from: "Acme <no-reply@acme.test>",
        to: rcpts,
        subject: "Your receipt",
        text: "Thanks",
      })
    ).id;
    await until(
      async () => ((await recipients(id)).every((r) => r.status === "delivered") ? true : undefined),
      "delivered",
    );
    for (const r of rcpts)
      expect(envelopes.get(r)!.mailFrom).toMatch(
        /^bounces\+[0-9a-f]{32}-[0-9a-z]+-[0-9a-f]{12}@bounces\.cohort\.test$/,
      );
    expect(new Set(rcpts.map((r) => envelopes.get(r)!.mailFrom)).size).toBe(rcpts.length);
  }, 60_000);

  it("Gmail, Outlook.com, Yahoo and qmail bounces move their recipient to bounced, with the reply, the event and a suppression", async () => {
    for (const [name, rcpt] of [
      ["gmail-5.1.1.eml", rcpts[0]],
      ["outlook-5.1.10.eml", rcpts[1]],
      ["yahoo-554.eml", rcpts[2]],
      ["qmail-5.1.1.eml", rcpts[3]],
    ] as const) {
      const res = await deliverInbound(name, vars(rcpt), "MAILER-DAEMON@mx.example.net");
      expect(res.status, `${name}: ${res.text}`).toBe(200);
    }
    const rs = await until(async () => {
      const r = await recipients(id);
      return r.filter((x) => x.status === "bounced").length === 4 ? r : undefined;
    }, "four bounced");
    const by = new Map(rs.map((r) => [r.email, r]));
    expect(by.get(rcpts[0])!.last_response).toMatchObject({ code: 550, enhanced: "5.1.1" });
    expect(by.get(rcpts[1])!.last_response).toMatchObject({
      code: 550,
      enhanced: "5.1.10",
      text: expect.stringContaining("RecipientNotFound"),
    });
    expect(by.get(rcpts[2])!.last_response).toMatchObject({ code: 554 });
    expect(by.get(rcpts[3])!.last_response).toMatchObject({ code: 550, enhanced: "5.1.1" });
    expect(by.get(rcpts[4])!.status).toBe("delivered");
    expect(by.get(rcpts[5])!.status).toBe("delivered");
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

  it(
    "forged reports change nothing, and the operator sees each: a VERP DSN naming another " +
      "recipient, a co-recipient's DSN and ARF, a stranger's ARF",
    async () => {
      const away = rcpts[4];
      const co = rcpts[5];
      const custom = (
        await api<{ id: string }>("POST", "/emails", {
          from: "Acme <no-reply@acme.test>",
          to: "custom@sink.test",
          subject: "Custom",
          text: "Hi",
          headers: { "Message-ID": "<custom-e2e@acme.test>" },
        })
      ).id;
      await until(
        async () => ((await recipients(custom))[0]!.status === "delivered" ? true : undefined),
        "custom delivered",
      );
      // The custom Message-ID is found through the D1 index, which the delivery stage writes a moment later.
      await until(
        async () =>
          (await api<{ data: { id: string }[] }>("GET", "/emails?limit=100")).data.some((e) => e.id === custom)
            ? true
            : undefined,
        "custom indexed",
      );
      const forged = [
        await deliverInbound(
          "gmail-5.1.1.eml",
          { ...vars(away), TO: envelopes.get(co)!.mailFrom },
          "MAILER-DAEMON@mx.example.net",
          "<forged-verp@example.org>",
        ),
        await deliverInbound(
          "outlook-5.1.10.eml",
          { ...vars(away), TO: `postmaster@${BOUNCE_DOMAIN}` },
          co,
          "<forged-dsn@sink.test>",
        ),
        await post(
          fixtureText("arf.eml", { ...vars(away), TO: `fbl@${BOUNCE_DOMAIN}` })
            .replace("Feedback Loop <fbl@isp.example>", `<${co}>`)
            .replace("<arf-1@isp.example>", "<forged-arf@sink.test>"),
          `fbl@${BOUNCE_DOMAIN}`,
          co,
        ),
        await deliverInbound(
          "arf.eml",
          { TO: `fbl@${BOUNCE_DOMAIN}`, RCPT: "custom@sink.test", MSGID: "<custom-e2e@acme.test>", SUBJECT: "Custom" },
          "stranger@example.org",
          "<forged-custom@example.org>",
        ),
      ];
      for (const r of forged) expect(r.status, r.text).toBe(200);
      const reports = await until(async () => {
        const l = await api<{ data: { verdict: string; kind: string; message_id: string }[] }>(
          "GET",
          "/relay/inbound/reports?limit=100",
        );
        return l.data.filter((x) => x.message_id.startsWith("<forged-")).length === 4 ? l.data : undefined;
      }, "the forged reports in GET /relay/inbound/reports");
      const verdict = (id: string) => reports.find((x) => x.message_id === id)?.verdict;
      expect([
        verdict("<forged-verp@example.org>"),
        verdict("<forged-dsn@sink.test>"),
        verdict("<forged-arf@sink.test>"),
        verdict("<forged-custom@example.org>"),
      ]).toEqual(["mismatch", "unauthenticated", "unauthenticated", "unauthenticated"]);
      await new Promise((r) => setTimeout(r, 1000));
      expect((await recipients(id)).filter((r) => r.email === away || r.email === co).map((r) => r.status)).toEqual([
        "delivered",
        "delivered",
      ]);
      expect((await recipients(custom))[0]!.status).toBe("delivered");
      const feed = await api<Feed>("GET", "/relay/events?limit=100");
      expect(
        feed.data.filter(
          (e) =>
            [away, co, "custom@sink.test"].includes(e.data.recipient as never) &&
            ["email.bounced", "email.complained"].includes(e.type),
        ),
      ).toEqual([]);
      for (const a of [away, co, "custom@sink.test"])
        expect((await api<{ data: unknown[] }>("GET", `/relay/suppressions?address=${a}`)).data).toEqual([]);
    },
    60_000,
  );

  it(
    "a delay warning and an out-of-office reply leave the recipient delivered; an ARF " +
      "report DKIM-signed by a configured feedback loop is a complaint",
    async () => {
      const away = vars(rcpts[4]);
      expect((await deliverInbound("postfix-delay.eml", away, "MAILER-DAEMON@mx.example.net")).status).toBe(200);
      expect((await deliverInbound("out-of-office.eml", away, rcpts[4])).status).toBe(200);
      expect((await recipients(id)).find((r) => r.email === rcpts[4])!.status).toBe("delivered");
      const arf = await signedArf({ ...away, TO: `fbl@${BOUNCE_DOMAIN}` });
      const res = await post(arf, `fbl@${BOUNCE_DOMAIN}`, "fbl@isp.example");
      expect(res.status, res.text).toBe(200);
      await until(async () => {
        const f = await api<Feed>("GET", "/relay/events?limit=100");
        return f.data.some((e) => e.type === "email.complained" && e.data.recipient === rcpts[4]) ? true : undefined;
      }, "email.complained");
    },
    60_000,
  );

  it("refuses mail with no relation to any message", async () => {
    const res = await deliverInbound("unrelated.eml", { TO: `postmaster@${BOUNCE_DOMAIN}` }, "someone@example.org");
    expect(res.status).not.toBe(200);
    expect(res.text).toMatch(/550 5\.1\.1 this address takes only delivery status notifications/);
    const counts = await api<{ totals: Record<string, number> }>("GET", "/relay/inbound");
    expect(counts.totals).toEqual({
      bounce: 4,
      bounce_mismatch: 1,
      bounce_unauthenticated: 1,
      complaint_unauthenticated: 2,
      delay: 1,
      auto_reply: 1,
      complaint: 1,
      rejected: 1,
    });
  }, 60_000);
});

describe("one-click unsubscribe (RFC 8058)", () => {
  const rcpt = "reader@sink.test";
  let id: string;
  let link: URL;
  let mailto: string;

  it("the sent message carries List-Unsubscribe and List-Unsubscribe-Post inside a DKIM signature that verifies", async () => {
    id = (
      await api<{ id: string }>("POST", "/emails", {
        from: "Acme <news@acme.test>",
        to: rcpt,
        subject: "News",
        text: "Hello",
        unsubscribe: { topic: "news" },
      })
    ).id;
    const got = await until(async () => envelopes.get(rcpt), "the message at the sink");
    const resolver = async (name: string, type: string) => {
      if (type === "TXT" && name.toLowerCase() === "k1._domainkey.acme.test") return [[DKIM_TXT]];
      throw Object.assign(new Error(`NXDOMAIN ${name}`), { code: "ENOTFOUND" });
    };
    const result = await dkimVerify(got.raw, { resolver: resolver as never });
    expect(result.results.map((r) => ({ result: r.status.result, domain: r.signingDomain }))).toEqual([
      { result: "pass", domain: "acme.test" },
    ]);
    const signed = (result.results[0] as unknown as { signingHeaders: { keys: string } }).signingHeaders.keys
      .toLowerCase()
      .split(": ")
      .join(":")
      .split(":");
    expect(signed).toEqual(expect.arrayContaining(["list-unsubscribe", "list-unsubscribe-post"]));
    const head = got.raw
      .toString("latin1")
      .split("\r\n\r\n")[0]!
      .replace(/\r\n[ \t]+/g, " ");
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
    const res = await devFetch(link.toString(), {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "List-Unsubscribe=One-Click",
    });
    expect(res.status).toBe(200);
    const s = await until(
      async () =>
        (await api<{ data: { address: string; reason: string }[] }>("GET", `/relay/suppressions?address=${rcpt}`))
          .data[0],
      "the suppression",
    );
    expect(s).toMatchObject({ address: rcpt, reason: "unsubscribe:news" });
    const e = await until(
      async () =>
        (
          await api<{ data: { type: string; data: { email_id: string; unsubscribe?: unknown } }[] }>(
            "GET",
            "/relay/events?limit=100&type=email.unsubscribed",
          )
        ).data.find((x) => x.data.email_id === id),
      "email.unsubscribed in the feed",
    );
    expect(e.data.unsubscribe).toEqual({ topic: "news", method: "one-click" });
  }, 60_000);

  it("mail to the List-Unsubscribe mailto address unsubscribes too", async () => {
    const other = "other@sink.test";
    const id2 = (
      await api<{ id: string }>("POST", "/emails", {
        from: "Acme <news@acme.test>",
        to: other,
        subject: "News",
        text: "Hello",
        unsubscribe: true,
      })
    ).id;
    const got = await until(async () => envelopes.get(other), "the message at the sink");
    const to = /<mailto:([^>]+)>/.exec(got.raw.toString("latin1"))![1]!;
    const url = new URL("/cdn-cgi/handler/email", server.url);
    url.searchParams.set("from", other);
    url.searchParams.set("to", to);
    const res = await devFetch(url.toString(), {
      method: "POST",
      body:
        `From: ${other}\r\nTo: ${to}\r\nSubject: unsubscribe\r\nMessage-ID: ` +
        `<unsub-1@sink.test>\r\nDate: Thu, 26 Nov 2026 20:00:00 +0000\r\n\r\nunsubscribe\r\n`,
    });
    expect(res.status, await res.clone().text()).toBe(200);
    const e = await until(
      async () =>
        (
          await api<{ data: { type: string; data: { email_id: string; unsubscribe?: unknown } }[] }>(
            "GET",
            "/relay/events?limit=100&type=email.unsubscribed",
          )
        ).data.find((x) => x.data.email_id === id2),
      "email.unsubscribed by mail",
    );
    expect(e.data.unsubscribe).toEqual({ topic: null, method: "mailto" });
    expect(
      (await api<{ data: { reason: string }[] }>("GET", `/relay/suppressions?address=${other}`)).data[0],
    ).toMatchObject({ reason: "unsubscribe" });
  }, 60_000);
});
