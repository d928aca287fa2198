import { describe, expect, it } from "vitest";
import { ArfError, emailIdOf, readArf } from "../../../worker/mail/arf";

const report = (fields: string) => ({ mimeType: "message/feedback-report", text: fields });
const headers = (text: string) => ({ mimeType: "text/rfc822-headers", text });

describe("readArf (RFC 5965)", () => {
  it("reads the Feedback-Type, the Original-Rcpt-To and the original's Message-ID", () => {
    const got = readArf([
      { mimeType: "text/plain", text: "This is an abuse report." },
      report(
        "Feedback-Type: Abuse\nUser-Agent: FBL/1.0\nVersion: 1\nOriginal-Rcpt-To: <fay@sink.test>\nOriginal-Rcpt-To: gus@sink.test\n",
      ),
      headers(
        "From: <no-reply@acme.test>\nTo: <fay@sink.test>\nMessage-ID:\n <abc@acme.test>\nSubject: Hi\n\nbody: ignored\n",
      ),
    ]);
    expect(got).toEqual({
      feedbackType: "abuse",
      recipients: ["fay@sink.test", "gus@sink.test"],
      messageId: "<abc@acme.test>",
    });
  });

  it("falls back to the original's single To, and to abuse when there is no Feedback-Type", () => {
    const got = readArf([
      report("Version: 1\r\n"),
      { mimeType: "message/rfc822", text: "To: Fay <fay@sink.test>\r\nMessage-Id: <x1@acme.test>\r\n\r\nhello" },
    ]);
    expect(got).toEqual({ feedbackType: "abuse", recipients: ["fay@sink.test"], messageId: "<x1@acme.test>" });
  });

  it.each([
    { name: "no feedback-report part", parts: [headers("Message-ID: <a@b>\n")], code: "not_arf" },
    {
      name: "no original part",
      parts: [report("Feedback-Type: abuse\nOriginal-Rcpt-To: a@b.test\n")],
      code: "no_original",
    },
    {
      name: "no recipient and two To addresses",
      parts: [report("Feedback-Type: abuse\n"), headers("To: a@b.test, c@d.test\nMessage-ID: <m@x.test>\n")],
      code: "no_recipient",
    },
  ])("refuses a report with $name ($code)", ({ parts, code }) => {
    let err: unknown = null;
    try {
      readArf(parts);
    } catch (e) {
      err = e;
    }
    expect((err as ArfError).isArfError).toBe(true);
    expect((err as ArfError).code).toBe(code);
  });
});

describe("emailIdOf", () => {
  const isId = (s: string) => /^[0-9a-f]{32}$/.test(s);
  it.each([
    { messageId: `<${"a".repeat(32)}@acme.test>`, want: "a".repeat(32) },
    { messageId: " <0123456789abcdef0123456789abcdef@x> ", want: "0123456789abcdef0123456789abcdef" },
    { messageId: "<custom-id@acme.test>", want: null },
    { messageId: "no brackets@acme.test", want: null },
  ])("$messageId → $want", ({ messageId, want }) => {
    expect(emailIdOf(messageId, isId)).toBe(want);
  });
});
