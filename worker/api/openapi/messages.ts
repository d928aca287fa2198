/**
 * The OpenAPI rows (document.ts ROUTES) of /relay/messages: search, one message with its
 * timeline, the queue controls (hold, release, requeue, cancel; postsuper's verbs), feedback-loop
 * complaints (one recipient, or an ARF report) and cancelling by filter.
 */
import { z } from "zod";
import type { Operation } from "./types";
import { CancelFilterSchema, CancelOneSchema, ComplaintSchema } from "../http/control-schemas";
import { AdminResponses as Admin } from "../routes/admin/responses";
import { EventsQuerySchema, SearchQuerySchema } from "../routes/admin/schemas";
import { EmailBody } from "./emails";

const ControlBody = z.object({
  object: z.literal("email"),
  id: z.string(),
  action: z.enum(["hold", "release", "requeue", "cancel"]),
  recipients: z.number().int(),
});

/** Search, inspect and control messages; report complaints. */
export const MESSAGE_ROUTES: Operation[] = [
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
      "Report a feedback-loop complaint as an ARF report (RFC 5965, the whole message as the body): " +
      "email.complained for each delivered recipient it names, and the address suppressed until removed",
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
];
