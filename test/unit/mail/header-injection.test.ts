import { describe, expect, it } from "vitest";
import { compose, type SendRequest } from "../../../worker/mail/compose";
import { isMailInputError } from "../../../worker/mail/errors";

const NOW = new Date(Date.UTC(2026, 0, 2, 3, 4, 5));
const base: SendRequest = { from: "Acme <no-reply@acme.com>", to: "a@x.com", subject: "Hi", text: "body" };
const png = Buffer.from("png").toString("base64");

/** Each row puts `bad` into one header-bearing field and names the field the error must report. */
const fields: { name: string; field: string; with: (bad: string) => Partial<SendRequest> }[] = [
  { name: "from display name", field: "from", with: (b) => ({ from: `Acme${b}Bcc: x@evil.com <no-reply@acme.com>` }) },
  { name: "from address", field: "from", with: (b) => ({ from: `no-reply@acme.com${b}Bcc: x@evil.com` }) },
  { name: "to as a string", field: "to", with: (b) => ({ to: `a@x.com${b}Bcc: x@evil.com` }) },
  { name: "to as an array", field: "to[1]", with: (b) => ({ to: ["a@x.com", `B${b}cc <b@x.com>`] }) },
  { name: "cc", field: "cc", with: (b) => ({ cc: `c@x.com${b}` }) },
  { name: "cc as an array", field: "cc[0]", with: (b) => ({ cc: [`${b}c@x.com`] }) },
  { name: "bcc", field: "bcc[0]", with: (b) => ({ bcc: [`d@x.com${b}X: y`] }) },
  { name: "reply_to as a string", field: "reply_to", with: (b) => ({ reply_to: `r${b}@x.com` }) },
  { name: "reply_to as an array", field: "reply_to[0]", with: (b) => ({ reply_to: [`R ${b} <r@x.com>`] }) },
  { name: "subject", field: "subject", with: (b) => ({ subject: `Hello${b}Bcc: x@evil.com` }) },
  {
    name: "custom header value",
    field: "headers.X-Ref",
    with: (b) => ({ headers: { "X-Ref": `1${b}Bcc: x@evil.com` } }),
  },
  { name: "custom header name", field: "headers", with: (b) => ({ headers: { [`X-Ref${b}Bcc`]: "x@evil.com" } }) },
  {
    name: "attachment filename",
    field: "attachments[0].filename",
    with: (b) => ({ attachments: [{ content: png, filename: `a.png${b}Content-Type: text/html` }] }),
  },
  {
    name: "attachment content_type",
    field: "attachments[1].content_type",
    with: (b) => ({
      attachments: [{ content: png }, { content: png, filename: "a.png", content_type: `image/png${b}X: y` }],
    }),
  },
  {
    name: "attachment content_id",
    field: "attachments[0].content_id",
    with: (b) => ({
      html: "<img src=cid:a>",
      attachments: [{ content: png, filename: "a.png", content_id: `a${b}X: y` }],
    }),
  },
];

const breaks = [
  { label: "CR", bad: "\r" },
  { label: "LF", bad: "\n" },
  { label: "CRLF", bad: "\r\n" },
  { label: "NUL", bad: "\0" },
];

const rows = fields.flatMap((f) => breaks.map((b) => ({ ...f, ...b })));

function composeError(input: SendRequest): unknown {
  try {
    compose(input, { now: NOW, messageId: "m1" });
  } catch (e) {
    return e;
  }
  return undefined;
}

describe("header injection", () => {
  it.each(rows)("rejects $label in the $name with a 422 naming $field", ({ field, bad, with: patch }) => {
    const err = composeError({ ...base, ...patch(bad) });
    expect(isMailInputError(err), `got ${String(err)}`).toBe(true);
    if (!isMailInputError(err)) return;
    expect(err.status).toBe(422);
    expect(err.field).toBe(field);
    expect(err.message).toContain(`\`${field}\``);
    expect(err.message).toMatch(/CR, LF or NUL/);
    const wantName =
      field === "from"
        ? "invalid_from_address"
        : field.startsWith("attachments")
          ? "invalid_attachment"
          : "validation_error";
    expect(err.errorName).toBe(wantName);
  });

  it("never lets a line break in the html or text body reach the headers", () => {
    const { raw } = compose(
      { ...base, text: "x\r\nBcc: evil@x.com\r\n\r\n", html: "\r\nBcc: y@x.com" },
      { now: NOW, messageId: "m1" },
    );
    const head = raw.slice(0, raw.indexOf("\r\n\r\n"));
    expect(head).not.toMatch(/bcc/i);
  });
});
