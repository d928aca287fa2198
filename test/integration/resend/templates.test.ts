/**
 * Resend's /templates and sends that name one (POST /emails, /emails/batch `template`): the
 * published version is rendered once at accept, HTML-escaped, and the rendered message is what
 * is stored.
 */
import { describe, expect, it } from "vitest";
import { callWithKey, getEmail, newKey } from "../helpers";

type Json = Record<string, unknown>;
const json = async (r: Response) => (await r.json()) as Json;

async function template(key: string, body: Json): Promise<string> {
  const res = await callWithKey(key, "POST", "/templates", body);
  expect(res.status).toBe(201);
  return (await json(res)).id as string;
}

describe("templates", () => {
  it("keep a draft and a published version, and a send renders the published one", async () => {
    const key = await newKey("tpl-a");
    const id = await template(key, {
      name: "order-confirmation",
      alias: "order",
      from: "Store <store@acme.test>",
      subject: "Order for {{{NAME}}}",
      html: "<p>Name: {{{PRODUCT}}}</p><p>Total: {{{PRICE}}}</p>",
      text: "Total {{PRICE}} for {{{PRODUCT}}}",
      variables: [
        { key: "PRODUCT", type: "string", fallback_value: "item" },
        { key: "PRICE", type: "number", fallback_value: 25 },
        { key: "NAME", type: "string" },
      ],
    });
    expect(await json(await callWithKey(key, "GET", `/templates/${id}`))).toMatchObject({
      object: "template",
      id,
      status: "draft",
      alias: "order",
      has_unpublished_versions: true,
      published_at: null,
    });
    // A draft never sends.
    const early = await callWithKey(key, "POST", "/emails", {
      to: "ann@example.com",
      template: { id: "order", variables: { NAME: "Ann" } },
    });
    expect(early.status).toBe(422);
    expect((await json(early)).message).toMatch(/no published version/);

    expect(await json(await callWithKey(key, "POST", `/templates/${id}/publish`))).toEqual({ id, object: "template" });
    const sent = await callWithKey(key, "POST", "/emails", {
      to: "ann@example.com",
      template: { id: "order", variables: { NAME: "Ann <3", PRODUCT: "<b>Mac</b>" } },
    });
    expect(sent.status).toBe(200);
    const { body } = await getEmail(key, (await json(sent)).id as string);
    expect(body).toMatchObject({
      from: "Store <store@acme.test>",
      subject: "Order for Ann <3",
      html: "<p>Name: &lt;b&gt;Mac&lt;/b&gt;</p><p>Total: 25</p>",
      text: "Total 25 for <b>Mac</b>",
    });

    // A new draft leaves the published version sending until it is published in turn.
    expect((await callWithKey(key, "PATCH", `/templates/${id}`, { html: "<p>v2 {{{PRODUCT}}}</p>" })).status).toBe(200);
    expect(await json(await callWithKey(key, "GET", `/templates/order`))).toMatchObject({
      status: "published",
      html: "<p>v2 {{{PRODUCT}}}</p>",
      has_unpublished_versions: true,
    });
    const again = await json(
      await callWithKey(key, "POST", "/emails", { to: "ann@example.com", template: { id, variables: { NAME: "A" } } }),
    );
    expect((await getEmail(key, again.id as string)).body.html).toBe("<p>Name: item</p><p>Total: 25</p>");
    await callWithKey(key, "POST", `/templates/${id}/publish`);
    const third = await json(
      await callWithKey(key, "POST", "/emails", { to: "ann@example.com", template: { id, variables: { NAME: "A" } } }),
    );
    expect((await getEmail(key, third.id as string)).body.html).toBe("<p>v2 item</p>");
  });

  it("refuse a send that leaves out a required variable, naming it, and other bad values", async () => {
    const key = await newKey("tpl-b");
    const id = await template(key, {
      name: "t",
      from: "a@acme.test",
      subject: "Hi",
      html: "<p>{{{CODE}}} {{{N}}}</p>",
      variables: [
        { key: "CODE", type: "string" },
        { key: "N", type: "number", fallback_value: 1 },
      ],
    });
    await callWithKey(key, "POST", `/templates/${id}/publish`);
    const missing = await callWithKey(key, "POST", "/emails", { to: "ann@example.com", template: { id } });
    expect(missing.status).toBe(422);
    expect(await json(missing)).toMatchObject({
      statusCode: 422,
      name: "missing_required_field",
      message: expect.stringContaining("`CODE`"),
    });
    const wrongType = await json(
      await callWithKey(key, "POST", "/emails", {
        to: "ann@example.com",
        template: { id, variables: { CODE: "x", N: "many" } },
      }),
    );
    expect(wrongType).toMatchObject({ name: "validation_error", message: expect.stringContaining("`N`") });
    const undeclared = await json(
      await callWithKey(key, "POST", "/emails", {
        to: "ann@example.com",
        template: { id, variables: { CODE: "x", OTHER: "y" } },
      }),
    );
    expect(undeclared).toMatchObject({ name: "validation_error", message: expect.stringContaining("`OTHER`") });
    const withHtml = await json(
      await callWithKey(key, "POST", "/emails", {
        to: "ann@example.com",
        html: "<p>mine</p>",
        template: { id, variables: { CODE: "x" } },
      }),
    );
    expect(withHtml).toMatchObject({ name: "validation_error", message: expect.stringContaining("`html`") });
    const unknown = await callWithKey(key, "POST", "/emails", { to: "ann@example.com", template: { id: "nope" } });
    expect(unknown.status).toBe(422);
    // Another tenant's template is not found either.
    const other = await newKey("tpl-b2");
    expect(
      (
        await callWithKey(other, "POST", "/emails", {
          to: "ann@example.com",
          template: { id, variables: { CODE: "x" } },
        })
      ).status,
    ).toBe(422);
    expect((await callWithKey(other, "GET", `/templates/${id}`)).status).toBe(404);
  });

  it("refuse a template using an undeclared or reserved variable", async () => {
    const key = await newKey("tpl-c");
    const undeclared = await callWithKey(key, "POST", "/templates", { name: "t", html: "<p>{{{WHO}}}</p>" });
    expect(undeclared.status).toBe(422);
    expect((await json(undeclared)).message).toMatch(/`WHO` is used in the template but not defined/);
    const reserved = await json(
      await callWithKey(key, "POST", "/templates", {
        name: "t",
        html: "<p>x</p>",
        variables: [{ key: "EMAIL", type: "string" }],
      }),
    );
    expect(reserved.message).toMatch(/reserved/);
    expect((await callWithKey(key, "POST", "/templates", { html: "<p>x</p>" })).status).toBe(422);
  });

  it("list newest first with cursors, duplicate, and remove", async () => {
    const key = await newKey("tpl-d");
    const ids: string[] = [];
    for (const n of ["one", "two", "three"]) {
      ids.push(await template(key, { name: n, html: `<p>${n}</p>` }));
      await new Promise((r) => setTimeout(r, 5));
    }
    const first = await json(await callWithKey(key, "GET", "/templates?limit=2"));
    expect(first).toMatchObject({ object: "list", has_more: true });
    expect((first.data as Json[]).map((t) => t.name)).toEqual(["three", "two"]);
    const rest = await json(await callWithKey(key, "GET", `/templates?limit=2&after=${ids[1]}`));
    expect((rest.data as Json[]).map((t) => t.name)).toEqual(["one"]);
    const back = await json(await callWithKey(key, "GET", `/templates?limit=1&before=${ids[0]}`));
    expect((back.data as Json[]).map((t) => t.name)).toEqual(["two"]);
    const dup = await callWithKey(key, "POST", `/templates/${ids[0]}/duplicate`);
    const copy = (await json(dup)).id as string;
    expect(await json(await callWithKey(key, "GET", `/templates/${copy}`))).toMatchObject({
      name: "one (copy)",
      status: "draft",
      html: "<p>one</p>",
    });
    expect(await json(await callWithKey(key, "DELETE", `/templates/${copy}`))).toEqual({
      object: "template",
      id: copy,
      deleted: true,
    });
    expect((await callWithKey(key, "GET", `/templates/${copy}`)).status).toBe(404);
  });

  it("render once per batch item, reading the template once for the batch", async () => {
    const key = await newKey("tpl-e");
    const id = await template(key, {
      name: "b",
      from: "a@acme.test",
      subject: "Hi {{{N}}}",
      html: "<p>{{{N}}}</p>",
      variables: [{ key: "N", type: "string" }],
    });
    await callWithKey(key, "POST", `/templates/${id}/publish`);
    const res = await json(
      await callWithKey(
        key,
        "POST",
        "/emails/batch",
        [1, 2, 3].map((n) => ({ to: `r${n}@example.com`, template: { id, variables: { N: String(n) } } })),
      ),
    );
    const data = res.data as { id: string }[];
    expect(data).toHaveLength(3);
    expect((await getEmail(key, data[2]!.id)).body).toMatchObject({ subject: "Hi 3", html: "<p>3</p>" });
  });
});
