/**
 * Reports that came to no VERP address, in the Workers runtime (worker/inbound/): each forged
 * path of issue 37 changes nothing (no state, no event, no suppression, nothing for the
 * complaint-rate brake) and is kept for the operator with its verdict; the genuine paths still
 * act. Forged: a DSN with no authentication, a co-recipient's DSN from his own mailbox, a DSN
 * leaning on an Authentication-Results field the relay was not told to believe, a co-recipient's
 * ARF report, a stranger's ARF report by a custom Message-ID, a VERP ARF naming another
 * recipient. Genuine: a DSN DKIM-signed by the recipient domain's MX (the relay verifies the
 * signature itself over the fixture DoH server), one Email Routing vouches for, one found through
 * its References, an ARF report DKIM-aligned with a configured feedback loop, an ARF report to a
 * VERP address. A bounce quoting a large original is taken and stored truncated.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { callWithKey, email, eventually, getEmail, newKey, newOperatorKey } from "../helpers";
import { recipientsWhen } from "./observe";
import {
  arrival,
  events,
  filled,
  inbound,
  messageIdOf,
  publishRecord,
  reporterKey,
  send,
  storedReport,
} from "./inbound-kit";
import outlook from "../../fixtures/inbound/outlook-5.1.10.eml?raw";
import noOriginal from "../../fixtures/inbound/no-original.eml?raw";
import arf from "../../fixtures/inbound/arf.eml?raw";
import gmail from "../../fixtures/inbound/gmail-5.1.1.eml?raw";
import unrelated from "../../fixtures/inbound/unrelated.eml?raw";

const sink = inject("sink");
const BOUNCE_DOMAIN = "bounces.cohort.test";
const POSTMASTER = `postmaster@${BOUNCE_DOMAIN}`;
const FBL = { FEEDBACK_LOOP_SENDERS: "isp.example" };
let key: string;
let operator: string;
let reporter: (text: string) => Promise<string>;
let mailbox: (text: string) => Promise<string>;
let isp: (text: string) => Promise<string>;

beforeAll(async () => {
  key = await newKey("acme");
  operator = await newOperatorKey("ops-trust");
  await env.DB.batch([
    env.DB.prepare("INSERT OR IGNORE INTO transports (name, nexthop) VALUES ('sink', ?)").bind(
      `[127.0.0.1]:${sink.smtpPort}`,
    ),
    env.DB.prepare("INSERT OR IGNORE INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'sink.test', 'sink')"),
  ]);
  // sink.test's mail is hosted at reporter.test; co-recipients' own mailboxes sign as sink.test.
  await publishRecord("sink.test", "MX", ["10 mx1.reporter.test."]);
  [reporter, mailbox, isp] = await Promise.all([
    reporterKey("reporter.test"),
    reporterKey("sink.test"),
    reporterKey("isp.example"),
  ]);
});

const rcptOf = async (id: string, address: string) =>
  (await getEmail(key, id)).body.recipients.find((r) => r.email === address)!;
const suppressions = async (address: string) =>
  (
    await (
      await callWithKey(key, "GET", `/relay/suppressions?address=${address}`)
    ).json<{ data: { reason: string }[] }>()
  ).data;
const quiet = () => new Promise((r) => setTimeout(r, 500));
const withId = (text: string, id: string) => text.replace(/^Message-I[Dd]: <[^>]+>/m, `Message-ID: ${id}`);

describe("bounces without VERP", () => {
  const to = ["trust-cat@sink.test", "trust-dan@sink.test", "trust-fay@sink.test"];
  let id: string;
  let msgid: string;
  const v = (rcpt: string) => ({ TO: POSTMASTER, RCPT: rcpt, MSGID: msgid, SUBJECT: "plain" });

  it("are delivered from the From address, all in one transaction", async () => {
    id = await send(key, email({ to, subject: "plain" }), null);
    const m = await arrival(to[0]!);
    expect(m.mailFrom).toBe("no-reply@acme.test");
    msgid = messageIdOf(m);
    await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered");
  });

  it("an unauthenticated DSN, and a co-recipient's from his own DKIM-signed mailbox, change nothing and are kept with the reason", async () => {
    expect(await inbound(withId(filled(outlook, v(to[0]!)), "<forged-dsn-1@example.org>"), POSTMASTER)).toEqual({
      kind: "bounce_unauthenticated",
      rejected: null,
    });
    const own = await mailbox(withId(filled(outlook, v(to[0]!)), "<forged-dsn-2@sink.test>"));
    expect(await inbound(own, POSTMASTER, to[1]!)).toEqual({ kind: "bounce_unauthenticated", rejected: null });
    expect(await storedReport("<forged-dsn-1@example.org>")).toMatchObject({
      verdict: "unauthenticated",
      detail: { recipients: [{ why: "unauthenticated: no DKIM signature verified and SPF did not pass" }] },
    });
    expect((await storedReport("<forged-dsn-2@sink.test>"))!.detail.recipients[0]!.why).toMatch(
      /not from the null sender/,
    );
    await quiet();
    expect((await rcptOf(id, to[0]!)).status).toBe("delivered");
    expect(await events(id, to[0]!)).not.toContain("email.bounced");
    expect(await suppressions(to[0]!)).toEqual([]);
  });

  it("an Authentication-Results field is believed only from ROUTING_AUTHSERV_ID, on top, as Email Routing adds it", async () => {
    const ar =
      "Authentication-Results: mx.cloudflare.net; dkim=pass header.d=reporter.test header.s=s1; spf=pass smtp.helo=mx1.reporter.test\r\n";
    const dsn = withId(filled(outlook, v(to[2]!)), "<routing-1@reporter.test>");
    expect(await inbound(ar + dsn, POSTMASTER)).toEqual({ kind: "bounce_unauthenticated", rejected: null });
    const stamped = withId(filled(outlook, v(to[2]!)), "<routing-2@reporter.test>");
    expect(await inbound(ar + stamped, POSTMASTER, "", { ROUTING_AUTHSERV_ID: "mx.cloudflare.net" })).toEqual({
      kind: "bounce",
      rejected: null,
    });
    await recipientsWhen(key, id, (r) => r.status === (r.email === to[2] ? "bounced" : "delivered"), "fay bounced");
  });

  it("the same DSN DKIM-signed by the recipient domain's MX bounces the recipient", async () => {
    const signed = await reporter(withId(filled(outlook, v(to[0]!)), "<genuine-dsn-1@reporter.test>"));
    expect(await inbound(signed, POSTMASTER)).toEqual({ kind: "bounce", rejected: null });
    const r = (
      await recipientsWhen(key, id, (x) => x.status === (x.email === to[1] ? "delivered" : "bounced"), "cat bounced")
    ).find((x) => x.email === to[0]);
    expect(r!.last_response).toMatchObject({ code: 550, enhanced: "5.1.10" });
    expect((await storedReport("<genuine-dsn-1@reporter.test>"))!.detail.recipients[0]).toMatchObject({
      verdict: "acted",
      why: "DKIM reporter.test, of its MX host mx1.reporter.test",
    });
  });

  it("a DSN that returns no original is found through its own References", async () => {
    expect(await inbound(await reporter(filled(noOriginal, v(to[1]!))), POSTMASTER)).toEqual({
      kind: "bounce",
      rejected: null,
    });
    await recipientsWhen(key, id, (r) => r.status === "bounced", "dan bounced too");
  });
});

describe("complaints", () => {
  const to = ["arf-a@sink.test", "arf-b@sink.test"];
  let id: string;
  const v = (rcpt: string, msgid: string) => ({
    TO: `fbl@${BOUNCE_DOMAIN}`,
    RCPT: rcpt,
    MSGID: msgid,
    SUBJECT: "news",
  });

  const forgedReportsTitle =
    "a co-recipient's ARF report and a stranger's by a custom Message-ID change nothing; a " +
    "DKIM-aligned configured feedback loop's is a complaint";
  it(forgedReportsTitle, async () => {
    id = await send(key, email({ to, subject: "news", headers: { "Message-ID": "<custom-37@acme.test>" } }), null);
    await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered");
    // A custom Message-ID is found through the D1 index, which the delivery stage writes a moment later.
    await eventually(
      () =>
        env.DB.prepare("SELECT id FROM messages WHERE message_id = '<custom-37@acme.test>'")
          .first<string>("id")
          .then((x) => x ?? undefined),
      10_000,
      "indexed",
    );
    const stranger = withId(filled(arf, v(to[0]!, "<custom-37@acme.test>")), "<arf-stranger@example.org>");
    expect(await inbound(stranger, `fbl@${BOUNCE_DOMAIN}`, "someone@example.org", FBL)).toEqual({
      kind: "complaint_unauthenticated",
      rejected: null,
    });
    const coRecipient = await mailbox(
      withId(
        filled(arf, v(to[0]!, "<custom-37@acme.test>")).replace(
          "From: Feedback Loop <fbl@isp.example>",
          `From: <${to[1]}>`,
        ),
        "<arf-co@sink.test>",
      ),
    );
    expect(await inbound(coRecipient, `fbl@${BOUNCE_DOMAIN}`, to[1]!, FBL)).toEqual({
      kind: "complaint_unauthenticated",
      rejected: null,
    });
    const unlisted = await isp(withId(filled(arf, v(to[0]!, "<custom-37@acme.test>")), "<arf-unlisted@isp.example>"));
    expect(await inbound(unlisted, `fbl@${BOUNCE_DOMAIN}`, "fbl@isp.example")).toEqual({
      kind: "complaint_unauthenticated",
      rejected: null,
    });
    await quiet();
    expect(await events(id, to[0]!)).not.toContain("email.complained");
    expect(await suppressions(to[0]!)).toEqual([]);
    const genuine = await isp(withId(filled(arf, v(to[0]!, "<custom-37@acme.test>")), "<arf-genuine@isp.example>"));
    expect(await inbound(genuine, `fbl@${BOUNCE_DOMAIN}`, "fbl@isp.example", FBL)).toEqual({
      kind: "complaint",
      rejected: null,
    });
    await eventually(
      async () => ((await events(id, to[0]!)).includes("email.complained") ? true : undefined),
      10_000,
      "email.complained",
    );
    expect(await eventually(async () => (await suppressions(to[0]!))[0], 10_000, "the suppression")).toMatchObject({
      reason: "complaint",
    });
    expect(await events(id, to[1]!)).not.toContain("email.complained");
  });

  it("an ARF report to a VERP address acts on its recipient, also with the recipient redacted; one naming another recipient is a mismatch", async () => {
    const vt = ["arf-v@sink.test", "arf-w@sink.test", "arf-x@sink.test"];
    const vid = await send(key, email({ to: vt, subject: "news" }), BOUNCE_DOMAIN);
    const [mv, mw] = [await arrival(vt[0]!), await arrival(vt[1]!)];
    await recipientsWhen(key, vid, (r) => r.status === "delivered", "delivered");
    const naming = (rcpt: string, mid: string) =>
      withId(filled(arf, { ...v(rcpt, messageIdOf(mv)), TO: mv.mailFrom }), mid);
    expect(await inbound(naming(vt[1]!, "<arf-verp-1@isp.example>"), mv.mailFrom, "x@isp.example")).toEqual({
      kind: "complaint_mismatch",
      rejected: null,
    });
    expect(await inbound(naming(vt[0]!, "<arf-verp-2@isp.example>"), mv.mailFrom, "x@isp.example")).toEqual({
      kind: "complaint",
      rejected: null,
    });
    await eventually(
      async () => ((await events(vid, vt[0]!)).includes("email.complained") ? true : undefined),
      10_000,
      "email.complained",
    );
    expect(await events(vid, vt[1]!)).not.toContain("email.complained");
    expect(mw.mailFrom).not.toBe(mv.mailFrom);
    const mx = await arrival(vt[2]!);
    const redacted = withId(
      filled(arf, { ...v(vt[2]!, "<redacted@isp.example>"), TO: mx.mailFrom }),
      "<arf-verp-3@isp.example>",
    )
      .replace(/^Original-Rcpt-To: .*\r\n/m, "")
      .replace(/^To: arf-x@sink\.test\r\n/m, "")
      .replace(/^Message-ID: <redacted@isp\.example>\r\n/m, "");
    expect(redacted).not.toContain("arf-x@sink.test");
    expect(await inbound(redacted, mx.mailFrom, "x@isp.example")).toEqual({ kind: "complaint", rejected: null });
    await eventually(
      async () => ((await events(vid, vt[2]!)).includes("email.complained") ? true : undefined),
      10_000,
      "email.complained, redacted",
    );
  });

  it("the complaint-rate brake counts only authenticated complaints", async () => {
    const brakeKey = await newKey("brake37");
    const bid = await send(brakeKey, email({ to: "brake-a@sink.test", subject: "news" }), null);
    const mid = messageIdOf(await arrival("brake-a@sink.test"));
    await eventually(
      async () => ((await events(bid, "brake-a@sink.test")).includes("email.delivered") ? true : undefined),
      10_000,
      "delivered, indexed",
    );
    const brake = { ...FBL, COMPLAINT_MIN_DELIVERED: "1", COMPLAINT_RATE_THRESHOLD: "0.01" };
    const paused = () =>
      env.DB.prepare("SELECT bulk_paused_until AS u FROM tenant_settings WHERE tenant_id = 'brake37'").first<{
        u: number | null;
      }>("u");
    const forged = withId(filled(arf, v("brake-a@sink.test", mid)), "<arf-brake-forged@example.org>");
    expect((await inbound(forged, `fbl@${BOUNCE_DOMAIN}`, "fbl@isp.example", brake)).kind).toBe(
      "complaint_unauthenticated",
    );
    expect(await paused()).toBeNull();
    const genuine = await isp(withId(filled(arf, v("brake-a@sink.test", mid)), "<arf-brake-genuine@isp.example>"));
    expect((await inbound(genuine, `fbl@${BOUNCE_DOMAIN}`, "fbl@isp.example", brake)).kind).toBe("complaint");
    expect(await paused()).toBeGreaterThan(Date.now());
  });
});

describe("what is not a report, and what cannot be matched", () => {
  it("refuses mail that is not a report; keeps a DSN about no message; a forged VERP token is no VERP address", async () => {
    const refused = { kind: "rejected", rejected: expect.stringMatching(/^550 5\.1\.1 /) };
    expect(await inbound(filled(unrelated, { TO: POSTMASTER }), POSTMASTER, "someone@example.org")).toEqual(refused);
    const nothing = { TO: POSTMASTER, RCPT: "x@example.net", MSGID: "<nothing@example.net>", SUBJECT: "x" };
    expect(await inbound(withId(filled(gmail, nothing), "<unmatched-1@example.org>"), POSTMASTER)).toEqual({
      kind: "bounce_unmatched",
      rejected: null,
    });
    const forgedToken = `bounces+${"0".repeat(32)}-0-000000000000@${BOUNCE_DOMAIN}`;
    expect(await inbound(filled(unrelated, { TO: forgedToken }), forgedToken, "someone@example.org")).toEqual(refused);
  });

  it("a bounce quoting an original of 5 MiB is taken, and stored truncated", async () => {
    const bid = await send(key, email({ to: "big@sink.test", subject: "big" }), BOUNCE_DOMAIN);
    const m = await arrival("big@sink.test");
    await recipientsWhen(key, bid, (r) => r.status === "delivered", "delivered");
    const dsn = withId(
      filled(gmail, { TO: m.mailFrom, RCPT: "big@sink.test", MSGID: messageIdOf(m), SUBJECT: "big" }),
      "<big-1@example.org>",
    );
    const big = dsn.replace("Hello\r\n", `${"x".repeat(998)}\r\n`.repeat(5 * 1100));
    expect(big.length).toBeGreaterThan(5 * 1024 * 1024);
    expect(await inbound(big, m.mailFrom)).toEqual({ kind: "bounce", rejected: null });
    await recipientsWhen(key, bid, (r) => r.status === "bounced", "bounced");
    const row = await env.DB.prepare(
      "SELECT length(raw) AS stored, raw_size AS size FROM inbound_reports WHERE message_id = '<big-1@example.org>'",
    ).first<{ stored: number; size: number }>();
    expect(row).toEqual({ stored: 64 * 1024, size: big.length });
  });

  it("GET /relay/inbound counts each kind with its verdict", async () => {
    const body = await (
      await callWithKey(operator, "GET", "/relay/inbound?days=1")
    ).json<{ totals: Record<string, number> }>();
    expect(body.totals).toEqual({
      bounce: 4,
      bounce_unauthenticated: 3,
      bounce_unmatched: 1,
      complaint: 4,
      complaint_unauthenticated: 4,
      complaint_mismatch: 1,
      rejected: 2,
    });
  });
});
