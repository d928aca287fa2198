import { describe, expect, it } from "vitest";
import { canonBodyRelaxed, canonHeaderRelaxed, selectHeaders, splitMessage } from "../../../worker/mail/dkim-canon";

describe("relaxed canonicalisation", () => {
  // RFC 6376 §3.4.6, example 1 (relaxed/relaxed).
  const example = "A: X\r\nB : Y\t\r\n\tZ  \r\n\r\n C \r\nD \t E\r\n\r\n\r\n";

  it("canonicalises the RFC 6376 example headers", () => {
    const { fields } = splitMessage(example);
    expect(fields.map((f) => canonHeaderRelaxed(f.raw))).toEqual(["a:X", "b:Y Z"]);
  });

  it("canonicalises the RFC 6376 example body", () => {
    expect(canonBodyRelaxed(splitMessage(example).body)).toBe(" C\r\nD E\r\n");
  });

  it.each([
    { name: "an empty body", body: "", want: "" },
    { name: "only blank lines", body: "\r\n\r\n  \r\n", want: "" },
    { name: "no final CRLF", body: "x", want: "x\r\n" },
    { name: "trailing whitespace lines", body: "a\r\n \t\r\n", want: "a\r\n" },
  ])("canonicalises $name", ({ body, want }) => {
    expect(canonBodyRelaxed(body)).toBe(want);
  });

  it("treats a message without a body as header-only", () => {
    expect(splitMessage("A: 1\r\nB: 2")).toEqual({
      fields: [
        { key: "a", raw: "A: 1" },
        { key: "b", raw: "B: 2" },
      ],
      body: "",
    });
  });
});

describe("selectHeaders", () => {
  const { fields } = splitMessage("Received: r1\r\nTo: t1\r\nFrom: f\r\nTo: t2\r\nX-Other: o\r\n\r\n");

  it("lists present headers bottom-up per name and oversigns From and To", () => {
    const { h, selected } = selectHeaders(fields, ["from", "to", "subject", "x-other"], true);
    expect(h).toEqual(["from", "from", "to", "to", "to", "x-other"]);
    expect(selected.map((f) => f.raw)).toEqual(["From: f", "To: t2", "To: t1", "X-Other: o"]);
  });

  it("does not oversign when disabled", () => {
    expect(selectHeaders(fields, ["From"], false).h).toEqual(["from"]);
  });
});
