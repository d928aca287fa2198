/**
 * What a submission looks like (zod): the request shapes of POST /emails, /emails/batch and
 * /relay/messages/raw, and the Idempotency-Key header.
 *
 * DESCRIPTION
 *   SendEmailSchema      POST /emails, Resend's field set (unknown fields are ignored, as Resend does).
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
});

/** A validated send request. */
export type SendEmail = z.infer<typeof SendEmailSchema>;

/** POST /emails/batch. */
export const BatchSchema = z.array(z.unknown()).min(1, "must contain at least one email").max(100, "must contain at most 100 emails");

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
export const IdempotencyKeySchema = z.string().min(1).max(256).regex(/^[\x21-\x7e]+$/, "must be printable ASCII without spaces");
