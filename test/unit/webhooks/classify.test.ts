import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  BOUNCE_RULES,
  classifyBounce,
  effectiveEnhancedCode,
  type BounceCategory,
  type SmtpResult,
} from "../../../worker/webhooks/core/classify";

interface Row {
  name: string;
  code: number | null;
  enhanced: string | null;
  text: string;
  want: BounceCategory;
}

// Example responses written for these tests in the style of the big providers' replies.
const ROWS: Row[] = [
  {
    name: "Gmail unknown account (multiline, enhanced code only in the text)",
    code: 550,
    enhanced: null,
    text:
      "550-5.1.1 The email account that you tried to reach does not exist. Please try\n" +
      "550-5.1.1 double-checking the recipient's email address for typos or\n550 5.1.1 " +
      "unnecessary spaces. For more information, go to the help page. x12-20020a.123 - gsmtp",
    want: "invalid_recipient",
  },
  {
    name: "Gmail disabled account",
    code: 550,
    enhanced: "5.2.1",
    text: "The email account that you tried to reach is disabled. z9si123 - gsmtp",
    want: "invalid_recipient",
  },
  {
    name: "Outlook block list S3150",
    code: 550,
    enhanced: "5.7.1",
    text:
      "Unfortunately, messages from [203.0.113.9] weren't sent. Please contact your Internet " +
      "service provider since part of their network is on our block list (S3150). You can also " +
      "refer your provider to http://mail.live.com/mail/troubleshooting.aspx#errors.",
    want: "spam_block",
  },
  {
    name: "Yahoo TSS04 complaint deferral",
    code: 421,
    enhanced: "4.7.0",
    text: "[TSS04] Messages from 198.51.100.7 temporarily deferred due to user complaints - 4.16.55.1; see https://postmaster.example/421-ts01",
    want: "rate_limited",
  },
  { name: "mailbox full 552 5.2.2", code: 552, enhanced: "5.2.2", text: "5.2.2 mailbox full", want: "mailbox_full" },
  {
    name: "Gmail over quota (452 4.2.2)",
    code: 452,
    enhanced: "4.2.2",
    text: "The recipient's inbox is out of storage space. Please direct the recipient to the help page.",
    want: "mailbox_full",
  },
  {
    name: "over quota by text only",
    code: 550,
    enhanced: null,
    text: "Requested action not taken: user over quota",
    want: "mailbox_full",
  },
  {
    name: "Gmail DMARC 5.7.26",
    code: 550,
    enhanced: "5.7.26",
    text: "Unauthenticated email from example.org is not accepted due to domain's DMARC policy. Please contact the administrator of example.org domain.",
    want: "auth_failure",
  },
  {
    name: "DMARC by text on a plain 554",
    code: 554,
    enhanced: null,
    text: "554 5.7.5 Message rejected: DMARC policy violation",
    want: "auth_failure",
  },
  {
    name: "SPF fail 5.7.23",
    code: 550,
    enhanced: "5.7.23",
    text: "The message was rejected because of Sender Policy Framework violation",
    want: "auth_failure",
  },
  {
    name: "null MX 556 5.1.10",
    code: 556,
    enhanced: "5.1.10",
    text: "Recipient address has null MX",
    want: "bad_domain",
  },
  {
    name: "local null MX without enhanced code in text",
    code: 556,
    enhanced: null,
    text: "Domain example.net does not accept mail (null MX)",
    want: "bad_domain",
  },
  {
    name: "bad destination domain 5.1.2",
    code: 550,
    enhanced: "5.1.2",
    text: "Bad destination system address",
    want: "bad_domain",
  },
  { name: "host not found 5.4.4", code: 550, enhanced: "5.4.4", text: "550 5.4.4 host not found", want: "dns_failure" },
  {
    name: "local DNS timeout",
    code: 451,
    enhanced: "4.4.3",
    text: "DNS lookup for mx.example.net failed: SERVFAIL",
    want: "dns_failure",
  },
  {
    name: "message too large 552 5.3.4",
    code: 552,
    enhanced: "5.3.4",
    text: "Message size exceeds fixed maximum message size",
    want: "message_too_large",
  },
  {
    name: "Gmail message too large 5.2.3",
    code: 552,
    enhanced: "5.2.3",
    text: "Your message exceeded Google's message size limits.",
    want: "message_too_large",
  },
  {
    name: "local connect timeout",
    code: null,
    enhanced: "4.4.1",
    text: "connect to mx1.example.net[192.0.2.10]:25: Connection timed out",
    want: "timeout",
  },
  {
    name: "local read timeout without codes",
    code: null,
    enhanced: null,
    text: "timeout waiting for the reply to DATA",
    want: "timeout",
  },
  {
    name: "queue expiry 4.4.7",
    code: null,
    enhanced: "4.4.7",
    text: "delivery time expired after 5 days",
    want: "expired",
  },
  {
    name: "expiry by text",
    code: null,
    enhanced: null,
    text: "message expired: too long in the queue",
    want: "expired",
  },
  {
    name: "Gmail unsolicited-rate 4.7.28",
    code: 421,
    enhanced: "4.7.28",
    text: "Our system has detected an unusual rate of unsolicited mail originating from your IP address.",
    want: "rate_limited",
  },
  {
    name: "too many connections",
    code: 421,
    enhanced: null,
    text: "421 Too many concurrent SMTP connections from this IP; please try again later",
    want: "rate_limited",
  },
  {
    name: "Spamhaus listing",
    code: 554,
    enhanced: "5.7.1",
    text: "Service unavailable; Client host [192.0.2.1] blocked using zen.spamhaus.org",
    want: "spam_block",
  },
  {
    name: "content judged spam",
    code: 550,
    enhanced: "5.7.1",
    text: "Message rejected as spam by Content Filtering",
    want: "spam_block",
  },
  { name: "relay denied", code: 554, enhanced: "5.7.1", text: "Relay access denied", want: "policy" },
  { name: "generic 5.7.x", code: 550, enhanced: "5.7.0", text: "Message refused", want: "policy" },
  {
    name: "user unknown without enhanced code",
    code: 550,
    enhanced: null,
    text: "No such user here",
    want: "invalid_recipient",
  },
  {
    name: "Outlook recipient not found",
    code: 550,
    enhanced: "5.5.0",
    text: "Requested action not taken: mailbox unavailable",
    want: "invalid_recipient",
  },
  {
    name: "Outlook directory-based edge block (5.4.1)",
    code: 550,
    enhanced: "5.4.1",
    text:
      "Recipient address rejected: Access denied. For more information see " +
      "https://aka.example/EXOSmtpErrors [AM0EUR02FT001.eop-EUR02.prod.protection.example.com]",
    want: "invalid_recipient",
  },
  {
    name: "Gmail rate limited by text",
    code: 421,
    enhanced: "4.7.0",
    text: "This message from 192.0.2.44 has been temporarily rate limited. gsmtp",
    want: "rate_limited",
  },
  {
    name: "policy reasons 5.7.9",
    code: 554,
    enhanced: "5.7.9",
    text: "Message not accepted for policy reasons.",
    want: "policy",
  },
  {
    name: "local policy with a provider tag",
    code: 554,
    enhanced: "5.7.1",
    text: "[CS01] Message rejected due to local policy.",
    want: "policy",
  },
  { name: "greylisting", code: 451, enhanced: "4.7.1", text: "Greylisted, please come back later", want: "transient" },
  {
    name: "plain 450 without enhanced code",
    code: 450,
    enhanced: null,
    text: "Requested mail action not taken",
    want: "transient",
  },
  { name: "unrecognised permanent failure", code: 554, enhanced: "5.0.0", text: "Transaction failed", want: "unknown" },
  { name: "nothing at all", code: null, enhanced: null, text: "", want: "unknown" },
];

describe("classifyBounce: realistic provider responses", () => {
  it.each(ROWS)("$name → $want", (row) => {
    const got = classifyBounce({ smtpCode: row.code, enhancedCode: row.enhanced, response: row.text });
    expect(got.category, `got ${got.category} (rule ${got.rule}), want ${row.want}`).toBe(row.want);
  });
});

describe("classifyBounce: table shape", () => {
  it("names every rule uniquely", () => {
    const names = BOUNCE_RULES.map((r) => r.name);
    expect(new Set(names).size).toBe(names.length);
  });

  it("gives every rule at least one pattern", () => {
    for (const rule of BOUNCE_RULES) expect(rule.code ?? rule.enhanced ?? rule.text, rule.name).toBeDefined();
  });

  it("applies the first matching rule when two match", () => {
    const rules = [
      { name: "a", category: "policy" as const, code: /^5/ },
      { name: "b", category: "spam_block" as const, code: /^55/ },
    ];
    expect(classifyBounce({ smtpCode: 550, enhancedCode: null, response: "" }, rules)).toEqual({
      category: "policy",
      rule: "a",
    });
  });

  it("reports the matching rule name", () => {
    expect(classifyBounce({ smtpCode: 556, enhancedCode: "5.1.10", response: "" }).rule).toBe("null-mx");
  });
});

describe("effectiveEnhancedCode", () => {
  it.each([
    { name: "given code wins", input: { smtpCode: 550, enhancedCode: "5.1.1", response: "5.2.2 full" }, want: "5.1.1" },
    {
      name: "from a multiline text",
      input: { smtpCode: 550, enhancedCode: null, response: "550-5.1.1 no" },
      want: "5.1.1",
    },
    { name: "from a bare text", input: { smtpCode: 452, enhancedCode: null, response: "4.2.2 quota" }, want: "4.2.2" },
    { name: "none", input: { smtpCode: 550, enhancedCode: null, response: "version 1.2.3a" }, want: null },
  ])("$name", ({ input, want }) => {
    expect(effectiveEnhancedCode(input as SmtpResult)).toBe(want);
  });
});

describe("classifyBounce: properties", () => {
  it("is total and deterministic for arbitrary input", () => {
    fc.assert(
      fc.property(
        fc.option(fc.integer({ min: 200, max: 599 })),
        fc.option(fc.string()),
        fc.string(),
        (code, enh, text) => {
          const input = { smtpCode: code, enhancedCode: enh, response: text };
          const a = classifyBounce(input);
          expect(a).toEqual(classifyBounce(input));
          expect(typeof a.category).toBe("string");
        },
      ),
    );
  });

  it("never calls a 4xx result with no text unknown", () => {
    fc.assert(
      fc.property(fc.integer({ min: 400, max: 499 }), (code) => {
        expect(classifyBounce({ smtpCode: code, enhancedCode: null, response: "" }).category).not.toBe("unknown");
      }),
    );
  });
});
