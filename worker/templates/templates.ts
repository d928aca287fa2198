/**
 * Templates as the API and the accept path see them: the Resend template object, a version's
 * content from a request, and a send's template rendered into the fields of an ordinary send.
 *
 * DESCRIPTION
 *   contentOf(input, base?)      a TemplateContent from a create or update body (the fields it
 *                                leaves out taken from `base`), checked (core/render.ts
 *                                checkContent); 422 naming the first problem.
 *   templateObject(row)          GET /templates/:id: Resend's template object (the draft's content,
 *                                status, has_unpublished_versions, current_version_id) plus the
 *                                relay's `published_version_id`.
 *   templateListItem(row)        an item of GET /templates.
 *   TemplateSource               the tenant's templates by id or alias, each read once per request
 *                                (a batch of 100 sends naming one template reads it once).
 *   renderSend(input, source)    a send naming `template: {id, variables}` as the send it stands
 *                                for: the published version rendered with the variables; the
 *                                request's from, subject and reply_to win over the template's.
 *
 * ERRORS
 *   ApiError 422 validation_error for a template that is missing (or another tenant's), not
 *   published, or a value of the wrong type or an undeclared variable; 422
 *   missing_required_field naming a required variable left out; 422 for a send without `from`
 *   or `subject` from either.
 */
import { ApiError } from "../model/errors";
import { findTemplate, type TemplateRow } from "../db/templates";
import {
  checkContent,
  checkValues,
  renderContent,
  type Problem,
  type TemplateContent,
  type VariableDecl,
} from "./core/render";

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** A create or update body (template-schemas.ts), as parsed. */
export interface ContentInput {
  subject?: string | null | undefined;
  html?: string | undefined;
  text?: string | null | undefined;
  from?: string | null | undefined;
  reply_to?: string | string[] | null | undefined;
  variables?:
    { key: string; type: "string" | "number"; fallback_value?: string | number | null | undefined }[] | undefined;
}

function problem(p: Problem): ApiError {
  return new ApiError(422, p.kind === "missing" ? "missing_required_field" : "validation_error", p.message);
}

/** A checked version's content (see the header). */
export function contentOf(input: ContentInput, base?: TemplateContent): TemplateContent {
  const pick = <K extends keyof ContentInput>(k: K, fb: TemplateContent[keyof TemplateContent] | null) =>
    input[k] === undefined ? fb : input[k];
  const replyTo = pick("reply_to", base?.reply_to ?? null) as string | string[] | null;
  const content: TemplateContent = {
    subject: pick("subject", base?.subject ?? null) as string | null,
    html: (input.html ?? base?.html ?? "") as string,
    text: pick("text", base?.text ?? null) as string | null,
    from: pick("from", base?.from ?? null) as string | null,
    reply_to: replyTo === null ? null : typeof replyTo === "string" ? [replyTo] : replyTo,
    variables:
      input.variables === undefined
        ? (base?.variables ?? [])
        : input.variables.map((v): VariableDecl => ({
            key: v.key,
            type: v.type,
            fallback_value: v.fallback_value ?? null,
          })),
  };
  const first = checkContent(content)[0];
  if (first) throw problem(first);
  return content;
}

/** The stored content of a row's draft or published version. */
export function parseContent(json: string): TemplateContent {
  return JSON.parse(json) as TemplateContent;
}

/** GET /templates/:id (see the header). */
export function templateObject(r: TemplateRow) {
  const c = parseContent(r.draft);
  const stamp = iso(r.updated_at)!;
  return {
    object: "template" as const,
    id: r.id,
    name: r.name,
    alias: r.alias,
    status: r.published === null ? ("draft" as const) : ("published" as const),
    subject: c.subject,
    html: c.html,
    text: c.text,
    from: c.from,
    reply_to: c.reply_to,
    variables: c.variables.map((v) => ({ ...v, created_at: stamp, updated_at: stamp })),
    created_at: iso(r.created_at)!,
    updated_at: stamp,
    published_at: iso(r.published_at),
    has_unpublished_versions: r.published_version !== r.draft_version,
    current_version_id: r.draft_version,
    published_version_id: r.published_version,
  };
}

/** An item of GET /templates. */
export function templateListItem(r: TemplateRow) {
  return {
    id: r.id,
    name: r.name,
    alias: r.alias,
    status: r.published === null ? "draft" : "published",
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
    published_at: iso(r.published_at),
  };
}

/** The tenant's templates, each read at most once per request. */
export class TemplateSource {
  private readonly seen = new Map<string, Promise<TemplateRow | null>>();
  constructor(
    private readonly db: D1Database,
    private readonly tenant: string,
  ) {}
  get(ident: string): Promise<TemplateRow | null> {
    let p = this.seen.get(ident);
    if (!p) {
      p = findTemplate(this.db, this.tenant, ident);
      this.seen.set(ident, p);
    }
    return p;
  }
}

/** What a templated send carries besides the ordinary fields. */
export interface TemplateRef {
  id: string;
  variables?: Record<string, string | number> | undefined;
}

/** The fields a template gives a send. */
export interface Rendered {
  from: string;
  subject: string;
  html: string;
  text?: string;
  reply_to?: string[];
}

/** Renders the published version for a send (see the header). */
export async function renderSend(
  ref: TemplateRef,
  own: { from?: string | undefined; subject?: string | undefined; reply_to?: string | string[] | undefined },
  source: TemplateSource,
): Promise<Rendered> {
  const row = await source.get(ref.id);
  if (!row)
    throw new ApiError(
      422,
      "validation_error",
      `Invalid \`template.id\`: no template ${JSON.stringify(ref.id)} (id or alias) of yours.`,
    );
  if (row.published === null)
    throw new ApiError(
      422,
      "validation_error",
      `Template ${JSON.stringify(ref.id)} has no published version: publish it first (POST /templates/${row.id}/publish).`,
    );
  const content = parseContent(row.published);
  const values = ref.variables ?? {};
  const first = checkValues(content.variables, values, JSON.stringify(ref.id))[0];
  if (first) throw problem(first);
  const out = renderContent(content, values);
  const from = own.from ?? content.from;
  const subject = own.subject ?? out.subject;
  if (!from)
    throw new ApiError(
      422,
      "missing_required_field",
      "Missing `from` field: neither the request nor the template gives one.",
    );
  if (subject === null || subject === undefined)
    throw new ApiError(
      422,
      "missing_required_field",
      "Missing `subject` field: neither the request nor the template gives one.",
    );
  const replyTo = own.reply_to === undefined ? content.reply_to : null;
  return {
    from,
    subject,
    html: out.html,
    ...(out.text !== null ? { text: out.text } : {}),
    ...(replyTo ? { reply_to: replyTo } : {}),
  };
}
