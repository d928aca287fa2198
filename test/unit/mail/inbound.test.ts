/**
 * What came back by mail (worker/mail/inbound.ts, through worker/inbound/parse.ts): the fixtures
 * in test/fixtures/inbound are written from the providers' documented structures (Gmail's and
 * Outlook.com's RFC 3464 reports, Yahoo's and qmail's plain-text notices, a Postfix delay
 * warning, an out-of-office reply, an ARF report, unrelated mail). A DSN Postfix itself generated
 * is tested end to end (test/e2e/inbound.test.ts).
 */
import { describe, expect, it } from "vitest";
import { bounceReply, readInbound } from "../../../worker/mail/inbound";
import { mostSpecific, reasonFor } from "../../../worker/mail/dsn-read";
import { reportOf } from "../../../worker/inbound/core/report";
import { classifyBounce } from "../../../worker/webhooks/core/classify";
import { parseInbound } from "../../../worker/inbound/parse";
import { fixtureText } from "../../fixtures/inbound/fixture";

const VARS = {
  TO: "bounces+0a1b2c3d4e5f4a6b8c7d9e0f1a2b3c4d-0-aaaaaaaaaaaa@send.acme.test",
  RCPT: "nobody@example.net",
  MSGID: "<0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d@acme.test>",
  SUBJECT: "Your receipt",
};

const fixture = (name: string) => new TextEncoder().encode(fixtureText(name, VARS));

const read = async (name: string, from = "") => readInbound(await parseInbound(fixture(name), from));

describe("readInbound", () => {
  it("Gmail's report: failed 5.1.1, the smtp diagnostic unfolded, the remote MTA and the original's Message-ID", async () => {
    const r = await read("gmail-5.1.1.eml");
    expect(r).toMatchObject({ kind: "dsn", format: "rfc3464", originalMessageId: VARS.MSGID });
    if (r.kind !== "dsn") throw new Error("not a dsn");
    expect(r.recipients).toEqual([
      expect.objectContaining({ address: VARS.RCPT, action: "failed", status: "5.1.1", diagnosticType: "smtp" }),
    ]);
    expect(bounceReply(r.recipients[0]!)).toMatchObject({
      code: 550,
      enhanced: "5.1.1",
      text: expect.stringMatching(/^550-5\.1\.1 The email account that you tried to reach does not exist\..*gsmtp$/),
      mx: expect.stringMatching(/^gmail-smtp-in\.l\.google\.com\./),
    });
  });

  it("Outlook.com's report: 5.1.10 RecipientNotFound, headers of the original in text/rfc822-headers", async () => {
    const r = await read("outlook-5.1.10.eml");
    expect(r).toMatchObject({
      kind: "dsn",
      format: "rfc3464",
      originalMessageId: VARS.MSGID,
      recipients: [{ address: VARS.RCPT, action: "failed", status: "5.1.10" }],
    });
    if (r.kind === "dsn")
      expect(bounceReply(r.recipients[0]!)).toEqual({
        code: 550,
        enhanced: "5.1.10",
        text: "550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup",
      });
  });

  it("Yahoo's plain-text Failure Notice: the 554 reply, the recipient before the copy, the quoted Message-ID", async () => {
    const r = await read("yahoo-554.eml");
    expect(r).toMatchObject({
      kind: "dsn",
      format: "heuristic",
      originalMessageId: VARS.MSGID,
      recipients: [{ address: VARS.RCPT, action: "failed", status: "5.0.0" }],
    });
    if (r.kind === "dsn")
      expect(bounceReply(r.recipients[0]!)).toMatchObject({
        code: 554,
        enhanced: "5.0.0",
        text: expect.stringMatching(/^554: delivery error: dd This user doesn't have a yahoo\.com account/),
      });
  });

  it("qmail's failure notice: the remote host's 550 5.1.1", async () => {
    const r = await read("qmail-5.1.1.eml");
    expect(r).toMatchObject({
      kind: "dsn",
      format: "heuristic",
      recipients: [{ address: VARS.RCPT, action: "failed", status: "5.1.1" }],
    });
    if (r.kind === "dsn")
      expect(bounceReply(r.recipients[0]!)).toMatchObject({
        code: 550,
        enhanced: "5.1.1",
        text: expect.stringMatching(/^550 5\.1\.1 <nobody@example\.net>: Recipient address rejected/),
      });
  });

  it("a Postfix delay warning is a delayed action, not a failure", async () => {
    expect(await read("postfix-delay.eml")).toMatchObject({
      kind: "dsn",
      recipients: [{ action: "delayed", status: "4.4.1" }],
    });
  });

  it("an out-of-office reply is an automatic reply, not a bounce", async () => {
    expect(await read("out-of-office.eml", VARS.RCPT)).toEqual({
      kind: "auto-reply",
      why: "Auto-Submitted: auto-replied",
    });
  });

  it("vacation(1)'s replies have no Auto-Submitted: its default message is known by its Subject, the manual's by its own headers", async () => {
    expect(await read("vacation-default.eml", VARS.RCPT)).toEqual({
      kind: "auto-reply",
      why: "an out-of-office Subject",
    });
    expect(await read("vacation-graces.eml", VARS.RCPT)).toEqual({
      kind: "auto-reply",
      why: "Delivered-By-The-Graces-Of (vacation)",
    });
    const head = (h: string) =>
      new TextEncoder().encode(`From: bob@example.net\r\nSubject: Re: hello\r\n${h}\r\n\r\nI am away.\r\n`);
    for (const [h, why] of [
      ["Precedence: junk", "Precedence: junk"],
      ["Precedence: list", "Precedence: list"],
      ["X-Autorespond: yes", "X-Autorespond"],
      ["Auto-Submitted: auto-generated", "Auto-Submitted: auto-generated"],
      ["X-Autogenerated: Reply", "X-Autogenerated"],
    ]) {
      expect(readInbound(await parseInbound(head(h!), "bob@example.net")), h).toEqual({ kind: "auto-reply", why });
    }
    expect(readInbound(await parseInbound(head("Auto-Submitted: no"), "bob@example.net"))).toEqual({ kind: "other" });
  });

  it('a plain reply ("Re: ...", no mark at all) is a report only when it comes to a VERP address: an auto-reply, never refused', async () => {
    const what = await read("reply-re.eml", VARS.RCPT);
    expect(what).toEqual({ kind: "other" });
    const token = { kind: "bounces" as const, emailId: "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", idx: 0 };
    expect(reportOf(what, token)).toEqual({
      kind: "auto-reply",
      why: "a reply to a VERP address that is not a report",
    });
    expect(reportOf(what, null)).toBeNull();
    expect(reportOf(what, { ...token, kind: "unsubscribe" })).toEqual({
      kind: "unsubscribe",
      token: { ...token, kind: "unsubscribe" },
    });
  });

  it("Exim's generic Status 5.0.0 gives way to the 5.1.1 of its Diagnostic-Code", async () => {
    const r = await read("exim-5.0.0.eml");
    if (r.kind !== "dsn") throw new Error("not a dsn");
    expect(r.recipients).toEqual([
      expect.objectContaining({ address: VARS.RCPT, action: "failed", status: "5.1.1", expired: false }),
    ]);
    expect(bounceReply(r.recipients[0]!)).toMatchObject({ code: 550, enhanced: "5.1.1", mx: "inner.example.net" });
  });

  it('with no Diagnostic-Code, Exim\'s reason comes from the text part: "Unrouteable address", a bad domain, not unknown', async () => {
    const r = await read("exim-unrouteable.eml");
    if (r.kind !== "dsn") throw new Error("not a dsn");
    expect(r.recipients[0]).toMatchObject({ status: "5.0.0", diagnostic: "Unrouteable address", expired: false });
    const reply = bounceReply(r.recipients[0]!);
    expect(reply).toEqual({ code: 550, enhanced: "5.0.0", text: "Unrouteable address" });
    expect(classifyBounce({ smtpCode: reply.code, enhancedCode: reply.enhanced, response: reply.text }).category).toBe(
      "bad_domain",
    );
  });

  it('an expiry (failed with a 4.x.x code, "retry timeout exceeded") is read as one, with the most specific code', async () => {
    const r = await read("exim-expired.eml");
    if (r.kind !== "dsn") throw new Error("not a dsn");
    expect(r.recipients[0]).toMatchObject({ action: "failed", status: "4.7.1", expired: true });
  });

  it("a DSN that does not return the original names it in its In-Reply-To and References (newest first)", async () => {
    const r = await read("no-original.eml");
    expect(r).toMatchObject({
      kind: "dsn",
      originalMessageId: null,
      references: [VARS.MSGID, "<earlier-thread@example.org>"],
    });
  });

  it("an ARF report is a complaint; unrelated mail is neither", async () => {
    expect(await read("arf.eml", "fbl@isp.example")).toEqual({ kind: "arf" });
    expect(await read("unrelated.eml", "someone@example.org")).toEqual({ kind: "other" });
  });

  it("mostSpecific prefers more non-zero digits, the first of equals; reasonFor reads Sendmail's and Postfix's lines", () => {
    expect(mostSpecific(["5.0.0", "5.1.1", null])).toBe("5.1.1");
    expect(mostSpecific(["5.0.0", "4.3.2"])).toBe("4.3.2");
    expect(mostSpecific(["5.1.0", "5.1.10"])).toBe("5.1.10");
    expect(mostSpecific(["4.4.7", "4.4.2"])).toBe("4.4.7");
    expect(mostSpecific([null])).toBeNull();
    const sendmail =
      "   ----- The following addresses had permanent fatal errors -----\n" +
      "<nobody@example.net>\n    (reason: 550 5.1.1 <nobody@example.net>... User unknown)\n\n";
    expect(reasonFor(sendmail, "nobody@example.net")).toBe("550 5.1.1 <nobody@example.net>... User unknown");
    expect(
      reasonFor(
        "<nobody@example.net>: host mx said: 550 5.1.1 unknown\n    (in reply to RCPT TO command)\n",
        "nobody@example.net",
      ),
    ).toBe("host mx said: 550 5.1.1 unknown (in reply to RCPT TO command)");
    expect(reasonFor("nothing here", "nobody@example.net")).toBeNull();
  });

  it("a bounce Subject from an ordinary sender is not taken for a bounce", async () => {
    const bytes = new TextEncoder().encode(
      "From: joe@example.org\r\nSubject: Undeliverable: my plans\r\n\r\n550 5.1.1 just kidding\r\n",
    );
    expect(readInbound(await parseInbound(bytes, "joe@example.org"))).toEqual({ kind: "other" });
  });
});
