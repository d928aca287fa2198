/**
 * Resend's template endpoints: a tenant's stored templates, each with a draft and, once
 * published, the published version that sends render (POST /emails `template: {id, variables}`).
 *
 * DESCRIPTION
 *   POST   /templates                 { name, html, subject?, text?, alias?, from?, reply_to?,
 *                                     variables?: [{key, type, fallback_value?}] } → 201
 *                                     { object: "template", id }: a draft.
 *   GET    /templates?limit=&after=&before=  { object: "list", has_more, data }, newest first.
 *   GET    /templates/:id_or_alias    the template object (the draft's content, status,
 *                                     published_at, has_unpublished_versions, current_version_id).
 *   PATCH  /templates/:id_or_alias    the fields given replace the draft's → { object, id }; the
 *                                     published version sends on until the next publish.
 *   POST   /templates/:id_or_alias/publish    the draft becomes the published version.
 *   POST   /templates/:id_or_alias/duplicate  a new draft with the same content → { object, id }.
 *   DELETE /templates/:id_or_alias    → { object: "template", id, deleted: true }.
 *   POST   /relay/templates/:id_or_alias/preview  (relay extra, for the dashboard) { variables?,
 *                                     version?: "draft" (default) | "published" } → { object:
 *                                     "template_preview", version, subject, html, text }: the
 *                                     version rendered as a send would (values HTML-escaped in
 *                                     html; fallbacks for what is left out; a required variable
 *                                     left out stays as written). Nothing is sent or stored.
 *
 * ERRORS
 *   422 validation_error for a bad field, a reserved or undeclared variable, or an alias the
 *   tenant already uses; 404 not_found for an unknown (or another tenant's) template.
 */
import { Hono, type Context } from "hono";
import {
  deleteTemplate,
  findTemplate,
  insertTemplate,
  listTemplates,
  publishTemplate,
  updateDraft,
  type TemplateRow,
} from "../../db/templates";
import { contentOf, parseContent, templateListItem, templateObject } from "../../templates/templates";
import { renderContent } from "../../templates/core/render";
import { type AppEnv } from "../http/context";
import { parseInput, readJson, readOptionalJson } from "../http/body";
import { ApiError } from "../../model/errors";
import {
  CreateTemplateSchema,
  PageQuerySchema,
  PreviewTemplateSchema,
  UpdateTemplateSchema,
} from "../http/template-schemas";

const BODY_LIMIT = 2 * 1024 * 1024;
const aliasTaken = (alias: string | null | undefined) =>
  new ApiError(
    422,
    "validation_error",
    `The alias ${JSON.stringify(alias)} is already used by another of your templates.`,
  );

async function mine(c: Context<AppEnv>): Promise<TemplateRow> {
  const t = await findTemplate(c.env.DB, c.get("tenant"), c.req.param("id") ?? "");
  if (!t) throw new ApiError(404, "not_found", "Template not found.");
  return t;
}

/** The /templates routes (mounted behind the API key middleware). */
export function templateRoutes() {
  const r = new Hono<AppEnv>();

  r.post("/", async (c) => {
    const input = parseInput(CreateTemplateSchema, (await readJson(c, BODY_LIMIT)).value);
    const now = Date.now();
    const row: TemplateRow = {
      tenant_id: c.get("tenant"),
      id: crypto.randomUUID(),
      name: input.name,
      alias: input.alias ?? null,
      draft: JSON.stringify(contentOf(input)),
      draft_version: crypto.randomUUID(),
      published: null,
      published_version: null,
      created_at: now,
      updated_at: now,
      published_at: null,
    };
    if ((await insertTemplate(c.env.DB, row)) === "alias_taken") throw aliasTaken(input.alias);
    return c.json({ id: row.id, object: "template" }, 201);
  });

  r.get("/", async (c) => {
    const q = parseInput(PageQuerySchema, c.req.query());
    const page = await listTemplates(c.env.DB, c.get("tenant"), q);
    if (!page)
      throw new ApiError(
        422,
        "validation_error",
        `\`${q.after !== undefined ? "after" : "before"}\` is not the id of one of your templates.`,
      );
    return c.json({ object: "list", has_more: page.hasMore, data: page.rows.map(templateListItem) });
  });

  r.get("/:id", async (c) => c.json(templateObject(await mine(c))));

  r.patch("/:id", async (c) => {
    const t = await mine(c);
    const input = parseInput(UpdateTemplateSchema, (await readJson(c, BODY_LIMIT)).value);
    const draft = contentOf(input, parseContent(t.draft));
    const alias = input.alias === undefined ? t.alias : input.alias;
    const res = await updateDraft(c.env.DB, t.tenant_id, t.id, {
      name: input.name ?? t.name,
      alias,
      draft: JSON.stringify(draft),
      draftVersion: crypto.randomUUID(),
      nowMs: Date.now(),
    });
    if (res === "alias_taken") throw aliasTaken(alias);
    return c.json({ id: t.id, object: "template" });
  });

  r.post("/:id/publish", async (c) => {
    const t = await mine(c);
    await readOptionalJson(c, 1024);
    await publishTemplate(c.env.DB, t.tenant_id, t.id, Date.now());
    return c.json({ id: t.id, object: "template" });
  });

  r.post("/:id/duplicate", async (c) => {
    const t = await mine(c);
    await readOptionalJson(c, 1024);
    const now = Date.now();
    const copy: TemplateRow = {
      ...t,
      id: crypto.randomUUID(),
      name: `${t.name} (copy)`.slice(0, 200),
      alias: null,
      draft_version: crypto.randomUUID(),
      published: null,
      published_version: null,
      created_at: now,
      updated_at: now,
      published_at: null,
    };
    await insertTemplate(c.env.DB, copy);
    return c.json({ id: copy.id, object: "template" }, 201);
  });

  r.delete("/:id", async (c) => {
    const t = await mine(c);
    await deleteTemplate(c.env.DB, t.tenant_id, t.id);
    return c.json({ object: "template", id: t.id, deleted: true });
  });
  return r;
}

/** POST /relay/templates/:id/preview (see the header), mounted at /relay. */
export function templatePreviewRoutes() {
  const r = new Hono<AppEnv>();
  r.post("/templates/:id/preview", async (c) => {
    const t = await mine(c);
    const input = parseInput(PreviewTemplateSchema, (await readOptionalJson(c, 256 * 1024)) ?? {});
    const json = input.version === "published" ? t.published : t.draft;
    if (json === null) throw new ApiError(422, "validation_error", "This template has no published version yet.");
    return c.json({
      object: "template_preview",
      version: input.version,
      ...renderContent(parseContent(json), input.variables ?? {}),
    });
  });
  return r;
}
