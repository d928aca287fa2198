/** RFC 3464 delivery status notifications (worker/mail/dsn.ts), parsed back with postal-mime. */
import PostalMime from "postal-mime";
import { describe, expect, it } from "vitest";
import { composeDsn, shouldBounce, type DsnInput, type DsnRecipient } from "../../../worker/mail/dsn";

const NOW = Date.UTC(2026, 10, 22, 12, 0, 0);
const ARRIVAL = Date.UTC(2026, 10, 22, 9, 30, 15);
const LAST = Date.UTC(2026, 10, 22, 11, 59, 58);
const ORIGINAL =
  "From: Ann <ann@acme.test>\r\nTo: bob@example.net\r\nSubject: Quarterly report\r\nMessage-ID: <orig-1@acme.test>\r\n\r\nbody is not included\r\n";

const bounced: DsnRecipient = {
  address: "bob@example.net",
  action: "failed",
  status: "5.1.1",
  remoteMta: "mx1.example.net",
  diagnostic: { code: 550, text: "5.1.1 <bob@example.net>: Recipient address rejected: User unknown" },
  lastAttemptMs: LAST,
};

function input(over: Partial<DsnInput> = {}): DsnInput {
  return {
    heloName: "relay.cohort.test",
    mailFrom: "ann@acme.test",
    envelopeId: "0a1b2c",
    arrivalMs: ARRIVAL,
    nowMs: NOW,
    token: "0a1b2c.3",
    recipients: [bounced],
    originalHeaders: ORIGINAL,
    ...over,
  };
}

/** The delivery-status part split into its field groups (per-message first), unfolded. */
function statusGroups(text: string): Record<string, string>[] {
  return text
    .replace(/\r\n/g, "\n")
    .replace(/\n[ \t]+/g, " ")
    .trim()
    .split(/\n\n/)
    .map((group) =>
      Object.fromEntries(
        group.split("\n").map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]),
      ),
    );
}

/** Raw MIME part `n` (1-based) of the DSN: its header block and body. */
function rawPart(raw: string, n: number): { headers: string; body: string } {
  const boundary = /boundary="([^"]+)"/.exec(raw)![1]!;
  const part = raw.split(`--${boundary}`)[n]!.replace(/^\r\n/, "");
  const cut = part.indexOf("\r\n\r\n");
  return { headers: part.slice(0, cut), body: part.slice(cut + 4).replace(/\r\n$/, "") };
}

async function parse(raw: string) {
  return PostalMime.parse(raw, { attachmentEncoding: "utf8" });
}

function expect7bitCrlf(raw: string): void {
  expect(/^[\x09\x0d\x0a\x20-\x7e]*$/.test(raw)).toBe(true);
  expect(raw.replace(/\r\n/g, "")).not.toMatch(/[\r\n]/);
  for (const line of raw.split("\r\n")) expect(line.length).toBeLessThanOrEqual(998);
}

describe("composeDsn: a failed recipient", () => {
  it("has the envelope headers of a bounce notice", async () => {
    const raw = composeDsn(input());
    expect7bitCrlf(raw);
    const mail = await parse(raw);
    expect(mail.from).toEqual({ name: "Mail Delivery System", address: "MAILER-DAEMON@relay.cohort.test" });
    expect(mail.to).toEqual([{ name: "", address: "ann@acme.test" }]);
    expect(mail.subject).toBe("Undelivered Mail Returned to Sender");
    expect(mail.messageId).toBe("<0a1b2c.3@relay.cohort.test>");
    expect(mail.date).toBe(new Date(NOW).toISOString());
    const headers = Object.fromEntries(mail.headers.map((h) => [h.key, h.value]));
    expect(headers["auto-submitted"]).toBe("auto-replied");
    expect(headers["mime-version"]).toBe("1.0");
    expect(headers["content-type"]).toMatch(/^multipart\/report; report-type=delivery-status;\s+boundary="[^"]+"$/);
  });

  it("has three parts: text for people, message/delivery-status, text/rfc822-headers", async () => {
    const raw = composeDsn(input());
    expect(rawPart(raw, 1).headers).toContain("Content-Type: text/plain; charset=utf-8");
    expect(rawPart(raw, 2).headers).toContain("Content-Type: message/delivery-status");
    expect(rawPart(raw, 3).headers).toContain("Content-Type: text/rfc822-headers");
    const mail = await parse(raw);
    expect(mail.text).toContain("could not be delivered");
    expect(mail.text).toContain(
      "<bob@example.net> (host mx1.example.net said: 550 5.1.1 <bob@example.net>: Recipient address rejected: User unknown)",
    );
    expect(mail.attachments.map((a) => a.mimeType)).toEqual(["message/delivery-status", "text/rfc822-headers"]);
    expect(String(mail.attachments[1]!.content).trimEnd()).toBe(ORIGINAL.split("\r\n\r\n")[0]!.replace(/\r\n/g, "\n"));
  });

  it("reports every per-message and per-recipient field", async () => {
    const raw = composeDsn(input());
    const mail = await parse(raw);
    const [msg, rcpt] = statusGroups(String(mail.attachments[0]!.content));
    expect(msg).toEqual({
      "reporting-mta": "dns; relay.cohort.test",
      "original-envelope-id": "0a1b2c",
      "arrival-date": "Sun, 22 Nov 2026 09:30:15 +0000",
    });
    expect(rcpt).toEqual({
      "final-recipient": "rfc822; bob@example.net",
      action: "failed",
      status: "5.1.1",
      "remote-mta": "dns; mx1.example.net",
      "diagnostic-code": "smtp; 550 5.1.1 <bob@example.net>: Recipient address rejected: User unknown",
      "last-attempt-date": "Sun, 22 Nov 2026 11:59:58 +0000",
    });
  });

  it("is deterministic, and a local reason without an SMTP reply is an X-Cohort diagnostic without Remote-MTA", async () => {
    const local: DsnRecipient = {
      address: "c@nx.test",
      action: "failed",
      status: "5.1.2",
      diagnostic: { text: "Host or domain name not found" },
      lastAttemptMs: LAST,
    };
    const raw = composeDsn(input({ recipients: [local] }));
    expect(composeDsn(input({ recipients: [local] }))).toBe(raw);
    const [, rcpt] = statusGroups(String((await parse(raw)).attachments[0]!.content));
    expect(rcpt).toEqual({
      "final-recipient": "rfc822; c@nx.test",
      action: "failed",
      status: "5.1.2",
      "diagnostic-code": "X-Cohort; Host or domain name not found",
      "last-attempt-date": "Sun, 22 Nov 2026 11:59:58 +0000",
    });
  });
});

describe("composeDsn: delayed and multiple recipients", () => {
  const delayed: DsnRecipient = {
    address: "carol@slow.example",
    action: "delayed",
    status: "4.4.1",
    remoteMta: null,
    diagnostic: { text: "connect to mx.slow.example[192.0.2.1]:25: Connection timed out" },
    lastAttemptMs: LAST,
    willRetryUntilMs: Date.UTC(2026, 10, 27, 9, 30, 15),
  };

  it("a delay warning has its own subject, Action delayed and Will-Retry-Until", async () => {
    const raw = composeDsn(input({ recipients: [delayed] }));
    expect7bitCrlf(raw);
    const mail = await parse(raw);
    expect(mail.subject).toBe("Delayed Mail (still being retried)");
    expect(mail.text).toContain("still being retried");
    expect(mail.text).toContain("It will be retried until Fri, 27 Nov 2026 09:30:15 +0000.");
    const [, rcpt] = statusGroups(String(mail.attachments[0]!.content));
    expect(rcpt).toMatchObject({
      action: "delayed",
      status: "4.4.1",
      "will-retry-until": "Fri, 27 Nov 2026 09:30:15 +0000",
      "diagnostic-code": "X-Cohort; connect to mx.slow.example[192.0.2.1]:25: Connection timed out",
    });
    expect(rcpt!["remote-mta"]).toBeUndefined();
  });

  it("several recipients each get their own block, in order; any failure makes it a bounce notice", async () => {
    const second: DsnRecipient = {
      ...bounced,
      address: "dave@example.net",
      originalRecipient: "Dave@Example.net",
      status: "5.2.2",
      diagnostic: { code: 552, text: "5.2.2 Mailbox full" },
    };
    const raw = composeDsn(input({ recipients: [bounced, second, delayed] }));
    const mail = await parse(raw);
    expect(mail.subject).toBe("Undelivered Mail Returned to Sender");
    const groups = statusGroups(String(mail.attachments[0]!.content));
    expect(groups).toHaveLength(4);
    expect(groups.slice(1).map((g) => [g["final-recipient"], g.action, g.status])).toEqual([
      ["rfc822; bob@example.net", "failed", "5.1.1"],
      ["rfc822; dave@example.net", "failed", "5.2.2"],
      ["rfc822; carol@slow.example", "delayed", "4.4.1"],
    ]);
    expect(groups[2]!["original-recipient"]).toBe("rfc822; Dave@Example.net");
    for (const a of ["bob@example.net", "dave@example.net", "carol@slow.example"])
      expect(mail.text).toContain(`<${a}>`);
  });

  it("a long diagnostic is folded under 78 columns and unfolds to the same text", async () => {
    const text = `5.7.1 ${"policy ".repeat(40)}end`;
    const raw = composeDsn(input({ recipients: [{ ...bounced, status: "5.7.1", diagnostic: { code: 554, text } }] }));
    expect(
      rawPart(raw, 2)
        .body.split("\r\n")
        .every((l) => l.length <= 78),
    ).toBe(true);
    const [, rcpt] = statusGroups(String((await parse(raw)).attachments[0]!.content));
    expect(rcpt!["diagnostic-code"]).toBe(`smtp; 554 ${text}`);
  });
});

describe("composeDsn: Unicode input stays 7-bit", () => {
  it("encodes a Unicode recipient (utf-8 address type), sender domain (punycode), diagnostic and original headers", async () => {
    const headers = "From: Zoë <zoe@bücher.example>\r\nSubject: Grüße aus Köln\r\nX-Note: 日本語\r\n";
    const rcpt: DsnRecipient = {
      address: "jörg@bücher.example",
      action: "failed",
      status: "5.1.1",
      remoteMta: "mx.xn--bcher-kva.example",
      diagnostic: { code: 550, text: "5.1.1 unbekannter Empfänger «jörg»" },
      lastAttemptMs: LAST,
    };
    const raw = composeDsn(
      input({ mailFrom: "zoe@bücher.example", recipients: [rcpt], originalHeaders: headers, token: "tök/1" }),
    );
    expect7bitCrlf(raw);
    const mail = await parse(raw);
    expect(mail.to).toEqual([{ name: "", address: "zoe@xn--bcher-kva.example" }]);
    expect(mail.messageId).toBe("<t_k/1@relay.cohort.test>");
    // The human-readable part is quoted-printable UTF-8 and decodes to the original text.
    expect(mail.text).toContain(
      "<jörg@bücher.example> (host mx.xn--bcher-kva.example said: 550 5.1.1 unbekannter Empfänger «jörg»)",
    );
    const [, fields] = statusGroups(String(mail.attachments[0]!.content));
    expect(fields!["final-recipient"]).toBe("utf-8; j\\x{F6}rg@b\\x{FC}cher.example");
    expect(fields!["diagnostic-code"]).toBe("smtp; 550 5.1.1 unbekannter Empf\\x{E4}nger \\x{AB}j\\x{F6}rg\\x{BB}");
    // The original headers come back byte for byte (quoted-printable in transit).
    expect(rawPart(raw, 3).headers).toContain("Content-Transfer-Encoding: quoted-printable");
    expect(String(mail.attachments[1]!.content).trimEnd()).toBe(headers.replace(/\r\n$/, "").replace(/\r\n/g, "\n"));
  });

  it("refuses a sender whose local part is not ASCII (no 7-bit DSN can reach it)", () => {
    expect(() => composeDsn(input({ mailFrom: "jörg@example.net" }))).toThrow(RangeError);
  });
});

describe("composeDsn: caller bugs", () => {
  it("throws RangeError for no recipients, a status that does not fit the action, a bad heloName, a bounce sender", () => {
    expect(() => composeDsn(input({ recipients: [] }))).toThrow(/no recipients/);
    expect(() => composeDsn(input({ recipients: [{ ...bounced, status: "4.1.1" }] }))).toThrow(/does not fit/);
    expect(() => composeDsn(input({ recipients: [{ ...bounced, action: "delayed" }] }))).toThrow(/does not fit/);
    expect(() => composeDsn(input({ recipients: [{ ...bounced, status: "5.1" }] }))).toThrow(/does not fit/);
    expect(() => composeDsn(input({ heloName: "bad name" }))).toThrow(/heloName/);
    expect(() => composeDsn(input({ mailFrom: "" }))).toThrow(/never bounce a bounce/);
  });
});

describe("shouldBounce", () => {
  it.each([
    ["", false],
    ["<>", false],
    [" <> ", false],
    ["MAILER-DAEMON@relay.test", false],
    ["mailer-daemon@x.test", false],
    ["<Mailer-Daemon@x.test>", false],
    ["ann@acme.test", true],
    ["<ann@acme.test>", true],
    ["daemon@x.test", true],
    ["mailer-daemon-fan@x.test", true],
  ])("%j → %s", (from, want) => expect(shouldBounce(from)).toBe(want));
});
