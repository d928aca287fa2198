/**
 * The OpenAPI rows (document.ts ROUTES) of Resend's templates: drafts with their variables,
 * publishing (sends render the published version), duplicates, and the relay's preview.
 */
import { z } from "zod";
import type { Operation } from "./types";
import { deleted, list, Page, ref } from "./shapes";
import { CreateTemplateSchema, PreviewTemplateSchema, UpdateTemplateSchema } from "../http/template-schemas";

const Variable = z.object({
  key: z.string(),
  type: z.enum(["string", "number"]),
  fallback_value: z.union([z.string(), z.number()]).nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
const TemplateListItem = z.object({
  id: z.string(),
  name: z.string(),
  alias: z.string().nullable(),
  status: z.enum(["draft", "published"]),
  created_at: z.string(),
  updated_at: z.string(),
  published_at: z.string().nullable(),
});
const Template = TemplateListItem.extend({
  object: z.literal("template"),
  subject: z.string().nullable(),
  html: z.string(),
  text: z.string().nullable(),
  from: z.string().nullable(),
  reply_to: z.array(z.string()).nullable(),
  variables: z.array(Variable),
  has_unpublished_versions: z.boolean(),
  current_version_id: z.string(),
  published_version_id: z.string().nullable().describe("relay: the version sends render"),
});

/** Templates and their preview. */
export const TEMPLATE_ROUTES: Operation[] = [
  {
    method: "post",
    path: "/templates",
    operationId: "createTemplate",
    auth: true,
    summary: "Create a template (a draft) with its variables",
    body: CreateTemplateSchema,
    ok: { status: 201, schema: ref("template") },
    errors: [400, 401, 422],
  },
  {
    method: "get",
    path: "/templates",
    operationId: "listTemplates",
    auth: true,
    summary: "List templates, newest first",
    query: Page,
    ok: { status: 200, schema: list(TemplateListItem) },
    errors: [401, 422],
  },
  {
    method: "get",
    path: "/templates/{id}",
    operationId: "getTemplate",
    auth: true,
    summary: "A template (by id or alias): its draft, status and versions",
    ok: { status: 200, schema: Template },
    errors: [401, 404],
  },
  {
    method: "patch",
    path: "/templates/{id}",
    operationId: "updateTemplate",
    auth: true,
    summary: "Change a template's draft; the published version sends on until the next publish",
    body: UpdateTemplateSchema,
    ok: { status: 200, schema: ref("template") },
    errors: [400, 401, 404, 422],
  },
  {
    method: "delete",
    path: "/templates/{id}",
    operationId: "removeTemplate",
    auth: true,
    summary: "Delete a template",
    ok: { status: 200, schema: deleted("template") },
    errors: [401, 404],
  },
  {
    method: "post",
    path: "/templates/{id}/publish",
    operationId: "publishTemplate",
    auth: true,
    summary: "Publish the draft: sends render it from now on",
    ok: { status: 200, schema: ref("template") },
    errors: [401, 404],
  },
  {
    method: "post",
    path: "/templates/{id}/duplicate",
    operationId: "duplicateTemplate",
    auth: true,
    summary: "A new draft with the template's content",
    ok: { status: 201, schema: ref("template") },
    errors: [401, 404],
  },
  {
    method: "post",
    path: "/relay/templates/{id}/preview",
    operationId: "previewTemplate",
    auth: true,
    summary:
      "Relay: a template version rendered with the variables given (fallbacks for the rest), as a send would; nothing sent",
    body: PreviewTemplateSchema,
    ok: {
      status: 200,
      schema: z.object({
        object: z.literal("template_preview"),
        version: z.enum(["draft", "published"]),
        subject: z.string().nullable(),
        html: z.string(),
        text: z.string().nullable(),
      }),
    },
    errors: [400, 401, 404, 422],
  },
];
