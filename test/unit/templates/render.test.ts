import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  checkContent,
  checkValues,
  escapeHtml,
  renderContent,
  usedVariables,
  type TemplateContent,
} from "../../../worker/templates/core/render";

const base = (over: Partial<TemplateContent> = {}): TemplateContent => ({
  subject: null,
  html: "",
  text: null,
  from: null,
  reply_to: null,
  variables: [],
  ...over,
});

describe("template rendering", () => {
  it("replaces Resend's {{{KEY}}} and {{KEY}} uses, escaping values in html only", () => {
    const c = base({
      subject: "Hi {{{NAME}}}",
      html: "<p>{{{NAME}}} owes {{ PRICE }}</p>",
      text: "{{NAME}}: {{{PRICE}}}",
      variables: [
        { key: "NAME", type: "string", fallback_value: null },
        { key: "PRICE", type: "number", fallback_value: 25 },
      ],
    });
    expect(renderContent(c, { NAME: "Tom & <Jerry>" })).toEqual({
      subject: "Hi Tom & <Jerry>",
      html: "<p>Tom &amp; &lt;Jerry&gt; owes 25</p>",
      text: "Tom & <Jerry>: 25",
    });
  });

  it("inserts a use marked raw with & as it is, in html too", () => {
    const c = base({
      html: "<p>{{{&LINK}}} {{LINK}}</p>",
      variables: [{ key: "LINK", type: "string", fallback_value: null }],
    });
    expect(renderContent(c, { LINK: '<a href="x">go</a>' }).html).toBe(
      '<p><a href="x">go</a> &lt;a href=&quot;x&quot;&gt;go&lt;/a&gt;</p>',
    );
  });

  it("never lets a value's markup through unescaped: the rendered html has no < from a value", () => {
    fc.assert(
      fc.property(fc.string(), (value) => {
        const out = renderContent(
          base({ html: "<i>{{{V}}}</i>", variables: [{ key: "V", type: "string", fallback_value: null }] }),
          { V: value },
        ).html;
        expect(out).toBe(`<i>${escapeHtml(value)}</i>`);
        expect(out.slice(3, -4)).not.toMatch(/[<>"']/);
      }),
    );
  });

  it("leaves what is not a well-formed use as written", () => {
    expect(renderContent(base({ html: "{{ a b }} {{}} {{{1X}}}" }), {}).html).toBe("{{ a b }} {{}} {{{1X}}}");
    expect(usedVariables(base({ html: "{{ a b }} {{{ X }}} {{Y}} {{X}}", subject: "{{{Z}}}" }))).toEqual([
      "Z",
      "X",
      "Y",
    ]);
  });

  it("finds a used but undeclared, reserved, duplicated or mistyped variable", () => {
    expect(checkContent(base({ html: "{{{A}}}" }))[0]?.message).toMatch(/`A` is used in the template but not defined/);
    expect(
      checkContent(base({ variables: [{ key: "UNSUBSCRIBE_URL", type: "string", fallback_value: null }] }))[0]?.message,
    ).toMatch(/reserved/);
    expect(
      checkContent(
        base({
          variables: [
            { key: "A", type: "string", fallback_value: null },
            { key: "A", type: "string", fallback_value: null },
          ],
        }),
      )[0]?.message,
    ).toMatch(/twice/);
    expect(checkContent(base({ variables: [{ key: "N", type: "number", fallback_value: "x" }] }))[0]?.message).toMatch(
      /must be a number/,
    );
    expect(
      checkContent(
        base({
          variables: Array.from({ length: 51 }, (_, i) => ({
            key: `K${i}`,
            type: "string" as const,
            fallback_value: null,
          })),
        }),
      )[0]?.message,
    ).toMatch(/at most 50/);
    expect(
      checkContent(base({ html: "{{{A}}}", variables: [{ key: "A", type: "string", fallback_value: null }] })),
    ).toEqual([]);
  });

  it("names a required variable a send leaves out, and refuses undeclared keys and non-numbers", () => {
    const vars = [
      { key: "CODE", type: "string" as const, fallback_value: null },
      { key: "N", type: "number" as const, fallback_value: 1 },
    ];
    expect(checkValues(vars, {}, "t")).toEqual([
      { kind: "missing", message: "Missing required variable `CODE` for template t." },
    ]);
    expect(checkValues(vars, { CODE: "x", N: "12.5" }, "t")).toEqual([]);
    expect(checkValues(vars, { CODE: "x", N: "lots" }, "t")[0]?.message).toMatch(/`N`/);
    expect(checkValues(vars, { CODE: "x", EXTRA: 1 }, "t")[0]?.message).toMatch(/`EXTRA` is not declared/);
  });
});
