/**
 * Request schemas of the message control routes (routes/control.ts), kept apart from the routes
 * so the OpenAPI document can import them without the Workers runtime.
 */
import { z } from "zod";

const Domain = z.string().min(1).max(253).regex(/^[^\s@]+$/, "must be a domain without @").transform((d) => d.toLowerCase());

/** The body of POST /relay/messages/cancel. */
export const CancelFilterSchema = z.object({
  domain: Domain.optional(),
  tag: z.object({ name: z.string().min(1).max(256), value: z.string().min(1).max(256) }).optional(),
  tenant: z.string().min(1).max(128).optional(),
  limit: z.number().int().min(1).max(1000).default(500),
}).refine((f) => f.domain !== undefined || f.tag !== undefined || f.tenant !== undefined, { message: "give at least one of domain, tag, tenant" });

/** ARF Feedback-Types that are complaints (RFC 5965 §7.3); "not-spam" (RFC 6430) is not one. */
export const COMPLAINT_FEEDBACK_TYPES = ["abuse", "fraud", "virus", "other"] as const;

/** The body of POST /relay/messages/:id/complaint: who complained, and the ARF Feedback-Type (RFC 5965). */
export const ComplaintSchema = z.object({
  recipient: z.string().min(3).max(320).regex(/^[^\s@<>]+@[^\s@<>]+$/, "must be an email address"),
  feedback_type: z.enum(COMPLAINT_FEEDBACK_TYPES).default("abuse"),
});

/** The body of POST /relay/messages/:id/cancel (optional). */
export const CancelOneSchema = z.object({ domain: Domain.optional() });

