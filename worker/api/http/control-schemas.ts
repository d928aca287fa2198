/**
 * Request schemas of the message control routes (routes/control.ts), kept apart from the routes
 * so the OpenAPI document can import them without the Workers runtime.
 */
import { COMPLAINT_FEEDBACK_TYPES } from "../../mail/arf";
import { z } from "zod";

/** A domain name: at most 253 octets, dot-separated labels of 1 to 63 (no spaces, no @); compared lower-case. */
const Domain = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[^\s@.]{1,63}(\.[^\s@.]{1,63})*\.?$/, "must be a domain name (labels of 1 to 63 characters, no @)")
  .transform((d) => d.toLowerCase().replace(/\.$/, ""));

/** A tag to match: "name:value" (as search and the CLI write it) or Resend's {name, value}. */
const TagFilter = z.union([
  z.object({ name: z.string().min(1).max(256), value: z.string().min(1).max(256) }).strict(),
  z
    .string()
    .max(513)
    .regex(/^[^:]{1,256}:.{1,256}$/, 'must be "name:value"')
    .transform((s) => {
      const at = s.indexOf(":");
      return { name: s.slice(0, at), value: s.slice(at + 1) };
    }),
]);

/**
 * The body of POST /relay/messages/cancel. Strict: an unknown field (a misspelt filter) is an
 * error, never a wider cancellation than was asked for.
 */
export const CancelFilterSchema = z
  .object({
    domain: Domain.optional(),
    tag: TagFilter.optional(),
    tenant: z.string().min(1).max(128).optional(),
    limit: z.number().int().min(1).max(1000).default(500),
  })
  .strict()
  .refine((f) => f.domain !== undefined || f.tag !== undefined || f.tenant !== undefined, {
    message: "give at least one of domain, tag, tenant",
  });

/** ARF Feedback-Types that are complaints (RFC 5965 §7.3); "not-spam" (RFC 6430) is not one. */
export { COMPLAINT_FEEDBACK_TYPES };

/** The body of POST /relay/messages/:id/complaint: who complained, and the ARF Feedback-Type (RFC 5965). */
export const ComplaintSchema = z.object({
  recipient: z
    .string()
    .min(3)
    .max(320)
    .regex(/^[^\s@<>]+@[^\s@<>]+$/, "must be an email address"),
  feedback_type: z.enum(COMPLAINT_FEEDBACK_TYPES).default("abuse"),
});

/** The body of POST /relay/messages/:id/cancel (optional; strict, as above). */
export const CancelOneSchema = z.object({ domain: Domain.optional() }).strict();
