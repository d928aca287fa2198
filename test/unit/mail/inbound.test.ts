/**
 * What came back by mail (worker/mail/inbound.ts, through worker/inbound/parse.ts): the fixtures
 * in test/fixtures/inbound are written from the providers' documented structures (Gmail's and
 * Outlook.com's RFC 3464 reports, Yahoo's and qmail's plain-text notices, a Postfix delay
 * warning, an out-of-office reply, an ARF report, unrelated mail). A DSN Postfix itself generated
 * is tested end to end (test/e2e/inbound.test.ts).
 */
import { describe, expect, it } from "vitest";
import { bounceReply, readInbound } from "../../../worker/mail/inbound";
import { parseInbound } from "../../../worker/inbound/parse";
import { fixtureText } from "../../fixtures/inbound/fixture";

const VARS = { TO: "bounces+0a1b2c3d4e5f4a6b8c7d9e0f1a2b3c4d-0-aaaaaaaaaaaa@send.acme.test", RCPT: "nobody@example.net", MSGID: "<0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d@acme.test>", SUBJECT: "Your receipt" };

const fixture = (name: string) => new TextEncoder().encode(fixtureText(name, VARS));

const read = async (name: string, from = "") => readInbound(await parseInbound(fixture(name), from));

describe("readInbound", () => {
  it("Gmail's report: failed 5.1.1, the smtp diagnostic unfolded, the remote MTA and the original's Message-ID", async () => {
    const r = await read("gmail-5.1.1.eml");
    expect(r).toMatchObject({ kind: "dsn", format: "rfc3464", originalMessageId: VARS.MSGID });
    if (r.kind !== "dsn") throw new Error("not a dsn");
    expect(r.recipients).toEqual([expect.objectContaining({ address: VARS.RCPT, action: "failed", status: "5.1.1", diagnosticType: "smtp" })]);
    expect(bounceReply(r.recipients[0]!)).toMatchObject({ code: 550, enhanced: "5.1.1", text: expect.stringMatching(/^550-5\.1\.1 The email account that you tried to reach does not exist\..*gsmtp$/), mx: expect.stringMatching(/^gmail-smtp-in\.l\.google\.com\./) });
  });

  it("Outlook.com's report: 5.1.10 RecipientNotFound, headers of the original in text/rfc822-headers", async () => {
    const r = await read("outlook-5.1.10.eml");
    expect(r).toMatchObject({ kind: "dsn", format: "rfc3464", originalMessageId: VARS.MSGID, recipients: [{ address: VARS.RCPT, action: "failed", status: "5.1.10" }] });
    if (r.kind === "dsn") expect(bounceReply(r.recipients[0]!)).toEqual({ code: 550, enhanced: "5.1.10", text: "550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup" });
  });

  it("Yahoo's plain-text Failure Notice: the 554 reply, the recipient before the copy, the quoted Message-ID", async () => {
    const r = await read("yahoo-554.eml");
    expect(r).toMatchObject({ kind: "dsn", format: "heuristic", originalMessageId: VARS.MSGID, recipients: [{ address: VARS.RCPT, action: "failed", status: "5.0.0" }] });
    if (r.kind === "dsn") expect(bounceReply(r.recipients[0]!)).toMatchObject({ code: 554, enhanced: "5.0.0", text: expect.stringMatching(/^554: delivery error: dd This user doesn't have a yahoo\.com account/) });
  });

  it("qmail's failure notice: the remote host's 550 5.1.1", async () => {
    const r = await read("qmail-5.1.1.eml");
    expect(r).toMatchObject({ kind: "dsn", format: "heuristic", recipients: [{ address: VARS.RCPT, action: "failed", status: "5.1.1" }] });
    if (r.kind === "dsn") expect(bounceReply(r.recipients[0]!)).toMatchObject({ code: 550, enhanced: "5.1.1", text: expect.stringMatching(/^550 5\.1\.1 <nobody@example\.net>: Recipient address rejected/) });
  });

  it("a Postfix delay warning is a delayed action, not a failure", async () => {
    expect(await read("postfix-delay.eml")).toMatchObject({ kind: "dsn", recipients: [{ action: "delayed", status: "4.4.1" }] });
  });

  it("an out-of-office reply is an automatic reply, not a bounce", async () => {
    expect(await read("out-of-office.eml", VARS.RCPT)).toEqual({ kind: "auto-reply", why: "Auto-Submitted: auto-replied" });
  });

  it("an ARF report is a complaint; unrelated mail is neither", async () => {
    expect(await read("arf.eml", "fbl@isp.example")).toEqual({ kind: "arf" });
    expect(await read("unrelated.eml", "someone@example.org")).toEqual({ kind: "other" });
  });

  it("a bounce Subject from an ordinary sender is not taken for a bounce", async () => {
    const bytes = new TextEncoder().encode("From: joe@example.org\r\nSubject: Undeliverable: my plans\r\n\r\n550 5.1.1 just kidding\r\n");
    expect(readInbound(await parseInbound(bytes, "joe@example.org"))).toEqual({ kind: "other" });
  });
});
