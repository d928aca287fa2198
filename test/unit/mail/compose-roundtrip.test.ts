import fc from "fast-check";
import PostalMime, { decodeWords } from "postal-mime";
import { describe, expect, it } from "vitest";
import { compose, type SendRequest } from "../../../worker/mail/compose";
import { address, attachment, body, customHeaders, mailbox, unicodeText, longText } from "./arbitraries";

const NOW = new Date(Date.UTC(2026, 7, 5, 11, 52, 1));
const lf = (s: string) => s.replace(/\r\n|\r/g, "\n");

/** postal-mime appends a newline after the last quoted-printable line, so accept one extra "\n". */
function expectBody(got: string | undefined, want: string): void {
  expect([lf(want), lf(want) + "\n"]).toContain(lf(got ?? ""));
}

const request = fc.record({
  from: mailbox,
  to: fc.array(mailbox, { minLength: 1, maxLength: 3 }),
  cc: fc.array(mailbox, { maxLength: 2 }),
  bcc: fc.array(address, { maxLength: 2 }),
  replyTo: fc.array(mailbox, { maxLength: 2 }),
  subject: fc.oneof(unicodeText(200), longText),
  text: fc.option(body, { nil: undefined }),
  html: fc.option(
    body.map((b) => `<p>${b}</p>`),
    { nil: undefined },
  ),
  headers: customHeaders,
  attachments: fc.uniqueArray(attachment, { maxLength: 3, selector: (a) => a.filename }),
  seed: fc.uuid(),
});

describe("compose round trip through postal-mime", () => {
  it("preserves every field, attachment byte and custom header, with no line over 998 octets", async () => {
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        const input: SendRequest = {
          from: r.from.raw,
          to: r.to.map((m) => m.raw),
          cc: r.cc.map((m) => m.raw),
          bcc: r.bcc,
          reply_to: r.replyTo.map((m) => m.raw),
          subject: r.subject,
          text: r.text,
          html: r.html,
          headers: r.headers,
          attachments: r.attachments.map((a) => ({
            content: Buffer.from(a.bytes).toString("base64"),
            filename: a.filename,
            content_type: a.contentType,
            content_id: a.contentId,
          })),
        };
        const { raw, envelope } = compose(input, { now: NOW, messageId: r.seed });

        expect(raw).toMatch(/^[\x00-\x7f]*$/);
        expect(raw.endsWith("\r\n")).toBe(true);
        expect(raw.replace(/\r\n/g, "")).not.toMatch(/[\r\n]/);
        expect(raw.split("\r\n").filter((l) => l.length > 998)).toEqual([]);
        expect(raw).not.toMatch(/^bcc:/im);
        for (const b of r.bcc) {
          if (![...r.to, ...r.cc, ...r.replyTo, r.from].some((m) => m.address === b)) expect(raw).not.toContain(b);
          expect(envelope.rcptTo).toContain(b);
        }

        const p = await PostalMime.parse(raw);
        expect(p.subject ?? "").toBe(r.subject);
        expect(p.from).toEqual({ name: r.from.name, address: r.from.address });
        const asList = (ms: { name: string; address: string }[]) =>
          ms.map((m) => ({ name: m.name, address: m.address }));
        expect(p.to ?? []).toEqual(asList(r.to));
        expect(p.cc ?? []).toEqual(asList(r.cc));
        expect(p.replyTo ?? []).toEqual(asList(r.replyTo));
        expect(p.bcc).toBeUndefined();

        if (r.text !== undefined || r.html === undefined) expectBody(p.text, r.text ?? "");
        if (r.html !== undefined) expectBody(p.html, r.html);

        for (const [name, value] of Object.entries(r.headers)) {
          const got = p.headers.filter((h) => h.key === name.toLowerCase());
          expect(got).toHaveLength(1);
          expect(decodeWords(got[0]!.value)).toBe(value);
        }

        expect(p.attachments).toHaveLength(r.attachments.length);
        for (const a of r.attachments) {
          const got = p.attachments.find((x) => x.filename === a.filename);
          expect(got, `attachment ${JSON.stringify(a.filename)}`).toBeDefined();
          expect(got!.mimeType).toBe(a.contentType);
          expect(got!.contentId).toBe(a.contentId === undefined ? undefined : `<${a.contentId}>`);
          expect(got!.disposition).toBe(a.contentId !== undefined && r.html !== undefined ? "inline" : "attachment");
          expect(new Uint8Array(got!.content as ArrayBuffer)).toEqual(a.bytes);
        }
      }),
      { numRuns: Number(process.env.MAIL_FC_RUNS ?? 250) },
    );
  }, 120_000);
});
