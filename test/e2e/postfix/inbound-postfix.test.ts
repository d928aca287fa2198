/*
 * A bounce that real Postfix generated, taken in by the relay's email() handler through
 * `wrangler dev`'s /cdn-cgi/handler/email endpoint (issue 14).
 *
 * The path
 *   POST /emails (two recipients) → the relay (wrangler dev, BOUNCE_DOMAIN set, so each recipient
 *   goes in its own transaction from its own VERP address) → a private Postfix as its smarthost,
 *   which accepts both (250) and relays them to a final server (smtp-server) that refuses
 *   nobody@example.net with 550 5.1.1. Postfix's bounce daemon then writes its DSN to the VERP
 *   address; transport_maps sends bounces.cohort.test to a capture server (smtp-server) in this
 *   test. The DSN's bytes go unchanged to the email() handler. The relay must then show, through
 *   its API only: nobody@example.net bounced (after delivered, with Postfix's 5.1.1), the other
 *   recipient still delivered, email.bounced in the feed, and the address suppressed.
 *
 * Assumptions
 *   As the other Postfix tests: Debian's postfix, run as root (skipped with a message otherwise).
 */
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devFetch, startDevServer, type DevServer } from "../../../scripts/lib/dev-server";
import { apiOf, until } from "../dev-api";
import { isRoot, postfixUnavailableReason, startRelayingPostfix, type PostfixInstance } from "./harness";

const BOUNCE_DOMAIN = "bounces.cohort.test";

if (!isRoot()) console.warn("inbound-postfix.test.ts: SKIPPED: Postfix instances need root (CI runs as root).");

type Captured = { mailFrom: string; rcptTo: string[]; raw: Buffer };

function listen(server: SMTPServer): Promise<number> {
  return new Promise((r) => server.listen(0, "127.0.0.1", () => r((server.server.address() as AddressInfo).port)));
}

function smtpServer(onRcpt: (address: string) => Error | null, captured: Captured[]): SMTPServer {
  return new SMTPServer({
    logger: false,
    disableReverseLookup: true,
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    onRcptTo: (a, _s, cb) => cb(onRcpt(a.address) ?? undefined),
    onData: (stream, session, cb) => {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        captured.push({
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          rcptTo: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks),
        });
        cb();
      });
    },
  });
}

describe.skipIf(!isRoot())("a DSN Postfix generated, into the email() handler of wrangler dev", () => {
  const finalGot: Captured[] = [];
  const dsns: Captured[] = [];
  let final: SMTPServer | null = null;
  let capture: SMTPServer | null = null;
  let postfix: PostfixInstance | null = null;
  let relay: DevServer | null = null;

  beforeAll(async () => {
    const reason = postfixUnavailableReason();
    if (reason) throw new Error(reason);
    final = smtpServer(
      (a) =>
        a.startsWith("nobody@")
          ? Object.assign(new Error("5.1.1 <nobody@example.net>: Recipient address rejected: User unknown"), {
              responseCode: 550,
            })
          : null,
      finalGot,
    );
    capture = smtpServer(() => null, dsns);
    const [finalPort, capturePort] = [await listen(final), await listen(capture)];
    postfix = await startRelayingPostfix({
      relayhost: { host: "127.0.0.1", port: finalPort },
      mainCf: { transport_maps: `inline:{ ${BOUNCE_DOMAIN}=smtp:[127.0.0.1]:${capturePort} }` },
    });
    relay = await startDevServer({
      tenant: "postfix-dsn",
      role: "operator",
      vars: { SMARTHOST: `[127.0.0.1]:${postfix.port}`, RELAY_TLS: "off", COHORT_ENV: "development", BOUNCE_DOMAIN },
    });
  }, 180_000);

  afterAll(async () => {
    await relay?.stop();
    await postfix?.stop();
    for (const s of [final, capture]) await new Promise<void>((r) => (s ? s.close(() => r()) : r()));
  });

  const api = apiOf(() => relay!);

  type Rcpt = {
    email: string;
    status: string;
    last_response: { code?: number; enhanced?: string; text?: string } | null;
  };

  it("bounces the recipient Postfix's DSN names, after its delivery, with the suppression and the event", async () => {
    const { id } = await api<{ id: string }>("POST", "/emails", {
      from: "Acme <no-reply@acme.test>",
      to: ["nobody@example.net", "someone@example.net"],
      subject: "to Postfix",
      text: "Hello",
    });
    // Postfix took both (250): the relay says delivered.
    await until(
      async () =>
        (await api<{ recipients: Rcpt[] }>("GET", `/emails/${id}`)).recipients.every((r) => r.status === "delivered")
          ? true
          : undefined,
      "delivered to Postfix",
    );
    const dsn = await until(async () => dsns[0], "Postfix's DSN at the capture server");
    expect(dsn.mailFrom).toBe("");
    expect(dsn.rcptTo).toHaveLength(1);
    expect(dsn.rcptTo[0]).toMatch(
      new RegExp(`^bounces\\+${id.replace(/-/g, "")}-0-[0-9a-f]{12}@bounces\\.cohort\\.test$`),
    );
    expect(dsn.raw.toString("latin1")).toMatch(/Content-Type: message\/delivery-status/);
    expect(finalGot.map((m) => m.rcptTo)).toEqual([["someone@example.net"]]);

    // Unchanged into the email() handler.
    const url = new URL("/cdn-cgi/handler/email", relay!.url);
    url.searchParams.set("from", "MAILER-DAEMON@relay.cohort.test");
    url.searchParams.set("to", dsn.rcptTo[0]!);
    const res = await devFetch(url.toString(), { method: "POST", body: dsn.raw });
    expect(res.status, await res.clone().text()).toBe(200);

    const rs = await until(async () => {
      const r = (await api<{ recipients: Rcpt[] }>("GET", `/emails/${id}`)).recipients;
      return r.find((x) => x.email === "nobody@example.net")?.status === "bounced" ? r : undefined;
    }, "nobody@example.net bounced");
    expect(rs.find((r) => r.email === "nobody@example.net")!.last_response).toMatchObject({
      code: 550,
      enhanced: "5.1.1",
      text: expect.stringContaining("User unknown"),
    });
    expect(rs.find((r) => r.email === "someone@example.net")!.status).toBe("delivered");
    const feed = await until(async () => {
      const f = await api<{ data: { type: string; data: { recipient: string; bounce?: { message: string } } }[] }>(
        "GET",
        "/relay/events?limit=100",
      );
      return f.data.some((e) => e.type === "email.bounced") ? f.data : undefined;
    }, "email.bounced in the feed");
    expect(
      feed
        .filter((e) => e.data.recipient === "nobody@example.net")
        .map((e) => e.type)
        .filter((t) => t !== "email.sent"),
    ).toEqual(["email.delivered", "email.bounced"]);
    const s = await until(
      async () => (await api<{ data: { address: string; reason: string }[] }>("GET", "/relay/suppressions")).data[0],
      "the suppression",
    );
    expect(s).toMatchObject({ address: "nobody@example.net", reason: "bounce:invalid_recipient" });
  }, 180_000);
});
