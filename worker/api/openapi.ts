/**
 * The OpenAPI 3.1 document of the HTTP API, generated from the zod schemas that validate the
 * requests (schemas.ts) plus zod schemas of the responses declared here.
 *
 * DESCRIPTION
 *   ROUTES            one row per operation: method, path, summary, request body / query
 *                     schema, and responses. A test checks it against the app's real routes,
 *                     both ways, so a route cannot be added without documenting it.
 *   openApiDocument() builds the document (OpenAPI 3.1, whose schemas are JSON Schema
 *                     2020-12 — what z.toJSONSchema produces).
 *
 * INVARIANTS
 *   Every operation but GET /health requires `Authorization: Bearer <key>`; every error
 *   response uses Resend's body {statusCode, name, message}.
 */
import { z } from "zod";
import { CancelFilterSchema, CancelOneSchema, ComplaintSchema } from "./http/control-schemas";
import { CreateApiKeySchema, CreateDomainSchema, UpdateDomainSchema } from "./http/domain-schemas";
import {
  AddSuppressionSchema,
  CreateWebhookSchema,
  RemoveSuppressionQuerySchema,
  SuppressionListQuerySchema,
  ListQuerySchema,
  UpdateEmailSchema,
  UpdateWebhookSchema,
  WebhookListQuerySchema,
} from "./http/schemas";
import { BatchValidationSchema, IdempotencyKeySchema, RawMessageSchema, SendEmailSchema } from "../accept/schemas";
import { DeadLetterQuerySchema, EventFeedQuerySchema, ReplaySchema } from "./routes/events";
import { SettingsBody, SettingsSchema } from "./routes/settings";
import { ComplaintRateBody, ComplaintRateQuerySchema } from "./routes/complaint-rate";
import { PolicyLimitsSchema } from "./routes/admin/policies";
import { WarmupAdvanceSchema, WarmupPlanSchema } from "./routes/admin/warmup";
import {
  AdminResponses as Admin,
  EventsQuerySchema,
  FlushSchema,
  InboundQuerySchema,
  ProviderRuleBodySchema,
  ReportsQuerySchema,
  ResumeQuerySchema,
  SearchQuerySchema,
  StatsQuerySchema,
  SuspendSchema,
} from "./routes/admin/schemas";
import { ErrorBody, type Operation, type Schema } from "./openapi-types";
import { RESEND_ROUTES } from "./openapi-resend";
import { TemplatedSendSchema } from "../accept/schemas";

const ControlBody = z.object({
  object: z.literal("email"),
  id: z.string(),
  action: z.enum(["hold", "release", "requeue", "cancel"]),
  recipients: z.number().int(),
});
const Warning = z
  .object({ rule: z.string(), code: z.number().int(), enhanced: z.string(), message: z.string() })
  .describe("A compliance check's warning: the rule and the reply a receiver would give (docs/deliverability.md)");
const IdBody = z.object({ id: z.string(), warnings: z.array(Warning).optional() });
const BatchBody = z.object({
  data: z.array(IdBody),
  errors: z.array(z.object({ index: z.number().int(), message: z.string() })).optional(),
});
const RecipientView = z.object({
  email: z.string(),
  status: z.enum([
    "incoming",
    "ready",
    "active",
    "deferred",
    "delivered",
    "bounced",
    "expired",
    "suppressed",
    "cancelled",
  ]),
  attempts: z.number().int(),
  next_attempt_at: z.string().nullable(),
  last_response: z
    .object({
      code: z.number().int(),
      enhanced: z.string().nullable(),
      text: z.string(),
      mx: z.string().nullable(),
      tls: z.boolean(),
    })
    .partial()
    .nullable(),
  blocked_by: z
    .string()
    .nullable()
    .describe(
      "Why it waits: in_flight, window_full, destination_dead, rate_delay, suspended, policy_concurrency, rate_limit, transport_dead, process_limit, queued, retry, scheduled, held, suppressed",
    ),
  blocked_until: z.string().nullable().describe("Until when it waits, when known"),
});
const EmailBody = z.object({
  object: z.literal("email"),
  id: z.string(),
  from: z.string(),
  to: z.array(z.string()),
  cc: z.array(z.string()).nullable(),
  bcc: z.array(z.string()).nullable(),
  reply_to: z.array(z.string()).nullable(),
  subject: z.string(),
  html: z.string().nullable(),
  text: z.string().nullable(),
  tags: z.array(z.object({ name: z.string(), value: z.string() })).nullable(),
  message_id: z.string().nullable(),
  created_at: z.string().nullable(),
  scheduled_at: z.string().nullable(),
  last_event: z.string(),
  warnings: z.array(Warning),
  recipients: z.array(RecipientView),
});
const ListBody = z.object({
  object: z.literal("list"),
  has_more: z.boolean(),
  data: z.array(EmailBody.omit({ recipients: true }).partial().extend({ id: z.string() })),
});
const Health = z.object({ ok: z.boolean(), service: z.string() });
const EgressMember = z.object({
  id: z.string(),
  state: z.enum(["healthy", "suspended", "probation"]),
  suspended_until: z.string().nullable(),
  reason: z.string().nullable(),
});
const EgressView = z.object({
  object: z.literal("egress"),
  pools: z.array(z.object({ name: z.string(), members: z.array(EgressMember) })),
  events: z.array(
    z.object({ egress: z.string(), pool: z.string(), kind: z.string(), detail: z.string().nullable(), at: z.string() }),
  ),
});
const Suppression = z.object({
  object: z.literal("suppression"),
  address: z.string(),
  scope: z.string(),
  reason: z.string(),
  created_at: z.string(),
  expires_at: z.string().nullable(),
});
const WebhookRef = z.object({ object: z.literal("webhook"), id: z.string() });
const WebhookSecret = WebhookRef.extend({ signing_secret: z.string().describe("whsec_…; shown only here") });
const WebhookView = WebhookRef.extend({
  created_at: z.string(),
  status: z.enum(["enabled", "disabled"]),
  endpoint: z.string(),
  events: z.array(z.string()).nullable(),
});
const FeedEvent = z.object({
  id: z.string().describe("= the webhook-id of the push"),
  type: z.string(),
  created_at: z.string(),
  data: z
    .object({ email_id: z.string(), recipient: z.string().optional().describe("absent on email.received") })
    .passthrough(),
});
const DeadLetter = z.object({
  object: z.literal("dead_letter"),
  event_id: z.string(),
  type: z.string(),
  attempts: z.number().int(),
  reason: z.string(),
  dead_lettered_at: z.string(),
  replayed_at: z.string().nullable(),
});

const idempotency = {
  name: "Idempotency-Key",
  schema: IdempotencyKeySchema,
  description: "Repeat-safe submission: kept 24 h; same key and payload answers the first response.",
};

const DomainRecordBody = z.object({
  record: z.string(),
  name: z.string(),
  type: z.string(),
  value: z.string(),
  ttl: z.string(),
  status: z.string(),
  priority: z.number().optional(),
});
const DomainSummary = z.object({
  id: z.string(),
  name: z.string(),
  status: z.string(),
  created_at: z.string(),
  region: z.string(),
  capabilities: z.object({ sending: z.string(), receiving: z.string() }),
  open_tracking: z.boolean(),
  click_tracking: z.boolean(),
});
const DomainBody = DomainSummary.extend({ object: z.literal("domain").optional(), records: z.array(DomainRecordBody) });

/** Every operation of the API (Resend's newer resources: openapi-resend.ts). */
export const ROUTES: Operation[] = [
  {
    method: "get",
    path: "/unsubscribe/{token}",
    summary: "One-click unsubscribe link (RFC 8058; signed, no API key): a confirmation page; nothing changes",
    operationId: "unsubscribePage",
    auth: false,
    ok: { status: 200, schema: z.string(), media: "text/html" },
    errors: [404],
  },
  {
    method: "post",
    path: "/unsubscribe/{token}",
    summary:
      "One-click unsubscribe (RFC 8058 List-Unsubscribe=One-Click; signed, no API key): email.unsubscribed once, and the address suppressed for the tenant until removed",
    operationId: "unsubscribe",
    auth: false,
    rawBody: "application/x-www-form-urlencoded",
    ok: { status: 200, schema: z.string(), media: "text/html" },
    errors: [404],
  },
  {
    method: "get",
    path: "/health",
    summary: "Liveness (no API key)",
    operationId: "health",
    auth: false,
    ok: { status: 200, schema: Health },
    errors: [],
  },
  {
    method: "post",
    path: "/emails",
    summary: "Send an email (Resend-compatible)",
    operationId: "sendEmail",
    auth: true,
    body: z.union([SendEmailSchema, TemplatedSendSchema]),
    headers: [idempotency],
    ok: { status: 200, schema: IdBody },
    errors: [400, 401, 409, 413, 422, 429],
  },
  {
    method: "post",
    path: "/emails/batch",
    summary: "Send up to 100 emails",
    operationId: "sendBatch",
    auth: true,
    body: z
      .array(z.union([SendEmailSchema, TemplatedSendSchema]))
      .min(1)
      .max(100),
    headers: [
      idempotency,
      {
        name: "x-batch-validation",
        schema: BatchValidationSchema,
        description: "strict (all or nothing) or permissive (per item).",
      },
    ],
    ok: { status: 200, schema: BatchBody },
    errors: [400, 401, 409, 413, 422, 429],
  },
  {
    method: "get",
    path: "/emails",
    summary: "List emails, newest first (cursor pagination)",
    operationId: "listEmails",
    auth: true,
    query: ListQuerySchema as unknown as z.ZodObject,
    ok: { status: 200, schema: ListBody },
    errors: [401, 422],
  },
  {
    method: "get",
    path: "/emails/{id}",
    summary: "An email with its recipients' states",
    operationId: "getEmail",
    auth: true,
    ok: { status: 200, schema: EmailBody },
    errors: [401, 404],
  },
  {
    method: "patch",
    path: "/emails/{id}",
    summary: "Reschedule a scheduled email",
    operationId: "updateEmail",
    auth: true,
    body: UpdateEmailSchema,
    ok: { status: 200, schema: z.object({ object: z.literal("email"), id: z.string() }) },
    errors: [400, 401, 404, 422],
  },
  {
    method: "post",
    path: "/emails/{id}/cancel",
    summary: "Cancel a scheduled email",
    operationId: "cancelEmail",
    auth: true,
    ok: { status: 200, schema: z.object({ object: z.literal("email"), id: z.string() }) },
    errors: [401, 404, 422],
  },
  {
    method: "post",
    path: "/relay/messages/raw",
    summary: "Relay an already composed RFC 5322 message",
    operationId: "sendRaw",
    auth: true,
    body: RawMessageSchema,
    headers: [idempotency],
    ok: { status: 200, schema: IdBody },
    errors: [400, 401, 409, 413, 422, 429],
  },
  {
    method: "get",
    path: "/relay/dev/mailbox",
    summary: "Local development only: what the local SMTP catcher received",
    operationId: "devMailbox",
    auth: true,
    ok: { status: 200, schema: z.object({}).passthrough() },
    errors: [401, 404, 502],
  },
  {
    method: "get",
    path: "/relay/dev/meter",
    summary: "Development and test only, operator: the meter's counters of billable operations",
    operationId: "devMeter",
    auth: true,
    ok: { status: 200, schema: z.object({}).passthrough() },
    errors: [401, 403, 404],
  },
  {
    method: "post",
    path: "/relay/dev/meter/reset",
    summary: "Development and test only, operator: zero the meter",
    operationId: "devMeterReset",
    auth: true,
    ok: { status: 200, schema: z.object({}).passthrough() },
    errors: [401, 403, 404],
  },
  {
    method: "get",
    path: "/relay/dev/dns",
    summary: "Development and test only, operator: the isolate's MX answer cache (entries, bytes, hits, misses)",
    operationId: "devDns",
    auth: true,
    ok: { status: 200, schema: z.object({}).passthrough() },
    errors: [401, 403, 404],
  },
  {
    method: "get",
    path: "/relay/dev/rows",
    summary: "Development and test only, operator: rows held now per D1 table and per Durable Object table",
    operationId: "devRows",
    auth: true,
    ok: { status: 200, schema: z.object({}).passthrough() },
    errors: [401, 403, 404],
  },
  {
    method: "get",
    path: "/relay/suppressions",
    summary: "The tenant's suppressions in address order, each address's entries (one per scope) on one page",
    operationId: "listSuppressions",
    auth: true,
    query: SuppressionListQuerySchema,
    ok: {
      status: 200,
      schema: z.object({ object: z.literal("list"), has_more: z.boolean(), data: z.array(Suppression) }),
    },
    errors: [401, 422],
  },
  {
    method: "post",
    path: "/relay/suppressions",
    summary:
      "Suppress an address (manually) for all the tenant's mail, its bulk mail, or one topic's, optionally until a date",
    operationId: "addSuppression",
    auth: true,
    body: AddSuppressionSchema,
    ok: { status: 201, schema: Suppression },
    errors: [400, 401, 422],
  },
  {
    method: "delete",
    path: "/relay/suppressions/{address}",
    summary: "Remove an address's suppressions (every scope, or the `scope` given)",
    operationId: "removeSuppression",
    auth: true,
    query: RemoveSuppressionQuerySchema,
    ok: {
      status: 200,
      schema: z.object({
        object: z.literal("suppression"),
        address: z.string(),
        deleted: z.boolean(),
        count: z.number().int(),
      }),
    },
    errors: [401, 404, 422],
  },
  {
    method: "post",
    path: "/domains",
    summary: "Add a sending domain: its own DKIM key and the DNS records to publish (Resend-compatible)",
    operationId: "createDomain",
    auth: true,
    body: CreateDomainSchema,
    ok: { status: 201, schema: DomainBody },
    errors: [400, 401, 409, 422],
  },
  {
    method: "get",
    path: "/domains",
    summary: "List the tenant's sending domains",
    operationId: "listDomains",
    auth: true,
    ok: {
      status: 200,
      schema: z.object({ object: z.literal("list"), has_more: z.boolean(), data: z.array(DomainSummary) }),
    },
    errors: [401],
  },
  {
    method: "get",
    path: "/domains/{id}",
    summary: "A sending domain with its records and their verification status",
    operationId: "getDomain",
    auth: true,
    ok: { status: 200, schema: DomainBody },
    errors: [401, 404],
  },
  {
    method: "patch",
    path: "/domains/{id}",
    summary:
      "Change a domain's settings (every field of domains.update; receiving on or off; what the relay does not do is a 422 naming it)",
    operationId: "updateDomain",
    auth: true,
    body: UpdateDomainSchema,
    ok: { status: 200, schema: z.object({ object: z.literal("domain"), id: z.string() }) },
    errors: [400, 401, 404, 422],
  },
  {
    method: "delete",
    path: "/domains/{id}",
    summary: "Remove a sending domain and its keys",
    operationId: "removeDomain",
    auth: true,
    ok: { status: 200, schema: z.object({ object: z.literal("domain"), id: z.string(), deleted: z.boolean() }) },
    errors: [401, 404],
  },
  {
    method: "post",
    path: "/domains/{id}/verify",
    summary: "Look the domain's records up now (DNS over HTTPS)",
    operationId: "verifyDomain",
    auth: true,
    ok: { status: 200, schema: z.object({ object: z.literal("domain"), id: z.string() }) },
    errors: [401, 404],
  },
  {
    method: "post",
    path: "/relay/domains/{id}/rotate-dkim",
    summary: "Publish a second DKIM selector; it signs once verified and the old one is retired",
    operationId: "rotateDomainKey",
    auth: true,
    ok: { status: 201, schema: z.object({}).passthrough() },
    errors: [401, 404, 422],
  },
  {
    method: "post",
    path: "/api-keys",
    summary: "Create an API key (the token is shown once)",
    operationId: "createApiKey",
    auth: true,
    body: CreateApiKeySchema,
    ok: { status: 201, schema: z.object({ id: z.string(), token: z.string() }) },
    errors: [400, 401, 422],
  },
  {
    method: "get",
    path: "/api-keys",
    summary: "List the tenant's API keys (without tokens)",
    operationId: "listApiKeys",
    auth: true,
    ok: {
      status: 200,
      schema: z.object({
        object: z.literal("list"),
        has_more: z.boolean(),
        data: z.array(
          z.object({ id: z.string(), name: z.string(), created_at: z.string(), last_used_at: z.string().nullable() }),
        ),
      }),
    },
    errors: [401],
  },
  {
    method: "delete",
    path: "/api-keys/{id}",
    summary: "Revoke an API key (refused from its next request)",
    operationId: "removeApiKey",
    auth: true,
    ok: { status: 200, schema: z.object({ object: z.literal("api_key"), id: z.string(), deleted: z.boolean() }) },
    errors: [401, 404],
  },
  {
    method: "post",
    path: "/webhooks",
    summary: "Create a webhook endpoint (its signing secret is shown once)",
    operationId: "createWebhook",
    auth: true,
    body: CreateWebhookSchema,
    ok: { status: 201, schema: WebhookSecret },
    errors: [400, 401, 422],
  },
  {
    method: "get",
    path: "/webhooks",
    summary: "List webhook endpoints",
    operationId: "listWebhooks",
    auth: true,
    query: WebhookListQuerySchema,
    ok: {
      status: 200,
      schema: z.object({ object: z.literal("list"), has_more: z.boolean(), data: z.array(WebhookView) }),
    },
    errors: [401, 422],
  },
  {
    method: "get",
    path: "/webhooks/{id}",
    summary: "A webhook endpoint",
    operationId: "getWebhook",
    auth: true,
    ok: { status: 200, schema: WebhookView },
    errors: [401, 404],
  },
  {
    method: "patch",
    path: "/webhooks/{id}",
    summary: "Change a webhook endpoint's URL, events or status",
    operationId: "updateWebhook",
    auth: true,
    body: UpdateWebhookSchema,
    ok: { status: 200, schema: WebhookRef },
    errors: [400, 401, 404, 422],
  },
  {
    method: "delete",
    path: "/webhooks/{id}",
    summary: "Delete a webhook endpoint",
    operationId: "deleteWebhook",
    auth: true,
    ok: { status: 200, schema: WebhookRef.extend({ deleted: z.boolean() }) },
    errors: [401, 404],
  },
  {
    method: "get",
    path: "/relay/events",
    summary: "The event feed: the envelopes pushed to webhooks, oldest first after an event id",
    operationId: "listEvents",
    auth: true,
    query: EventFeedQuerySchema as unknown as z.ZodObject,
    ok: {
      status: 200,
      schema: z.object({ object: z.literal("list"), has_more: z.boolean(), data: z.array(FeedEvent) }),
    },
    errors: [401, 422],
  },
  {
    method: "get",
    path: "/relay/webhooks/{id}/dead-letters",
    summary: "Deliveries to a webhook endpoint that used up the retry schedule",
    operationId: "listWebhookDeadLetters",
    auth: true,
    query: DeadLetterQuerySchema,
    ok: {
      status: 200,
      schema: z.object({ object: z.literal("list"), has_more: z.boolean(), data: z.array(DeadLetter) }),
    },
    errors: [401, 404, 422],
  },
  {
    method: "post",
    path: "/relay/webhooks/{id}/replay",
    summary: "Re-send the events of a time or event id range to a webhook endpoint (same webhook-id)",
    operationId: "replayWebhook",
    auth: true,
    body: ReplaySchema,
    ok: {
      status: 202,
      schema: z.object({
        object: z.literal("replay"),
        webhook_id: z.string(),
        enqueued: z.number().int(),
        has_more: z.boolean(),
        last_event_id: z.string().nullable(),
      }),
    },
    errors: [400, 401, 404, 422],
  },
  {
    method: "post",
    path: "/webhooks/{id}/signing-secret/rotate",
    summary: "Rotate the signing secret (the old one signs too for 24 h)",
    operationId: "rotateWebhookSecret",
    auth: true,
    ok: { status: 200, schema: WebhookSecret },
    errors: [401, 404],
  },
  {
    method: "get",
    path: "/relay/queue",
    summary: "Operator: qshape by destination and age, counts by state/transport/destination, age percentiles",
    operationId: "adminQueue",
    auth: true,
    ok: { status: 200, schema: Admin.queue },
    errors: [401, 403],
  },
  {
    method: "get",
    path: "/relay/destinations",
    summary: "Operator: every destination queue (window, busy, limit, dead-until, last response)",
    operationId: "adminDestinations",
    auth: true,
    ok: { status: 200, schema: Admin.destinations },
    errors: [401, 403],
  },
  {
    method: "get",
    path: "/relay/destinations/{transport}/{queue}",
    summary:
      "Operator: one destination with its feedback history (window over time) and the provider rule it falls under, and why",
    operationId: "adminDestination",
    auth: true,
    ok: { status: 200, schema: Admin.destination },
    errors: [401, 403, 404],
  },
  {
    method: "post",
    path: "/relay/flush",
    summary: "Operator: retry deferred mail now and revive dead destinations (postqueue -f)",
    operationId: "adminFlush",
    auth: true,
    body: FlushSchema,
    ok: { status: 200, schema: Admin.flush },
    errors: [400, 401, 403, 404, 422],
  },
  {
    method: "post",
    path: "/relay/suspensions",
    summary: "Operator: suspend a destination, tenant or transport for a TTL",
    operationId: "adminSuspend",
    auth: true,
    body: SuspendSchema,
    ok: { status: 201, schema: Admin.suspension },
    errors: [400, 401, 403, 404, 422],
  },
  {
    method: "get",
    path: "/relay/suspensions",
    summary: "Operator: suspensions in force",
    operationId: "adminSuspensions",
    auth: true,
    ok: { status: 200, schema: Admin.suspensions },
    errors: [401, 403],
  },
  {
    method: "delete",
    path: "/relay/suspensions/{target}/{name}",
    summary: "Operator: resume a suspended destination, tenant or transport",
    operationId: "adminResume",
    auth: true,
    query: ResumeQuerySchema,
    ok: { status: 200, schema: Admin.resumed },
    errors: [401, 403, 404, 422],
  },
  {
    method: "get",
    path: "/relay/settings",
    summary:
      "The tenant's defaults: one-click unsubscribe (true, {topic}, or null) and its daily quota of received mail",
    operationId: "getSettings",
    auth: true,
    ok: { status: 200, schema: SettingsBody },
    errors: [401],
  },
  {
    method: "patch",
    path: "/relay/settings",
    summary:
      "Set the tenant's default one-click unsubscribe (RFC 8058) for one-recipient emails, or its daily quota of received mail",
    operationId: "updateSettings",
    auth: true,
    body: SettingsSchema,
    ok: { status: 200, schema: SettingsBody },
    errors: [400, 401, 422],
  },
  {
    method: "get",
    path: "/relay/complaint-rate",
    summary:
      "The complaint rate (email.complained / email.delivered) of the tenant and of each sending domain over the last `days`, against COMPLAINT_RATE_THRESHOLD",
    operationId: "complaintRate",
    auth: true,
    query: ComplaintRateQuerySchema,
    ok: { status: 200, schema: ComplaintRateBody },
    errors: [401, 422],
  },
  {
    method: "delete",
    path: "/relay/complaint-rate/pause",
    summary: "Operator: lift the complaint-rate brake on a tenant's bulk mail",
    operationId: "liftComplaintBrake",
    auth: true,
    query: ComplaintRateQuerySchema,
    ok: {
      status: 200,
      schema: z.object({ object: z.literal("complaint_rate_pause"), tenant: z.string(), lifted: z.boolean() }),
    },
    errors: [401, 403, 422],
  },
  {
    method: "get",
    path: "/relay/policies",
    summary:
      "Operator: pickup policies in force (caps, rates, connect intervals, suspensions, reply-rule throttles) by transport and key",
    operationId: "adminPolicies",
    auth: true,
    ok: { status: 200, schema: Admin.policies },
    errors: [401, 403],
  },
  {
    method: "put",
    path: "/relay/policies/{key}",
    summary:
      "Operator: set a key's concurrency cap, rate and connect interval (tenant:, jobid:, bulk:, egress:, site:, transport:, dest: keys, or a configured combination joined by +)",
    operationId: "adminPutPolicy",
    auth: true,
    body: PolicyLimitsSchema,
    ok: { status: 200, schema: Admin.policies },
    errors: [400, 401, 403, 404, 422],
  },
  {
    method: "delete",
    path: "/relay/policies/{key}",
    summary: "Operator: remove a key's cap, rate and interval (a suspension stays)",
    operationId: "adminDeletePolicy",
    auth: true,
    ok: { status: 200, schema: Admin.policyDeleted },
    errors: [401, 403, 404, 422],
  },
  {
    method: "get",
    path: "/relay/warmup",
    summary: "Operator: IP warm-up plans (per egress: its day and today's caps per provider)",
    operationId: "adminWarmups",
    auth: true,
    ok: { status: 200, schema: Admin.warmups },
    errors: [401, 403],
  },
  {
    method: "put",
    path: "/relay/warmup/{egress}",
    summary: "Operator: create or replace an egress's warm-up plan (the default ramp when none is given)",
    operationId: "adminPutWarmup",
    auth: true,
    body: WarmupPlanSchema,
    ok: { status: 200, schema: Admin.warmup },
    errors: [400, 401, 403, 422],
  },
  {
    method: "post",
    path: "/relay/warmup/{egress}/advance",
    summary: "Operator: move a warm-up plan on (or back) by days",
    operationId: "adminAdvanceWarmup",
    auth: true,
    body: WarmupAdvanceSchema,
    ok: { status: 200, schema: Admin.warmup },
    errors: [400, 401, 403, 404, 422],
  },
  {
    method: "delete",
    path: "/relay/warmup/{egress}",
    summary: "Operator: end an egress's warm-up (its caps go)",
    operationId: "adminDeleteWarmup",
    auth: true,
    ok: { status: 200, schema: Admin.warmupDeleted },
    errors: [401, 403, 404, 422],
  },
  {
    method: "get",
    path: "/relay/providers",
    summary: "Operator: provider rules (MX host suffixes and the shape given to every domain hosted there)",
    operationId: "adminProviders",
    auth: true,
    ok: { status: 200, schema: Admin.providers },
    errors: [401, 403],
  },
  {
    method: "get",
    path: "/relay/providers/{name}",
    summary: "Operator: one provider rule",
    operationId: "adminProvider",
    auth: true,
    ok: { status: 200, schema: Admin.provider },
    errors: [401, 403, 404],
  },
  {
    method: "put",
    path: "/relay/providers/{name}",
    summary: "Operator: create or replace a provider rule",
    operationId: "adminPutProvider",
    auth: true,
    body: ProviderRuleBodySchema,
    ok: { status: 200, schema: Admin.provider },
    errors: [400, 401, 403, 422],
  },
  {
    method: "delete",
    path: "/relay/providers/{name}",
    summary: "Operator: delete a provider rule",
    operationId: "adminDeleteProvider",
    auth: true,
    ok: { status: 200, schema: Admin.providerDeleted },
    errors: [401, 403, 404],
  },
  {
    method: "get",
    path: "/relay/inbound",
    summary:
      "Operator: mail that came back through Email Routing (bounces, complaints, auto-replies, rejections) by day and kind",
    operationId: "adminInbound",
    auth: true,
    query: InboundQuerySchema,
    ok: { status: 200, schema: Admin.inbound },
    errors: [401, 403, 422],
  },
  {
    method: "get",
    path: "/relay/inbound/reports",
    summary:
      "Operator: the DSNs and ARF reports that came back, newest first, each with its verdict (acted, unauthenticated, mismatch, unmatched, ...) and its first 64 KiB",
    operationId: "adminInboundReports",
    auth: true,
    query: ReportsQuerySchema,
    ok: { status: 200, schema: Admin.reports },
    errors: [401, 403, 422],
  },
  {
    method: "get",
    path: "/relay/stats",
    summary: "Operator: delivered/bounced/deferred/failed per minute over a window",
    operationId: "adminStats",
    auth: true,
    query: StatsQuerySchema,
    ok: { status: 200, schema: Admin.stats },
    errors: [401, 403, 422],
  },
  {
    method: "get",
    path: "/relay/messages",
    summary: "Search messages by id, address, tag and state (a tenant key: its own mail)",
    operationId: "searchMessages",
    auth: true,
    query: SearchQuerySchema,
    ok: { status: 200, schema: Admin.search },
    errors: [401, 404, 422],
  },
  {
    method: "get",
    path: "/relay/messages/{id}",
    summary: "A message with its recipients and its event timeline",
    operationId: "getMessageDetail",
    auth: true,
    ok: { status: 200, schema: EmailBody.extend({ tenant: z.string(), events: Admin.messageEvents }) },
    errors: [401, 404],
  },
  {
    method: "get",
    path: "/relay/messages/{id}/events",
    summary: "A message's event timeline (attempts, SMTP responses)",
    operationId: "messageEvents",
    auth: true,
    query: EventsQuerySchema,
    ok: { status: 200, schema: Admin.events },
    errors: [401, 404, 422],
  },
  {
    method: "post",
    path: "/relay/messages/{id}/hold",
    summary: "Hold an email: no delivery until released (postsuper -h)",
    operationId: "holdEmail",
    auth: true,
    ok: { status: 200, schema: ControlBody },
    errors: [401, 404, 422],
  },
  {
    method: "post",
    path: "/relay/messages/{id}/release",
    summary: "Release a held email (postsuper -H)",
    operationId: "releaseEmail",
    auth: true,
    ok: { status: 200, schema: ControlBody },
    errors: [401, 404, 422],
  },
  {
    method: "post",
    path: "/relay/messages/{id}/requeue",
    summary: "Route an email's open recipients again and requeue them (postsuper -r)",
    operationId: "requeueEmail",
    auth: true,
    ok: { status: 200, schema: ControlBody },
    errors: [401, 404, 422],
  },
  {
    method: "post",
    path: "/relay/messages/{id}/cancel",
    summary: "Cancel an email's open recipients (optionally only at one domain), scheduled or not",
    operationId: "cancelEmailRecipients",
    auth: true,
    body: CancelOneSchema,
    ok: { status: 200, schema: ControlBody },
    errors: [401, 404, 422],
  },
  {
    method: "post",
    path: "/relay/messages/{id}/complaint",
    summary:
      "Report a feedback-loop complaint about a delivered recipient: email.complained, and the address is suppressed until removed",
    operationId: "reportComplaint",
    auth: true,
    body: ComplaintSchema,
    ok: {
      status: 200,
      schema: z.object({
        object: z.literal("complaint"),
        email_id: z.string(),
        recipient: z.string(),
        feedback_type: z.string(),
        duplicate: z.boolean(),
      }),
    },
    errors: [400, 401, 404, 422],
  },
  {
    method: "post",
    path: "/relay/complaints",
    summary:
      "Report a feedback-loop complaint as an ARF report (RFC 5965, the whole message as the body): email.complained for each delivered recipient it names, and the address suppressed until removed",
    operationId: "reportArf",
    auth: true,
    rawBody: "message/rfc822",
    ok: {
      status: 200,
      schema: z.object({
        object: z.literal("complaint"),
        email_id: z.string(),
        feedback_type: z.string(),
        recipients: z.array(
          z.object({ recipient: z.string(), result: z.enum(["ok", "duplicate", "no_recipient", "not_delivered"]) }),
        ),
      }),
    },
    errors: [401, 404, 413, 422],
  },
  {
    method: "post",
    path: "/relay/messages/cancel",
    summary: "Cancel open recipients by filter: domain, tag, tenant (operator keys)",
    operationId: "cancelByFilter",
    auth: true,
    body: CancelFilterSchema,
    ok: {
      status: 200,
      schema: z.object({
        object: z.literal("cancellation"),
        messages: z.number().int(),
        recipients: z.number().int(),
        has_more: z.boolean(),
      }),
    },
    errors: [400, 401, 403, 422],
  },
  {
    method: "get",
    path: "/relay/egress",
    summary: "Operator: egress pools, each member's health, and the latest suspensions, failovers and returns",
    operationId: "adminEgress",
    auth: true,
    ok: { status: 200, schema: EgressView },
    errors: [401, 403],
  },
  {
    method: "get",
    path: "/metrics",
    summary: "Operator: the relay's state in Prometheus' text format (docs/deliverability.md#metrics)",
    operationId: "metrics",
    auth: true,
    ok: { status: 200, schema: z.string(), media: "text/plain" },
    errors: [401, 403],
  },
  {
    method: "get",
    path: "/openapi.json",
    summary: "This document",
    operationId: "openapi",
    auth: true,
    ok: { status: 200, schema: z.object({ openapi: z.string() }).passthrough() },
    errors: [401],
  },
  ...RESEND_ROUTES,
];

function jsonSchema(s: Schema): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, { io: "input", unrepresentable: "any" }) as Record<
    string,
    unknown
  >;
  return rest;
}

const json = (s: Schema) => ({ "application/json": { schema: jsonSchema(s) } });

function operationOf(op: Operation) {
  const parameters: Record<string, unknown>[] = [];
  for (const m of op.path.matchAll(/\{(\w+)\}/g))
    parameters.push({ name: m[1], in: "path", required: true, schema: { type: "string" } });
  if (op.query) {
    for (const [name, schema] of Object.entries(op.query.shape))
      parameters.push({ name, in: "query", required: false, schema: jsonSchema(schema as Schema) });
  }
  for (const h of op.headers ?? [])
    parameters.push({
      name: h.name,
      in: "header",
      required: false,
      description: h.description,
      schema: jsonSchema(h.schema),
    });
  const media = op.ok.media ? { [op.ok.media]: { schema: { type: "string" } } } : null;
  const responses: Record<string, unknown> = {
    [String(op.ok.status)]: { description: "Success", content: media ?? json(op.ok.schema) },
  };
  for (const status of op.errors)
    responses[String(status)] =
      media && !op.ok.jsonErrors
        ? { description: "Error (a page)", content: media }
        : { description: "Error (Resend's error body)", content: json(ErrorBody) };
  return {
    operationId: op.operationId,
    summary: op.summary,
    ...(op.auth ? {} : { security: [] }),
    ...(parameters.length ? { parameters } : {}),
    ...(op.body ? { requestBody: { required: true, content: json(op.body) } } : {}),
    ...(op.rawBody
      ? { requestBody: { required: true, content: { [op.rawBody]: { schema: { type: "string" } } } } }
      : {}),
    responses,
  };
}

/** The OpenAPI 3.1 document. */
export function openApiDocument() {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of ROUTES) (paths[op.path] ??= {})[op.method] = operationOf(op);
  return {
    openapi: "3.1.0",
    info: {
      title: "Cohort mail relay API",
      version: "0.1.0",
      description: "Resend-compatible sending API; relay-only endpoints live under /relay/.",
    },
    servers: [{ url: "http://127.0.0.1:8787", description: "npm start" }],
    security: [{ bearer: [] }],
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer", description: "An API key (stored hashed)." } },
    },
    paths,
  };
}
