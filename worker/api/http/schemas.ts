/**
 * Request schemas of the HTTP API (zod), named and exported so an OpenAPI document can be
 * generated from them later.
 *
 * DESCRIPTION
 *   (The submission's own shapes, POST /emails, /emails/batch and /relay/messages/raw, are
 *   worker/accept/schemas.ts.)
 *   UpdateEmailSchema    PATCH /emails/:id: `scheduled_at`.
 *   ListQuerySchema      GET /emails: `limit` 1–100 (default 20), `after` | `before` (email ids).
 *   describeIssue        the first zod issue as a Resend error name and message.
 */
import { z } from "zod";

/** PATCH /emails/:id. */
export const UpdateEmailSchema = z.object({ scheduled_at: z.string().min(1) });

/** GET /emails query. */
export const ListQuerySchema = z
  .object({
    limit: z.coerce.number().int().min(1).max(100).default(20),
    after: z.string().optional(),
    before: z.string().optional(),
  })
  .refine((q) => !(q.after && q.before), { message: "`after` and `before` cannot be used together", path: ["after"] });

/** The first issue of a failed parse as a Resend error name and a message naming the field. */
export function describeIssue(
  error: z.ZodError,
  input: unknown,
): { name: "missing_required_field" | "validation_error"; message: string } {
  const issue = error.issues[0];
  if (!issue) return { name: "validation_error", message: "Invalid request." };
  const path = issue.path
    .map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`))
    .join("");
  if (
    (issue.code === "invalid_type" || issue.code === "invalid_union") &&
    path !== "" &&
    valueAt(input, issue.path) === undefined
  ) {
    return { name: "missing_required_field", message: `Missing \`${path}\` field.` };
  }
  const why = issue.code === "invalid_union" ? "expected a string or an array of strings" : issue.message;
  return { name: "validation_error", message: path ? `Invalid \`${path}\`: ${why}` : why };
}

function valueAt(input: unknown, path: PropertyKey[]): unknown {
  let cur = input;
  for (const p of path) {
    if (cur === null || typeof cur !== "object") return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[p];
  }
  return cur;
}

/** The event types a webhook endpoint can subscribe to (the ones this relay emits). */
const WebhookEventSchema = z.enum([
  "email.sent",
  "email.delivered",
  "email.delivery_delayed",
  "email.bounced",
  "email.failed",
  "email.suppressed",
  "email.canceled",
  "email.complained",
  "email.unsubscribed",
  "email.received",
  "relay.destination.throttled",
  "relay.complaint_rate.exceeded",
]);

/** POST /webhooks (Resend's shape). */
export const CreateWebhookSchema = z.object({
  endpoint: z.string().min(1).max(2048),
  events: z.array(WebhookEventSchema).min(1),
});

/** PATCH /webhooks/:id. */
export const UpdateWebhookSchema = z.object({
  endpoint: z.string().min(1).max(2048).optional(),
  events: z.array(WebhookEventSchema).min(1).optional(),
  status: z.enum(["enabled", "disabled"]).optional(),
});

/** GET /webhooks query. */
export const WebhookListQuerySchema = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  after: z.string().optional(),
  before: z.string().optional(),
});

/** GET /relay/suppressions query. */
/** A suppression's scope (migrations/0014): "all" of the tenant's mail, its "bulk" mail (one-click unsubscribe), or its bulk mail of one topic. */
export const SuppressionScopeSchema = z.union([
  z.literal("all"),
  z.literal("bulk"),
  z.string().regex(/^bulk:[A-Za-z0-9_-]{1,256}$/, "must be all, bulk or bulk:<topic>"),
]);

export const SuppressionListQuerySchema = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(50),
  after: z.string().optional(),
  address: z.string().optional(),
});

/** DELETE /relay/suppressions/:address: one scope's entry, or (without) every entry of the address. */
export const RemoveSuppressionQuerySchema = z.object({ scope: SuppressionScopeSchema.optional() });

/** POST /relay/suppressions. */
export const AddSuppressionSchema = z.object({
  address: z.string().min(3).max(320),
  scope: SuppressionScopeSchema.default("all"),
  reason: z.string().min(1).max(64).default("manual"),
  expires_at: z.string().min(1).optional(),
});
