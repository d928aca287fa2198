import { describe, expect, it } from "vitest";
import { createSessionConfig, DEFAULT_TIMEOUTS } from "../../../worker/smtp/core/config";
import { isInvariantError, createLocalFailure } from "../../../worker/smtp/core/errors";
import { createReplyParser, feedReplyParser } from "../../../worker/smtp/core/reply";
import { advanceSession, isSessionDone, startSession } from "../../../worker/smtp/core/session";
import type { RecipientResult, SessionEvent, SessionOutcome } from "../../../worker/smtp/core/types";
import { envelope, runScripted, type Script } from "./scripted-server";

const PIPELINING_EHLO = "250-mx.test\r\n250-PIPELINING\r\n250-SIZE 10000\r\n250 ENHANCEDSTATUSCODES";

/** Parses one reply line into a reply event. */
function replyEvent(text: string): SessionEvent {
  const reply = feedReplyParser(createReplyParser(), `${text}\r\n`).replies[0];
  if (!reply) throw new Error(`bad reply ${text}`);
  return { kind: "reply", reply };
}

/** Status of each recipient of each message. */
function statuses(outcome: SessionOutcome): string[][] {
  return outcome.transactions.map((t) => t.recipients.map((r) => r.status));
}

/** Result of recipient `i` of message `m`. */
function rcpt(outcome: SessionOutcome, m: number, i: number): RecipientResult {
  const r = outcome.transactions[m]?.recipients[i];
  if (!r) throw new Error(`no result for message ${m} recipient ${i}`);
  return r;
}

describe("session handshake", () => {
  it("delivers one message without PIPELINING, one command per write", () => {
    const run = runScripted({}, [envelope({ rcptTo: ["b@example.net"] })], {});
    expect(run.sends).toEqual([
      "EHLO client.test\r\n",
      "MAIL FROM:<sender@example.org>\r\n",
      "RCPT TO:<b@example.net>\r\n",
      "DATA\r\n",
      "QUIT\r\n",
    ]);
    expect(run.actions.filter((a) => a.kind === "stream-body")).toEqual([{ kind: "stream-body", messageId: "m1" }]);
    expect(run.outcome.siteFailure).toBeNull();
    expect(rcpt(run.outcome, 0, 0)).toEqual({
      rcpt: "b@example.net",
      code: 250,
      enhanced: "2.0.0",
      text: "queued",
      status: "delivered",
      source: "remote",
    });
    expect(run.outcome.transactions[0]).toMatchObject({ remoteHost: "mx.test[192.0.2.1]", tls: false });
    expect(run.actions.at(-2)).toEqual({ kind: "close" });
  });

  it("sends MAIL, every RCPT and DATA in one write when the server offers PIPELINING", () => {
    const msg = envelope({ rcptTo: ["a@x.test", "b@x.test", "c@x.test"], sizeBytes: 321 });
    const run = runScripted({}, [msg], { EHLO: PIPELINING_EHLO });
    expect(run.sends).toEqual([
      "EHLO client.test\r\n",
      "MAIL FROM:<sender@example.org> SIZE=321\r\nRCPT TO:<a@x.test>\r\nRCPT TO:<b@x.test>\r\nRCPT TO:<c@x.test>\r\nDATA\r\n",
      "QUIT\r\n",
    ]);
    expect(statuses(run.outcome)).toEqual([["delivered", "delivered", "delivered"]]);
  });

  it("falls back to HELO when EHLO is refused and then uses no extension", () => {
    const msg = envelope({ rcptTo: ["a@x.test"], eightBitMime: true });
    const run = runScripted({}, [msg], { EHLO: "502 5.5.1 command not recognised" });
    expect(run.sends.slice(0, 3)).toEqual([
      "EHLO client.test\r\n",
      "HELO client.test\r\n",
      "MAIL FROM:<sender@example.org>\r\n",
    ]);
    expect(statuses(run.outcome)).toEqual([["delivered"]]);
  });

  const siteFailureCases: { name: string; script: Script; dsn: string; quit: boolean }[] = [
    { name: "421 greeting", script: { "<connect>": "421 4.3.2 busy" }, dsn: "4.3.2", quit: false },
    { name: "554 greeting (treated as 4xx)", script: { "<connect>": "554 5.7.1 go away" }, dsn: "4.7.1", quit: true },
    { name: "554 greeting without enhanced code", script: { "<connect>": "554 no" }, dsn: "4.0.0", quit: true },
    { name: "421 to EHLO", script: { EHLO: "421 4.7.0 closing" }, dsn: "4.7.0", quit: false },
    { name: "HELO 4xx after EHLO 5xx", script: { EHLO: "500 no", HELO: "450 4.7.1 later" }, dsn: "4.7.1", quit: true },
  ];
  it.each(siteFailureCases)("reports a site failure and defers everything for a $name", ({ script, dsn, quit }) => {
    const msgs = [envelope({ rcptTo: ["a@x.test", "b@x.test"] }), envelope({ id: "m2", rcptTo: ["c@x.test"] })];
    const run = runScripted({}, msgs, script);
    expect(run.outcome.siteFailure?.dsnStatus).toBe(dsn);
    expect(statuses(run.outcome)).toEqual([["deferred", "deferred"], ["deferred"]]);
    expect(run.sends.includes("QUIT\r\n")).toBe(quit);
    expect(run.sends.some((s) => s.startsWith("MAIL"))).toBe(false);
  });

  it("bounces without a site failure when HELO is refused with 5xx (a hard error)", () => {
    const run = runScripted({}, [envelope({ rcptTo: ["a@x.test"] })], { EHLO: "500 no", HELO: "550 5.7.1 not you" });
    expect(run.outcome.siteFailure).toBeNull();
    expect(rcpt(run.outcome, 0, 0)).toMatchObject({ status: "bounced", code: 550, enhanced: "5.7.1" });
  });

  it("reports a 4.4.1 site failure when the connection is refused", () => {
    const run = runScripted({}, [envelope({ rcptTo: ["a@x.test"] })], { "<connect>": { drop: "ECONNREFUSED" } });
    expect(run.outcome.siteFailure).toEqual({
      dsnStatus: "4.4.1",
      reason: "connect to mx.test[192.0.2.1]: ECONNREFUSED",
    });
    expect(rcpt(run.outcome, 0, 0)).toMatchObject({ status: "deferred", enhanced: "4.4.1", source: "local" });
    expect(run.sends).toEqual([]);
  });

  it("reports a site failure when the greeting never comes", () => {
    const run = runScripted({}, [envelope({ rcptTo: ["a@x.test"] })], { "<connect>": null });
    expect(run.outcome.siteFailure?.reason).toBe(
      "conversation with mx.test[192.0.2.1] timed out while receiving the initial server greeting",
    );
    expect(statuses(run.outcome)).toEqual([["deferred"]]);
  });

  it("returns at once for an empty message list", () => {
    const cfg = createSessionConfig({ heloName: "c.test", remoteHost: "mx" });
    const step = startSession(cfg, []);
    expect(isSessionDone(step.state)).toBe(true);
    expect(step.actions).toEqual([
      { kind: "done", outcome: { siteFailure: null, transactions: [], remoteHost: "mx", tls: false } },
    ]);
  });
});

describe("session STARTTLS", () => {
  const TLS_EHLO = ["250-mx.test\r\n250 STARTTLS", "250-mx.test\r\n250 PIPELINING"];

  it("starts TLS when offered, says EHLO again, and marks results as encrypted", () => {
    const run = runScripted({}, [envelope({ rcptTo: ["a@x.test"] })], { EHLO: TLS_EHLO });
    expect(run.actions[0]).toEqual({ kind: "connect", secureTransport: "starttls" });
    expect(run.sends.slice(0, 4)).toEqual([
      "EHLO client.test\r\n",
      "STARTTLS\r\n",
      "EHLO client.test\r\n",
      "MAIL FROM:<sender@example.org>\r\nRCPT TO:<a@x.test>\r\nDATA\r\n",
    ]);
    expect(run.actions.filter((a) => a.kind === "starttls")).toHaveLength(1);
    expect(run.outcome.tls).toBe(true);
    expect(run.outcome.transactions[0]?.tls).toBe(true);
  });

  it("never sends STARTTLS with policy off, and connects with secureTransport off", () => {
    const run = runScripted({ tlsPolicy: "off" }, [envelope({ rcptTo: ["a@x.test"] })], { EHLO: TLS_EHLO });
    expect(run.actions[0]).toEqual({ kind: "connect", secureTransport: "off" });
    expect(run.sends).not.toContain("STARTTLS\r\n");
    expect(run.outcome.tls).toBe(false);
  });

  it("treats implicit TLS as encrypted from the start", () => {
    const run = runScripted({ implicitTls: true, tlsPolicy: "required" }, [envelope({ rcptTo: ["a@x.test"] })], {});
    expect(run.actions[0]).toEqual({ kind: "connect", secureTransport: "on" });
    expect(run.outcome.transactions[0]?.tls).toBe(true);
    expect(statuses(run.outcome)).toEqual([["delivered"]]);
  });

  it("defers with a 4.7.4 site failure when TLS is required but not offered", () => {
    const run = runScripted({ tlsPolicy: "required" }, [envelope({ rcptTo: ["a@x.test"] })], {});
    expect(run.outcome.siteFailure).toEqual({
      dsnStatus: "4.7.4",
      reason: "TLS is required, but was not offered by host mx.test[192.0.2.1]",
    });
    expect(statuses(run.outcome)).toEqual([["deferred"]]);
    expect(run.sends).toEqual(["EHLO client.test\r\n", "QUIT\r\n"]);
  });

  it("goes on in plaintext when STARTTLS is refused under the opportunistic policy", () => {
    const run = runScripted({}, [envelope({ rcptTo: ["a@x.test"] })], {
      EHLO: TLS_EHLO,
      STARTTLS: "454 4.7.0 TLS not available",
    });
    expect(run.sends.slice(0, 3)).toEqual([
      "EHLO client.test\r\n",
      "STARTTLS\r\n",
      "MAIL FROM:<sender@example.org>\r\n",
    ]);
    expect(statuses(run.outcome)).toEqual([["delivered"]]);
    expect(run.outcome.tls).toBe(false);
  });

  it("defers with a site failure when STARTTLS is refused and TLS is required", () => {
    const run = runScripted({ tlsPolicy: "required" }, [envelope({ rcptTo: ["a@x.test"] })], {
      EHLO: TLS_EHLO,
      STARTTLS: "454 4.7.0 TLS not available",
    });
    expect(run.outcome.siteFailure?.dsnStatus).toBe("4.7.0");
    expect(statuses(run.outcome)).toEqual([["deferred"]]);
  });

  it("defers with a 4.7.5 site failure when the handshake fails and TLS is required", () => {
    const run = runScripted({ tlsPolicy: "required" }, [envelope({ rcptTo: ["a@x.test"] })], {
      EHLO: TLS_EHLO,
      "<starttls>": { drop: "certificate verify failed" },
    });
    expect(run.outcome.siteFailure?.dsnStatus).toBe("4.7.5");
    expect(run.outcome.siteFailure?.reason).toContain("while performing the TLS handshake");
    expect(statuses(run.outcome)).toEqual([["deferred"]]);
  });

  it("treats a loss on the first EHLO over TLS as a handshake failure (opportunistic: plaintext retry)", () => {
    const run = runScripted({}, [envelope({ rcptTo: ["a@x.test"] })], {
      EHLO: ["250-mx.test\r\n250 STARTTLS", { drop: "internal error" }, "250 mx.test"],
    });
    expect(
      run.actions.filter((a) => a.kind === "connect").map((a) => a.kind === "connect" && a.secureTransport),
    ).toEqual(["starttls", "off"]);
    expect(statuses(run.outcome)).toEqual([["delivered"]]);
    expect(run.outcome.tls).toBe(false);
  });

  it("treats a loss on the first EHLO over TLS as a handshake failure (required: 4.7.5)", () => {
    const run = runScripted({ tlsPolicy: "required" }, [envelope({ rcptTo: ["a@x.test"] })], {
      EHLO: ["250-mx.test\r\n250 STARTTLS", { drop: "internal error" }],
    });
    expect(run.outcome.siteFailure?.dsnStatus).toBe("4.7.5");
    expect(statuses(run.outcome)).toEqual([["deferred"]]);
  });

  it("reconnects once in plaintext when an opportunistic handshake fails", () => {
    const run = runScripted({}, [envelope({ rcptTo: ["a@x.test"] })], {
      EHLO: "250-mx.test\r\n250 STARTTLS",
      "<starttls>": { drop: "handshake failure" },
    });
    const kinds = run.actions.map((a) => (a.kind === "connect" ? `connect:${a.secureTransport}` : a.kind));
    expect(kinds.slice(0, 6)).toEqual(["connect:starttls", "send", "send", "starttls", "close", "connect:off"]);
    expect(run.sends.filter((s) => s === "STARTTLS\r\n")).toHaveLength(1);
    expect(statuses(run.outcome)).toEqual([["delivered"]]);
    expect(run.outcome.siteFailure).toBeNull();
  });
});

describe("why a session went on without TLS (tlsProblem, for TLS reporting)", () => {
  const TLS_EHLO = "250-mx.test\r\n250 STARTTLS";

  it("names STARTTLS not offered, refused, or the handshake's failure; says nothing of an encrypted session", () => {
    const notOffered = runScripted({}, [envelope({ rcptTo: ["a@x.test"] })], {});
    expect(notOffered.outcome.transactions[0]!.tlsProblem).toBe("STARTTLS not offered by host mx.test[192.0.2.1]");
    const refused = runScripted({}, [envelope({ rcptTo: ["a@x.test"] })], {
      EHLO: TLS_EHLO,
      STARTTLS: "454 4.7.0 TLS not available",
    });
    expect(refused.outcome.transactions[0]!.tlsProblem).toMatch(/refused to start TLS: 454 4\.7\.0 TLS not available/);
    const failed = runScripted({}, [envelope({ rcptTo: ["a@x.test"] })], {
      EHLO: "250-mx.test\r\n250 STARTTLS",
      "<starttls>": { drop: "handshake failure" },
    });
    expect(failed.outcome.transactions[0]!.tlsProblem).toMatch(/while performing the TLS handshake: handshake failure/);
    const off = runScripted({ tlsPolicy: "off" }, [envelope({ rcptTo: ["a@x.test"] })], { EHLO: TLS_EHLO });
    expect(off.outcome.transactions[0]!.tlsProblem).toBeUndefined();
  });
});

describe("session AUTH", () => {
  const creds = { username: "joe", password: "secret" };
  const AUTH_EHLO = "250-mx.test\r\n250 AUTH LOGIN PLAIN";

  it("authenticates with AUTH PLAIN and an initial response", () => {
    const run = runScripted({ credentials: creds, allowPlaintextAuth: true }, [envelope({ rcptTo: ["a@x.test"] })], {
      EHLO: AUTH_EHLO,
    });
    expect(run.sends[1]).toBe(`AUTH PLAIN ${Buffer.from("\0joe\0secret").toString("base64")}\r\n`);
    expect(run.sends[2]).toBe("MAIL FROM:<sender@example.org>\r\n");
    expect(statuses(run.outcome)).toEqual([["delivered"]]);
  });

  it("authenticates with AUTH LOGIN when PLAIN is not offered", () => {
    const run = runScripted({ credentials: creds, allowPlaintextAuth: true }, [envelope({ rcptTo: ["a@x.test"] })], {
      EHLO: "250-mx.test\r\n250 AUTH=LOGIN",
      AUTH: "334 VXNlcm5hbWU6",
      am9l: "334 UGFzc3dvcmQ6",
      c2VjcmV0: "235 2.7.0 Authentication successful",
    });
    expect(run.sends.slice(1, 5)).toEqual([
      "AUTH LOGIN\r\n",
      "am9l\r\n",
      "c2VjcmV0\r\n",
      "MAIL FROM:<sender@example.org>\r\n",
    ]);
    expect(statuses(run.outcome)).toEqual([["delivered"]]);
  });

  it("defers (soft bounce) without a site failure when authentication fails", () => {
    const run = runScripted({ credentials: creds, allowPlaintextAuth: true }, [envelope({ rcptTo: ["a@x.test"] })], {
      EHLO: AUTH_EHLO,
      AUTH: "535 5.7.8 bad credentials",
    });
    expect(run.outcome.siteFailure).toBeNull();
    expect(rcpt(run.outcome, 0, 0)).toMatchObject({ status: "deferred", code: 535, enhanced: "5.7.8" });
    expect(rcpt(run.outcome, 0, 0).text).toContain("SASL authentication failed");
  });

  it("fails clearly when the server offers no usable mechanism", () => {
    const run = runScripted({ credentials: creds, allowPlaintextAuth: true }, [envelope({ rcptTo: ["a@x.test"] })], {
      EHLO: "250-mx.test\r\n250 AUTH CRAM-MD5 XOAUTH2",
    });
    expect(run.sends.some((s) => s.startsWith("AUTH"))).toBe(false);
    expect(rcpt(run.outcome, 0, 0)).toMatchObject({ status: "deferred", enhanced: "4.7.0", source: "local" });
    expect(rcpt(run.outcome, 0, 0).text).toContain("offers no usable mechanism (offered: CRAM-MD5 XOAUTH2)");
  });

  it("refuses to send credentials without TLS unless allowed", () => {
    const run = runScripted({ credentials: creds }, [envelope({ rcptTo: ["a@x.test"] })], { EHLO: AUTH_EHLO });
    expect(run.sends.some((s) => s.startsWith("AUTH"))).toBe(false);
    expect(rcpt(run.outcome, 0, 0).text).toContain("without TLS");
  });
});

describe("session transactions", () => {
  it("adds SIZE, BODY=8BITMIME and SMTPUTF8 only when announced and needed", () => {
    const ehlo = "250-mx.test\r\n250-SIZE\r\n250-8BITMIME\r\n250 SMTPUTF8";
    const msgs = [
      envelope({ rcptTo: ["a@x.test"], sizeBytes: 42, eightBitMime: true, smtpUtf8: true }),
      envelope({ id: "m2", rcptTo: ["δ@x.test"], sizeBytes: 7 }),
      envelope({ id: "m3", rcptTo: ["c@x.test"], sizeBytes: 9 }),
    ];
    const run = runScripted({}, msgs, { EHLO: ehlo });
    const mails = run.sends.filter((s) => s.startsWith("MAIL"));
    expect(mails).toEqual([
      "MAIL FROM:<sender@example.org> SIZE=42 BODY=8BITMIME SMTPUTF8\r\n",
      "MAIL FROM:<sender@example.org> SIZE=7 SMTPUTF8\r\n",
      "MAIL FROM:<sender@example.org> SIZE=9\r\n",
    ]);
  });

  it("sends no ESMTP parameter when nothing is announced", () => {
    const run = runScripted({}, [envelope({ rcptTo: ["a@x.test"], eightBitMime: true })], {});
    expect(run.sends[1]).toBe("MAIL FROM:<sender@example.org>\r\n");
  });

  it("bounces a message that needs SMTPUTF8 when the server does not offer it", () => {
    const run = runScripted({}, [envelope({ rcptTo: ["δ@x.test"] })], {});
    expect(rcpt(run.outcome, 0, 0)).toMatchObject({ status: "bounced", enhanced: "5.6.7", source: "local" });
    expect(run.sends).toEqual(["EHLO client.test\r\n", "QUIT\r\n"]);
  });

  it("refuses a message larger than the announced SIZE before sending it, and still sends the next", () => {
    const msgs = [
      envelope({ rcptTo: ["a@x.test"], sizeBytes: 20_000 }),
      envelope({ id: "m2", rcptTo: ["b@x.test"], sizeBytes: 500 }),
    ];
    const run = runScripted({}, msgs, { EHLO: PIPELINING_EHLO });
    expect(rcpt(run.outcome, 0, 0)).toEqual({
      rcpt: "a@x.test",
      code: 552,
      enhanced: "5.3.4",
      text: "message size 20000 exceeds size limit 10000 of server mx.test[192.0.2.1]",
      status: "bounced",
      source: "local",
    });
    expect(run.sends.filter((s) => s.startsWith("MAIL"))).toHaveLength(1);
    expect(run.sends).not.toContain("RSET\r\n");
    expect(statuses(run.outcome)).toEqual([["bounced"], ["delivered"]]);
  });

  it.each([
    { name: "without PIPELINING", ehlo: "250 mx.test" },
    { name: "with PIPELINING", ehlo: PIPELINING_EHLO },
  ])("gives each recipient its own RCPT outcome ($name)", ({ ehlo }) => {
    const msg = envelope({ rcptTo: ["ok@x.test", "gone@x.test", "later@x.test"] });
    const run = runScripted({}, [msg], {
      EHLO: ehlo,
      "RCPT TO:<gone@": "550 5.1.1 no such user",
      "RCPT TO:<later@": "451 4.3.0 try later",
    });
    expect(statuses(run.outcome)).toEqual([["delivered", "bounced", "deferred"]]);
    expect(rcpt(run.outcome, 0, 1)).toMatchObject({ code: 550, enhanced: "5.1.1", text: "no such user" });
    expect(run.outcome.siteFailure).toBeNull();
  });

  it("stops offering recipients after 452 and defers the rest (no PIPELINING)", () => {
    const msg = envelope({ rcptTo: ["r1@x.test", "r2@x.test", "r3@x.test", "r4@x.test", "r5@x.test"] });
    const run = runScripted({}, [msg], { RCPT: ["250 ok", "250 ok", "452 4.5.3 too many recipients"] });
    expect(run.sends.filter((s) => s.startsWith("RCPT"))).toHaveLength(3);
    expect(statuses(run.outcome)).toEqual([["delivered", "delivered", "deferred", "deferred", "deferred"]]);
    expect(rcpt(run.outcome, 0, 4)).toMatchObject({ code: 452, enhanced: "4.5.3" });
    expect(run.outcome.siteFailure).toBeNull();
  });

  it("defers (not bounces) every later recipient after a too-many-recipients reply with PIPELINING", () => {
    const msg = envelope({ rcptTo: ["r1@x.test", "r2@x.test", "r3@x.test", "r4@x.test"] });
    const run = runScripted({}, [msg], {
      EHLO: PIPELINING_EHLO,
      RCPT: ["250 ok", "552 5.5.3 too many recipients", "550 5.5.3 too many recipients", "250 ok"],
    });
    expect(statuses(run.outcome)).toEqual([["delivered", "deferred", "deferred", "delivered"]]);
    expect(run.outcome.siteFailure).toBeNull();
  });

  it("gives accepted recipients the DATA reply when DATA is refused", () => {
    const run = runScripted({}, [envelope({ rcptTo: ["a@x.test", "b@x.test"] })], {
      "RCPT TO:<b@": "550 5.1.1 unknown",
      DATA: "554 5.7.1 no thanks",
    });
    expect(statuses(run.outcome)).toEqual([["bounced", "bounced"]]);
    expect(rcpt(run.outcome, 0, 0)).toMatchObject({ code: 554, text: "no thanks" });
    expect(run.actions.some((a) => a.kind === "stream-body")).toBe(false);
  });

  it.each([
    { name: "4xx", reply: "451 4.3.0 queue full", status: "deferred" },
    { name: "5xx", reply: "554 5.6.0 content rejected", status: "bounced" },
  ])("maps a $name final reply to $status for every accepted recipient", ({ reply, status }) => {
    const run = runScripted({}, [envelope({ rcptTo: ["a@x.test", "b@x.test"] })], { "<dot>": reply });
    expect(statuses(run.outcome)).toEqual([[status, status]]);
  });

  it("bounces every recipient with the MAIL reply and ignores the pipelined RCPT/DATA replies", () => {
    const msgs = [envelope({ rcptTo: ["a@x.test", "b@x.test"] }), envelope({ id: "m2", rcptTo: ["c@x.test"] })];
    const run = runScripted({}, msgs, {
      EHLO: PIPELINING_EHLO,
      MAIL: ["553 5.7.1 sender refused", "250 ok"],
      RCPT: ["503 5.5.1 need MAIL", "503 5.5.1 need MAIL", "250 ok"],
      DATA: ["503 5.5.1 need RCPT", "354 go"],
    });
    expect(statuses(run.outcome)).toEqual([["bounced", "bounced"], ["delivered"]]);
    expect(rcpt(run.outcome, 0, 1)).toMatchObject({ code: 553, text: "sender refused" });
    expect(run.sends.filter((s) => s === "RSET\r\n")).toHaveLength(1);
  });

  it("ends DATA with a lone dot when the server accepts DATA after refusing every recipient", () => {
    const run = runScripted({}, [envelope({ rcptTo: ["a@x.test"] })], {
      EHLO: PIPELINING_EHLO,
      RCPT: "550 5.1.1 unknown",
      ".": "554 5.5.0 no valid recipients",
    });
    expect(run.sends).toContain(".\r\n");
    expect(run.actions.some((a) => a.kind === "stream-body")).toBe(false);
    expect(statuses(run.outcome)).toEqual([["bounced"]]);
  });

  it("bounces locally a recipient address that would inject commands, without sending it", () => {
    const run = runScripted({}, [envelope({ rcptTo: ["ok@x.test", "x@y>\r\nRSET"] })], {});
    expect(run.sends.join("")).not.toContain("x@y");
    expect(statuses(run.outcome)).toEqual([["delivered", "bounced"]]);
    expect(rcpt(run.outcome, 0, 1)).toMatchObject({ enhanced: "5.1.3", source: "local" });
  });

  it("sends RSET between messages so one session delivers several", () => {
    const msgs = [envelope({ rcptTo: ["a@x.test"] }), envelope({ id: "m2", rcptTo: ["b@x.test"] })];
    const run = runScripted({}, msgs, { EHLO: PIPELINING_EHLO, "<dot>": ["250 2.0.0 one", "250 2.0.0 two"] });
    expect(run.sends).toEqual([
      "EHLO client.test\r\n",
      "MAIL FROM:<sender@example.org> SIZE=100\r\nRCPT TO:<a@x.test>\r\nDATA\r\n",
      "RSET\r\n",
      "MAIL FROM:<sender@example.org> SIZE=100\r\nRCPT TO:<b@x.test>\r\nDATA\r\n",
      "QUIT\r\n",
    ]);
    expect(run.outcome.transactions.map((t) => [t.messageId, t.recipients[0]?.text])).toEqual([
      ["m1", "one"],
      ["m2", "two"],
    ]);
  });

  it("defers the rest of the session when RSET fails, without a site failure", () => {
    const msgs = [envelope({ rcptTo: ["a@x.test"] }), envelope({ id: "m2", rcptTo: ["b@x.test"] })];
    const run = runScripted({}, msgs, { RSET: "500 5.5.1 what" });
    expect(statuses(run.outcome)).toEqual([["delivered"], ["deferred"]]);
    expect(run.outcome.siteFailure).toBeNull();
  });

  it("waits for the QUIT reply when skipQuitResponse is false", () => {
    const run = runScripted({ skipQuitResponse: false }, [envelope({ rcptTo: ["a@x.test"] })], {});
    expect(run.waits.at(-1)).toEqual({ step: "quit", timeoutSec: 300 });
    expect(statuses(run.outcome)).toEqual([["delivered"]]);
  });
});

describe("session failures after the handshake", () => {
  const two = [envelope({ rcptTo: ["a@x.test"] }), envelope({ id: "m2", rcptTo: ["b@x.test", "c@x.test"] })];

  it("defers and reports a site failure when the connection drops during DATA of the first message", () => {
    const run = runScripted({}, [envelope({ rcptTo: ["a@x.test"] })], { "<body>": { drop: "connection reset" } });
    expect(statuses(run.outcome)).toEqual([["deferred"]]);
    expect(run.outcome.transactions[0]?.possibleDuplicate).toBe(false);
    expect(run.outcome.siteFailure).toEqual({
      dsnStatus: "4.4.2",
      reason: "lost connection with mx.test[192.0.2.1] while sending message body: connection reset",
    });
  });

  it("reports no site failure for a drop during DATA after a completed transaction", () => {
    const run = runScripted({}, two, { "<body>": ["ok", { drop: "connection reset" }] });
    expect(statuses(run.outcome)).toEqual([["delivered"], ["deferred", "deferred"]]);
    expect(run.outcome.siteFailure).toBeNull();
  });

  it("reports no site failure when the drop follows a completed transaction", () => {
    const run = runScripted({}, two, { RCPT: ["250 ok", { drop: "connection reset" }] });
    expect(statuses(run.outcome)).toEqual([["delivered"], ["deferred", "deferred"]]);
    expect(run.outcome.siteFailure).toBeNull();
    expect(rcpt(run.outcome, 1, 0).text).toBe(
      "lost connection with mx.test[192.0.2.1] while sending RCPT TO: connection reset",
    );
  });

  it("marks recipients deferred and possibly duplicated when the connection is lost after the final dot", () => {
    const run = runScripted({}, two, { "<dot>": ["250 ok", { drop: "connection reset" }] });
    expect(statuses(run.outcome)).toEqual([["delivered"], ["deferred", "deferred"]]);
    expect(run.outcome.transactions.map((t) => t.possibleDuplicate)).toEqual([false, true]);
    expect(rcpt(run.outcome, 1, 0).text).toContain("message may be sent more than once");
    expect(run.outcome.siteFailure).toBeNull();
  });

  it("times out waiting for the final reply: deferred, possible duplicate, site failure if nothing completed", () => {
    const run = runScripted({}, [envelope({ rcptTo: ["a@x.test"] })], { "<dot>": { silent: true } });
    expect(run.waits.at(-1)).toEqual({ step: "dot", timeoutSec: 600 });
    expect(statuses(run.outcome)).toEqual([["deferred"]]);
    expect(run.outcome.transactions[0]?.possibleDuplicate).toBe(true);
    expect(run.outcome.siteFailure?.reason).toContain("timed out while sending end of data");
  });

  it("treats an invalid reply line as a protocol error: deferred, site failure before any completed transaction", () => {
    const run = runScripted({}, [envelope({ rcptTo: ["a@x.test"] })], { RCPT: "25O ok" });
    expect(statuses(run.outcome)).toEqual([["deferred"]]);
    expect(rcpt(run.outcome, 0, 0)).toMatchObject({ enhanced: "4.5.0", source: "local" });
    expect(run.outcome.siteFailure?.dsnStatus).toBe("4.5.0");
    expect(run.sends).not.toContain("QUIT\r\n");
  });

  it("ends the session on a 421 mid-transaction without a site failure and without QUIT", () => {
    const run = runScripted({}, two, { RCPT: ["250 ok", "421 4.3.2 shutting down"] });
    expect(statuses(run.outcome)).toEqual([["delivered"], ["deferred", "deferred"]]);
    expect(rcpt(run.outcome, 1, 1)).toMatchObject({ code: 421, enhanced: "4.3.2", source: "remote" });
    expect(run.outcome.siteFailure).toBeNull();
    expect(run.sends).not.toContain("QUIT\r\n");
  });

  it("bounces the message in progress but defers the rest for a permanent local failure", () => {
    const cfg = createSessionConfig({ heloName: "c.test", remoteHost: "mx" });
    const msgs = [envelope({ rcptTo: ["a@x.test"] }), envelope({ id: "m2", rcptTo: ["b@x.test"] })];
    let step = startSession(cfg, msgs);
    const events: SessionEvent[] = [
      { kind: "connected" },
      replyEvent("220 hi"),
      replyEvent("250 mx"),
      replyEvent("250 ok"),
      replyEvent("250 ok"),
      replyEvent("354 go"),
    ];
    for (const e of events) step = advanceSession(step.state, e, cfg);
    expect(step.actions).toEqual([{ kind: "stream-body", messageId: "m1" }]);
    step = advanceSession(
      step.state,
      { kind: "failed", failure: createLocalFailure("body object missing", true) },
      cfg,
    );
    const outcome = step.state.outcome;
    expect(outcome && statuses(outcome)).toEqual([["bounced"], ["deferred"]]);
    expect(outcome?.siteFailure).toBeNull();
  });

  it("ignores events after the session is done", () => {
    const cfg = createSessionConfig({ heloName: "c.test", remoteHost: "mx" });
    const run = runScripted({}, [envelope({ rcptTo: ["a@x.test"] })], {});
    const after = advanceSession(run.state, { kind: "timeout" }, cfg);
    expect(after.actions).toEqual([]);
    expect(after.state).toBe(run.state);
  });

  it("throws InvariantError when the adapter reports an impossible event", () => {
    const cfg = createSessionConfig({ heloName: "c.test", remoteHost: "mx" });
    const { state } = startSession(cfg, [envelope({ rcptTo: ["a@x.test"] })]);
    let caught: unknown;
    try {
      advanceSession(state, { kind: "tls-established" }, cfg);
    } catch (e) {
      caught = e;
    }
    expect(isInvariantError(caught)).toBe(true);
  });
});

describe("session timeouts", () => {
  it("names the step and Postfix's default timeout for every wait", () => {
    const run = runScripted(
      { credentials: { username: "u", password: "p" }, allowPlaintextAuth: true },
      [envelope({ rcptTo: ["a@x.test"] }), envelope({ id: "m2", rcptTo: ["b@x.test"] })],
      { EHLO: ["250-mx.test\r\n250 STARTTLS", "250-mx.test\r\n250 AUTH PLAIN"] },
    );
    const seen = new Map(run.waits.map((w) => [w.step, w.timeoutSec]));
    expect(Object.fromEntries(seen)).toEqual({
      connect: 30,
      greeting: 300,
      ehlo: 300,
      starttls: 300,
      "tls-handshake": 300,
      auth: 300,
      mail: 300,
      rcpt: 300,
      data: 120,
      body: 180,
      dot: 600,
      rset: 20,
    });
    expect(statuses(run.outcome)).toEqual([["delivered"], ["delivered"]]);
  });

  it("uses configured timeouts over the defaults", () => {
    const run = runScripted({ timeouts: { dataDoneTimeoutSec: 5 } }, [envelope({ rcptTo: ["a@x.test"] })], {});
    expect(run.waits.find((w) => w.step === "dot")?.timeoutSec).toBe(5);
    expect(run.waits.find((w) => w.step === "mail")?.timeoutSec).toBe(DEFAULT_TIMEOUTS.mailTimeoutSec);
  });

  it.each([
    { name: "CR in heloName", input: { heloName: "a\r\nRSET" } },
    { name: "empty heloName", input: { heloName: "" } },
    { name: "zero timeout", input: { timeouts: { mailTimeoutSec: 0 } } },
    { name: "LF in password", input: { credentials: { username: "u", password: "p\nq" } } },
  ])("rejects a bad config: $name", ({ input }) => {
    expect(() => createSessionConfig({ heloName: "c.test", remoteHost: "mx", ...input })).toThrow(
      /heloName|timeout|credentials/,
    );
  });
});
