/**
 * Mail that comes back to VERP addresses, in the Workers runtime: each recipient gets its own
 * transaction from its own signed bounce address, and the email() handler (worker/inbound/email.ts)
 * takes the fixtures of test/fixtures/inbound. A DSN to a VERP address bounces exactly the
 * recipient it was signed for (delivered → bounced, email.bounced after email.delivered, a
 * suppression), the same DSN again is a duplicate counted once, and one naming another recipient
 * changes nothing (a mismatch the operator sees). Exim's generic 5.0.0, its text-only reason and
 * an expiry are recorded with the right code and class; a delay notice publishes
 * email.delivery_delayed with the reporting MTA's text; automatic replies, with or without
 * Auto-Submitted, change nothing and are never refused. Reports without VERP:
 * inbound-trust.test.ts.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { addressTokenKey } from "../../../worker/inbound/tokens";
import { readTokenAddress } from "../../../worker/mail/verp";
import { callWithKey, email, eventually, getEmail, newKey, newOperatorKey } from "../helpers";
import { recipientsWhen } from "./observe";
import { arrival, envelopes, events, filled, inbound, messageIdOf, send, storedReport } from "./inbound-kit";
import gmail from "../../fixtures/inbound/gmail-5.1.1.eml?raw";
import yahoo from "../../fixtures/inbound/yahoo-554.eml?raw";
import delay from "../../fixtures/inbound/postfix-delay.eml?raw";
import ooo from "../../fixtures/inbound/out-of-office.eml?raw";
import vacationDefault from "../../fixtures/inbound/vacation-default.eml?raw";
import vacationGraces from "../../fixtures/inbound/vacation-graces.eml?raw";
import replyRe from "../../fixtures/inbound/reply-re.eml?raw";
import exim550 from "../../fixtures/inbound/exim-5.0.0.eml?raw";
import eximUnroute from "../../fixtures/inbound/exim-unrouteable.eml?raw";
import eximExpired from "../../fixtures/inbound/exim-expired.eml?raw";

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

const suppression = async (address: string) =>
  (
    await (
      await callWithKey(key, "GET", `/relay/suppressions?address=${address}`)
    ).json<{ data: { reason: string }[] }>()
  ).data[0];

describe("VERP and mail that comes back", () => {
  const rcpts = ["verp-ann@sink.test", "verp-bob@sink.test", "verp-eve@sink.test"];
  let id: string;
  const verp: Record<string, string> = {};
  let msgid: string;
  const vars = (rcpt: string, over: Record<string, string> = {}) => ({
    TO: verp[rcpt]!,
    RCPT: rcpt,
    MSGID: msgid,
    SUBJECT: "VERP",
    ...over,
  });

  it("sends each recipient its own transaction from a signed bounce address on BOUNCE_DOMAIN", async () => {
    id = await send(key, email({ to: rcpts, subject: "VERP" }), BOUNCE_DOMAIN);
    for (const [idx, r] of rcpts.entries()) {
      const m = await arrival(r);
      expect(m.rcptTo).toEqual([r]);
      expect(m.mailFrom).toMatch(
        new RegExp(`^bounces\\+${id.replace(/-/g, "")}-${idx}-[0-9a-f]{12}@bounces\\.cohort\\.test$`),
      );
      expect(await readTokenAddress(await addressTokenKey(env), m.mailFrom)).toEqual({
        kind: "bounces",
        emailId: id,
        idx,
      });
      verp[r] = m.mailFrom;
      msgid = messageIdOf(m);
    }
    await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered");
  });

  it("a Gmail DSN to ann's VERP address bounces ann only; the same DSN again is a duplicate, counted once", async () => {
    const dsn = filled(gmail, vars(rcpts[0]!));
    expect(await inbound(dsn, verp[rcpts[0]!]!)).toEqual({ kind: "bounce", rejected: null });
    const rs = await recipientsWhen(
      key,
      id,
      (r) => r.status === (r.email === rcpts[0] ? "bounced" : "delivered"),
      "ann bounced, the others delivered",
    );
    expect(rs.find((r) => r.email === rcpts[0])!.last_response).toMatchObject({ code: 550, enhanced: "5.1.1" });
    await eventually(
      async () => ((await events(id, rcpts[0]!)).includes("email.bounced") ? true : undefined),
      10_000,
      "email.bounced indexed",
    );
    expect((await events(id, rcpts[0]!)).filter((t) => t !== "email.sent")).toEqual([
      "email.delivered",
      "email.bounced",
    ]);
    expect(await eventually(() => suppression(rcpts[0]!), 10_000, "the suppression")).toMatchObject({
      reason: "bounce:invalid_recipient",
    });
    expect(await inbound(dsn, verp[rcpts[0]!]!)).toEqual({ kind: "duplicate", rejected: null });
    await new Promise((r) => setTimeout(r, 500));
    expect((await events(id, rcpts[0]!)).filter((t) => t === "email.bounced")).toHaveLength(1);
  });

  it("a DSN to bob's VERP address naming eve (a co-recipient's forgery) changes nothing, and the operator sees the mismatch", async () => {
    const forged = filled(gmail, vars(rcpts[2]!, { TO: verp[rcpts[1]!]! })).replace(
      "<5f1a2b3c.gmail-bounce@mx.google.com>",
      "<forged-1@example.org>",
    );
    expect(await inbound(forged, verp[rcpts[1]!]!)).toEqual({ kind: "bounce_mismatch", rejected: null });
    expect(await storedReport("<forged-1@example.org>")).toMatchObject({
      verdict: "mismatch",
      detail: { recipients: [{ verdict: "mismatch" }] },
    });
    await new Promise((r) => setTimeout(r, 500));
    const rs = (await getEmail(key, id)).body.recipients;
    expect(rs.filter((r) => r.email !== rcpts[0]).map((r) => r.status)).toEqual(["delivered", "delivered"]);
    expect(await suppression(rcpts[2]!)).toBeUndefined();
  });

  const delayNoticeTitle =
    "a delay notice publishes email.delivery_delayed with the MTA's text; automatic " +
    "replies, marked or not, change nothing and are never refused";
  it(delayNoticeTitle, async () => {
    const bob = rcpts[1]!;
    expect(await inbound(filled(delay, vars(bob)), verp[bob]!)).toEqual({ kind: "delay", rejected: null });
    const late = await eventually(
      async () => (await envelopes(id, bob)).find((e) => e.type === "email.delivery_delayed"),
      10_000,
      "email.delivery_delayed",
    );
    expect(late.data).toMatchObject({
      delivery: {
        enhanced_code: "4.4.1",
        response: expect.stringMatching(/^connect to inner\.example\.net\[192\.0\.2\.7\]:25: Connection timed out$/),
      },
    });
    const after = (await getEmail(key, id)).body.recipients.find((r) => r.email === bob) as unknown as {
      status: string;
      last_response: { enhanced: string };
    };
    expect(after).toMatchObject({ status: "delivered", last_response: { enhanced: "4.4.1" } });
    for (const reply of [ooo, vacationDefault, vacationGraces, replyRe]) {
      expect(await inbound(filled(reply, vars(bob)), verp[bob]!, bob)).toEqual({ kind: "auto_reply", rejected: null });
    }
    expect((await getEmail(key, id)).body.recipients.find((r) => r.email === bob)!.status).toBe("delivered");
    expect(await inbound(filled(yahoo, vars(bob)), verp[bob]!)).toEqual({ kind: "bounce", rejected: null });
    const rs = await recipientsWhen(
      key,
      id,
      (r) => r.status === (r.email === rcpts[2] ? "delivered" : "bounced"),
      "bob bounced",
    );
    expect(rs.find((r) => r.email === bob)!.last_response).toMatchObject({ code: 554, enhanced: "5.0.0" });
  });

  it("Exim's 5.0.0 records the 5.1.1 of its diagnostic, its text-only reason classifies, and an expiry is expired, suppressing nothing", async () => {
    const to = ["exim-x@sink.test", "exim-y@sink.test", "exim-z@sink.test"];
    const eid = await send(key, email({ to, subject: "Exim" }), BOUNCE_DOMAIN);
    const from = Object.fromEntries(await Promise.all(to.map(async (r) => [r, (await arrival(r)).mailFrom] as const)));
    const mid = messageIdOf(await arrival(to[0]!));
    await recipientsWhen(key, eid, (r) => r.status === "delivered", "delivered");
    const v = (r: string) => ({ TO: from[r]!, RCPT: r, MSGID: mid, SUBJECT: "Exim" });
    expect((await inbound(filled(exim550, v(to[0]!)), from[to[0]!]!)).kind).toBe("bounce");
    expect((await inbound(filled(eximUnroute, v(to[1]!)), from[to[1]!]!)).kind).toBe("bounce");
    expect((await inbound(filled(eximExpired, v(to[2]!)), from[to[2]!]!)).kind).toBe("expired");
    const rs = await recipientsWhen(key, eid, (r) => r.status !== "delivered", "all three reported");
    const by = new Map(rs.map((r) => [r.email, r]));
    expect(by.get(to[0]!)).toMatchObject({ status: "bounced", last_response: { code: 550, enhanced: "5.1.1" } });
    expect(by.get(to[1]!)).toMatchObject({
      status: "bounced",
      last_response: { code: 550, enhanced: "5.0.0", text: "Unrouteable address" },
    });
    expect(by.get(to[2]!)).toMatchObject({ status: "expired", last_response: { code: 451, enhanced: "4.7.1" } });
    const classOf = async (r: string, type: string) =>
      (await eventually(async () => (await envelopes(eid, r)).find((e) => e.type === type), 10_000, `${type} of ${r}`))
        .data;
    expect(await classOf(to[0]!, "email.bounced")).toMatchObject({
      classification: "invalid_recipient",
      bounce: { type: "Permanent", subType: "invalid_recipient" },
    });
    expect(await classOf(to[1]!, "email.bounced")).toMatchObject({ classification: "bad_domain" });
    expect(await classOf(to[2]!, "email.failed")).toMatchObject({
      classification: "expired",
      failed: { reason: "expired" },
    });
    expect(await eventually(() => suppression(to[1]!), 10_000, "the bad domain's suppression")).toMatchObject({
      reason: "bounce:bad_domain",
    });
    expect(await suppression(to[2]!)).toBeUndefined();
  });

  it("GET /relay/inbound counts what came back by day and kind, GET /relay/inbound/reports lists the verdicts (operator only)", async () => {
    const res = await callWithKey(operator, "GET", "/relay/inbound?days=1");
    expect(res.status).toBe(200);
    const body = await res.json<{
      totals: Record<string, number>;
      days: { day: string; counts: Record<string, number> }[];
    }>();
    expect(body.totals).toEqual({ bounce: 4, duplicate: 1, bounce_mismatch: 1, delay: 1, auto_reply: 4, expired: 1 });
    expect(body.days).toEqual([{ day: new Date().toISOString().slice(0, 10), counts: body.totals }]);
    expect((await callWithKey(key, "GET", "/relay/inbound")).status).toBe(403);
    const list = await (
      await callWithKey(operator, "GET", "/relay/inbound/reports?verdict=mismatch")
    ).json<{ data: { verdict: string; envelope_to: string; raw: string }[] }>();
    expect(list.data).toEqual([
      expect.objectContaining({
        verdict: "mismatch",
        envelope_to: verp[rcpts[1]!],
        raw: expect.stringContaining("<forged-1@example.org>"),
      }),
    ]);
    expect((await callWithKey(key, "GET", "/relay/inbound/reports")).status).toBe(403);
  });
});
