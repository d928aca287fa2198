/**
 * The OpenAPI rows (document.ts ROUTES) of webhook endpoints and what they are sent: the
 * endpoints, the event feed, the dead letters, replays and the signing-secret rotation.
 */
import { z } from "zod";
import type { Operation } from "./types";
import { CreateWebhookSchema, UpdateWebhookSchema, WebhookListQuerySchema } from "../http/schemas";
import { DeadLetterQuerySchema, EventFeedQuerySchema, ReplaySchema } from "../routes/events";

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

/** Webhook endpoints, the event feed, dead letters and replays. */
export const WEBHOOK_ROUTES: Operation[] = [
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
];
