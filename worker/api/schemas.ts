/**
 * Request schemas of the HTTP API (zod), named and exported so an OpenAPI document can be
 * generated from them later.
 *
 * DESCRIPTION
 *   SendEmailSchema      POST /emails, Resend's field set (unknown fields are ignored, as Resend does).
 *   BatchSchema          POST /emails/batch: 1–100 SendEmail objects, attachments allowed.
 *   BatchValidationSchema the `x-batch-validation` header: strict (default) | permissive.
 *   UpdateEmailSchema    PATCH /emails/:id: `scheduled_at`.
 *   ListQuerySchema      GET /emails: `limit` 1–100 (default 20), `after` | `before` (email ids).
 *   RawMessageSchema     POST /relay/messages/raw: envelope sender, recipients and the message.
 *   IdempotencyKeySchema the Idempotency-Key header: 1–256 printable ASCII characters.
 *   describeIssue        the first zod issue as a Resend error name and message.
 *
 * INVARIANTS
 *   Schemas check shape and bounds only; addresses, headers and MIME are validated by
 *   worker/mail's composer, which names the offending field.
 */
import { z } from "zod";

const Address = z.string().min(1).max(998);
const AddressList = z.union([Address, z.array(Address).min(1)]);
const TagToken = z.string().regex(/^[A-Za-z0-9_-]{1,256}$/, "must be 1–256 characters of A–Z, a–z, 0–9, _ or -");

/** An attachment: base64 `content` (or a `path`, which this relay does not fetch). */
export const AttachmentSchema = z.object({
  content: z.string().optional(),
  filename: z.string().max(255).optional(),
  path: z.string().optional(),
  content_type: z.string().max(255).optional(),
  content_id: z.string().max(255).optional(),
});

/** A tag: name and value of [A-Za-z0-9_-]. */
export const TagSchema = z.object({ name: TagToken, value: TagToken });

/** POST /emails. */
export const SendEmailSchema = z.object({
  from: z.string().min(1),
  to: AddressList,
  subject: z.string(),
  cc: AddressList.optional(),
  bcc: AddressList.optional(),
  reply_to: AddressList.optional(),
  html: z.string().optional(),
  text: z.string().optional(),
  headers: z.record(z.string(), z.string()).optional(),
  attachments: z.array(AttachmentSchema).max(100).optional(),
  tags: z.array(TagSchema).max(50).optional(),
  scheduled_at: z.string().min(1).optional(),
  /**
   * A relay extension: List-Unsubscribe (a signed https link, and a mailto on the return-path
   * domain when there is one) with List-Unsubscribe-Post (RFC 8058), for a one-recipient email;
   * false: not even the tenant's default (PATCH /relay/settings).
   */
  unsubscribe: z.union([z.boolean(), z.object({ topic: TagToken.optional() }).strict()]).optional(),
});

/** A validated send request. */
export type SendEmail = z.infer<typeof SendEmailSchema>;

/** POST /emails/batch. */
export const BatchSchema = z.array(z.unknown()).min(1, "must contain at least one email").max(100, "must contain at most 100 emails");

/** The `x-batch-validation` header. */
export const BatchValidationSchema = z.enum(["strict", "permissive"]).default("strict");

/** PATCH /emails/:id. */
export const UpdateEmailSchema = z.object({ scheduled_at: z.string().min(1) });

/** GET /emails query. */
export const ListQuerySchema = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  after: z.string().optional(),
  before: z.string().optional(),
}).refine((q) => !(q.after && q.before), { message: "`after` and `before` cannot be used together", path: ["after"] });

/** POST /relay/messages/raw. */
export const RawMessageSchema = z.object({
  mail_from: z.string().max(998),
  rcpt_to: AddressList,
  message: z.string().min(1),
  encoding: z.enum(["utf8", "base64"]).default("utf8"),
  tags: z.array(TagSchema).max(50).optional(),
  scheduled_at: z.string().min(1).optional(),
});

/** A validated raw submission. */
export type RawMessage = z.infer<typeof RawMessageSchema>;

/** The Idempotency-Key header. */
export const IdempotencyKeySchema = z.string().min(1).max(256).regex(/^[\x21-\x7e]+$/, "must be printable ASCII without spaces");

/** The first issue of a failed parse as a Resend error name and a message naming the field. */
export function describeIssue(error: z.ZodError, input: unknown): { name: "missing_required_field" | "validation_error"; message: string } {
  const issue = error.issues[0];
  if (!issue) return { name: "validation_error", message: "Invalid request." };
  const path = issue.path.map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join("");
  if ((issue.code === "invalid_type" || issue.code === "invalid_union") && path !== "" && valueAt(input, issue.path) === undefined) {
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
const WebhookEventSchema = z.enum(["email.sent", "email.delivered", "email.delivery_delayed", "email.bounced", "email.failed", "email.suppressed", "email.canceled", "email.complained", "email.unsubscribed", "relay.destination.throttled", "relay.complaint_rate.exceeded"]);

/** POST /webhooks (Resend's shape). */
export const CreateWebhookSchema = z.object({ endpoint: z.string().min(1).max(2048), events: z.array(WebhookEventSchema).min(1) });

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
export const SuppressionScopeSchema = z.union([z.literal("all"), z.literal("bulk"), z.string().regex(/^bulk:[A-Za-z0-9_-]{1,256}$/, "must be all, bulk or bulk:<topic>")]);

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
