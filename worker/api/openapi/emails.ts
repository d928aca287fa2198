/**
 * The OpenAPI rows (document.ts ROUTES) of sending and reading emails: POST /emails and its batch,
 * the list, one email with its recipients' states, rescheduling and cancelling, the raw relay
 * submission, and GET /emails/metrics. Also the email shapes other rows reuse (EmailBody, for
 * /relay/messages/{id} in messages.ts).
 *
 * INVARIANTS
 *   A submission takes the Idempotency-Key header; an accepted message answers its id, with the
 *   compliance checks' warnings when there are any.
 */
import { z } from "zod";
import type { Operation } from "./types";
import { ListQuerySchema, UpdateEmailSchema } from "../http/schemas";
import { MetricsQuerySchema } from "../http/metrics-schemas";
import {
  BatchValidationSchema,
  IdempotencyKeySchema,
  RawMessageSchema,
  SendEmailSchema,
  TemplatedSendSchema,
} from "../../accept/schemas";
import { METRICS } from "../../metrics/core/metrics";

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
      "Why it waits: in_flight, window_full, destination_dead, rate_delay, suspended, policy_concurrency, " +
        "rate_limit, transport_dead, process_limit, queued, retry, scheduled, held, suppressed",
    ),
  blocked_until: z.string().nullable().describe("Until when it waits, when known"),
});
export const EmailBody = z.object({
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

const idempotency = {
  name: "Idempotency-Key",
  schema: IdempotencyKeySchema,
  description: "Repeat-safe submission: kept 24 h; same key and payload answers the first response.",
};

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

/** Send, list, read, reschedule and cancel emails; relay a composed message. */
export const EMAIL_ROUTES: Operation[] = [
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
];

/** Delivery, bounce, complaint and unsubscribe counts (Resend's emails.metrics). */
export const EMAIL_METRICS_ROUTES: Operation[] = [
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
];
