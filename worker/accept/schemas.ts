/**
 * What a submission looks like (zod): the request shapes of POST /emails, /emails/batch and
 * /relay/messages/raw, and the Idempotency-Key header.
 *
 * DESCRIPTION
 *   SendEmailSchema      POST /emails, Resend's field set (unknown fields are ignored, as Resend does).
 *   TemplatedSendSchema  POST /emails naming a stored template (`template: {id, variables}`):
 *                        `from` and `subject` may come from the template; `html` and `text` may not
 *                        be given (the template's are rendered).
 *   sendSchemaOf(value)  the schema a request body is checked against: TemplatedSendSchema when
 *                        it has a `template`, else SendEmailSchema.
 *   BatchSchema          POST /emails/batch: 1–100 SendEmail objects, attachments allowed.
 *   BatchValidationSchema the `x-batch-validation` header: strict (default) | permissive.
 *   RawMessageSchema     POST /relay/messages/raw: envelope sender, recipients and the message.
 *   IdempotencyKeySchema the Idempotency-Key header: 1–256 printable ASCII characters.
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
  /** Resend's topic: the email is bulk mail of that topic (worker/topics/topics.ts). */
  topic_id: z.string().min(1).max(64).nullable().optional(),
});

/** A validated send request. */
export type SendEmail = z.infer<typeof SendEmailSchema>;

const WithTemplate = z.undefined({ error: "cannot be used with `template` (the template's is rendered)" });

/** POST /emails with a stored template (see the header). */
export const TemplatedSendSchema = SendEmailSchema.extend({
  from: z.string().min(1).optional(),
  subject: z.string().optional(),
  html: WithTemplate.optional(),
  text: WithTemplate.optional(),
  template: z.object({
    id: z.string().min(1).max(256),
    variables: z.record(z.string().max(100), z.union([z.string().max(100_000), z.number()])).optional(),
  }),
});

/** A validated send request naming a template. */
export type TemplatedSend = z.infer<typeof TemplatedSendSchema>;

/** A send request of either kind. */
export type SendRequest = SendEmail | TemplatedSend;

/** The schema a send request body is checked against (see the header). */
export function sendSchemaOf(value: unknown): typeof SendEmailSchema | typeof TemplatedSendSchema {
  return value !== null && typeof value === "object" && (value as { template?: unknown }).template !== undefined
    ? TemplatedSendSchema
    : SendEmailSchema;
}

/** POST /emails/batch. */
export const BatchSchema = z
  .array(z.unknown())
  .min(1, "must contain at least one email")
  .max(100, "must contain at most 100 emails");

/** The `x-batch-validation` header. */
export const BatchValidationSchema = z.enum(["strict", "permissive"]).default("strict");

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
export const IdempotencyKeySchema = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[\x21-\x7e]+$/, "must be printable ASCII without spaces");
