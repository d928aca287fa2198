/**
 * The OpenAPI rows (openapi.ts) of Resend's newer resources: suppressions, templates, topics
 * and contacts' topics, received mail, attachments, metrics, apiKeys.update, and the signed
 * download links. Response schemas here are what the routes answer, and
 * test/integration/resend/openapi-contract.test.ts checks each answer against its schema.
 */
import { z } from "zod";
import type { Operation } from "./openapi-types";
import {
  BatchAddSuppressionsSchema,
  BatchRemoveSuppressionsSchema,
  ResendAddSuppressionSchema,
} from "./http/suppression-schemas";
import {
  ContactTopicsSchema,
  CreateTemplateSchema,
  CreateTopicSchema,
  PageQuerySchema,
  PreviewTemplateSchema,
  UpdateTemplateSchema,
  UpdateTopicSchema,
} from "./http/template-schemas";
import { UpdateApiKeySchema } from "./http/domain-schemas";
import { MetricsQuerySchema } from "./http/metrics-schemas";
import { METRICS } from "../metrics/core/metrics";

const Page = PageQuerySchema as unknown as z.ZodObject;
const list = <T extends z.ZodType>(item: T) =>
  z.object({ object: z.literal("list"), has_more: z.boolean(), data: z.array(item) });
const ref = <T extends string>(object: T) => z.object({ object: z.literal(object), id: z.string() });
const deleted = <T extends string>(object: T) => ref(object).extend({ deleted: z.boolean() });

const Suppression = z.object({
  id: z.string(),
  email: z.string(),
  origin: z.enum(["bounce", "complaint", "manual"]),
  source_id: z.string().nullable(),
  created_at: z.string(),
  scope: z.string().describe("relay: all, bulk or bulk:<topic>"),
  reason: z.string().describe("relay: manual, bounce:<category>, complaint, unsubscribe[:<topic>]"),
  expires_at: z.string().nullable().describe("relay: when a bounce's entry lapses"),
});
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
const Topic = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().optional(),
  default_subscription: z.enum(["opt_in", "opt_out"]),
  created_at: z.string(),
});
const ContactTopic = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  subscription: z.enum(["opt_in", "opt_out"]),
});
const InboundAttachment = z.object({
  id: z.string(),
  filename: z.string().nullable(),
  size: z.number().int(),
  content_type: z.string(),
  content_id: z.string().nullable(),
  content_disposition: z.string().nullable(),
});
const Received = z.object({
  id: z.string(),
  to: z.array(z.string()),
  from: z.string(),
  created_at: z.string(),
  subject: z.string(),
  bcc: z.array(z.string()).nullable(),
  cc: z.array(z.string()).nullable(),
  reply_to: z.array(z.string()).nullable(),
  received_for: z.array(z.string()),
  message_id: z.string(),
  attachments: z.array(InboundAttachment),
});
const Link = z.object({ download_url: z.string(), expires_at: z.string() });
const ReceivedEmail = Received.extend({
  object: z.literal("email"),
  html: z.string().nullable(),
  text: z.string().nullable(),
  headers: z.record(z.string(), z.string()),
  raw: Link.nullable(),
});
const AttachmentData = Link.extend({
  id: z.string(),
  filename: z.string().optional(),
  size: z.number().int(),
  content_type: z.string(),
  content_disposition: z.enum(["inline", "attachment"]),
  content_id: z.string().optional(),
});
const MetricCounts = z.object(Object.fromEntries(METRICS.map((m) => [m, z.number().optional()])));
const Metrics = z.object({
  object: z.literal("metrics"),
  start_date: z.string(),
  end_date: z.string(),
  metrics: z.array(z.enum(METRICS)),
  dimensions: z.array(z.string()),
  granularity: z.enum(["hourly", "daily", "weekly", "monthly"]),
  totals: MetricCounts,
  data: z
    .array(
      MetricCounts.extend({
        period: z.string().optional(),
        domain_id: z.string().nullable().optional(),
        domain_name: z.string().optional(),
      }),
    )
    .optional(),
});
const ReceivingQuery = z.object({ html_format: z.enum(["data_uri", "cid"]).optional() });

/** The rows (see the header). */
export const RESEND_ROUTES: Operation[] = [
  {
    method: "post",
    path: "/suppressions",
    operationId: "resendAddSuppression",
    auth: true,
    summary: "Suppress an address for all the tenant's mail (Resend-compatible; the relay's store)",
    body: ResendAddSuppressionSchema,
    ok: { status: 201, schema: ref("suppression") },
    errors: [400, 401, 422],
  },
  {
    method: "get",
    path: "/suppressions",
    operationId: "resendListSuppressions",
    auth: true,
    summary: "List suppressions, in address order, optionally of one origin",
    query: Page.extend({ origin: z.enum(["bounce", "complaint", "manual"]).optional() }),
    ok: { status: 200, schema: list(Suppression) },
    errors: [401, 422],
  },
  {
    method: "get",
    path: "/suppressions/{id_or_email}",
    operationId: "resendGetSuppression",
    auth: true,
    summary: "A suppression by id, or an address's (scope all first)",
    ok: { status: 200, schema: Suppression.extend({ object: z.literal("suppression") }) },
    errors: [401, 404, 422],
  },
  {
    method: "delete",
    path: "/suppressions/{id_or_email}",
    operationId: "resendRemoveSuppression",
    auth: true,
    summary: "Remove a suppression by id, or every entry of an address",
    ok: { status: 200, schema: deleted("suppression") },
    errors: [401, 404, 422],
  },
  {
    method: "post",
    path: "/suppressions/batch/add",
    operationId: "resendBatchAddSuppressions",
    auth: true,
    summary: "Suppress up to 1,000 addresses",
    body: BatchAddSuppressionsSchema,
    ok: { status: 200, schema: z.object({ data: z.array(ref("suppression")) }) },
    errors: [400, 401, 422],
  },
  {
    method: "post",
    path: "/suppressions/batch/remove",
    operationId: "resendBatchRemoveSuppressions",
    auth: true,
    summary: "Remove up to 1,000 suppressions by address or by id",
    body: BatchRemoveSuppressionsSchema,
    ok: { status: 200, schema: z.object({ data: z.array(deleted("suppression")) }) },
    errors: [400, 401, 422],
  },
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
  {
    method: "post",
    path: "/topics",
    operationId: "createTopic",
    auth: true,
    summary: "Create a topic with its default subscription",
    body: CreateTopicSchema,
    ok: { status: 201, schema: z.object({ id: z.string() }) },
    errors: [400, 401, 422],
  },
  {
    method: "get",
    path: "/topics",
    summary: "List topics",
    operationId: "listTopics",
    auth: true,
    ok: { status: 200, schema: list(Topic) },
    errors: [401],
  },
  {
    method: "get",
    path: "/topics/{id}",
    operationId: "getTopic",
    auth: true,
    summary: "A topic",
    ok: { status: 200, schema: Topic.extend({ object: z.literal("topic") }) },
    errors: [401, 404],
  },
  {
    method: "patch",
    path: "/topics/{id}",
    operationId: "updateTopic",
    auth: true,
    summary: "Rename or describe a topic (its default cannot change)",
    body: UpdateTopicSchema,
    ok: { status: 200, schema: z.object({ id: z.string() }) },
    errors: [400, 401, 404, 422],
  },
  {
    method: "delete",
    path: "/topics/{id}",
    operationId: "removeTopic",
    auth: true,
    summary: "Delete a topic with its opt-ins and opt-outs",
    ok: { status: 200, schema: deleted("topic") },
    errors: [401, 404],
  },
  {
    method: "get",
    path: "/contacts/{contact}/topics",
    operationId: "listContactTopics",
    auth: true,
    summary: "A contact's (by email) subscription to every topic",
    query: Page,
    ok: { status: 200, schema: list(ContactTopic) },
    errors: [401, 404, 422],
  },
  {
    method: "patch",
    path: "/contacts/{contact}/topics",
    operationId: "updateContactTopics",
    auth: true,
    summary: "Opt a contact (by email) in or out of topics (an opt-out is the suppression of scope bulk:<topic>)",
    body: ContactTopicsSchema,
    ok: { status: 200, schema: z.object({ id: z.string() }) },
    errors: [400, 401, 404, 422],
  },
  {
    method: "get",
    path: "/emails/receiving",
    operationId: "listReceivedEmails",
    auth: true,
    summary: "Received emails, newest first",
    query: Page,
    ok: { status: 200, schema: list(Received) },
    errors: [401, 422],
  },
  {
    method: "get",
    path: "/emails/receiving/{id}",
    operationId: "getReceivedEmail",
    auth: true,
    summary: "A received email: html, text, headers, attachments and a link to its raw bytes",
    query: ReceivingQuery,
    ok: { status: 200, schema: ReceivedEmail },
    errors: [401, 404, 422],
  },
  {
    method: "get",
    path: "/emails/receiving/{id}/attachments",
    operationId: "listReceivedAttachments",
    auth: true,
    summary: "A received email's attachments with download links",
    query: Page,
    ok: { status: 200, schema: list(AttachmentData) },
    errors: [401, 404, 422],
  },
  {
    method: "get",
    path: "/emails/receiving/{id}/attachments/{aid}",
    operationId: "getReceivedAttachment",
    auth: true,
    summary: "One attachment of a received email",
    ok: { status: 200, schema: AttachmentData.extend({ object: z.literal("attachment") }) },
    errors: [401, 404],
  },
  {
    method: "get",
    path: "/emails/{id}/attachments",
    operationId: "listEmailAttachments",
    auth: true,
    summary: "A sent email's attachments with download links",
    query: Page,
    ok: { status: 200, schema: list(AttachmentData) },
    errors: [401, 404, 422],
  },
  {
    method: "get",
    path: "/emails/{id}/attachments/{aid}",
    operationId: "getEmailAttachment",
    auth: true,
    summary: "One attachment of a sent email",
    ok: { status: 200, schema: AttachmentData.extend({ object: z.literal("attachment") }) },
    errors: [401, 404],
  },
  {
    method: "get",
    path: "/emails/metrics",
    operationId: "emailMetrics",
    auth: true,
    summary: "Delivery, bounce, complaint and unsubscribe counts and rates, in all, by period and by domain",
    query: MetricsQuerySchema as unknown as z.ZodObject,
    ok: { status: 200, schema: Metrics },
    errors: [401, 422],
  },
  {
    method: "patch",
    path: "/api-keys/{id}",
    operationId: "updateApiKey",
    auth: true,
    summary: "Rename an API key",
    body: UpdateApiKeySchema,
    ok: { status: 200, schema: ref("api_key") },
    errors: [400, 401, 404, 422],
  },
  {
    method: "get",
    path: "/files/{token}",
    operationId: "downloadFile",
    auth: false,
    summary: "A download link's file (signed, no API key): an attachment or a received email's raw bytes",
    ok: { status: 200, schema: z.string(), media: "application/octet-stream", jsonErrors: true },
    errors: [404],
  },
];
