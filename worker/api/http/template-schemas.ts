/**
 * Request schemas of /templates, /topics and the contacts' topic calls (Resend's shapes), kept
 * apart from the routes so the OpenAPI document can import them without the Workers runtime.
 */
import { z } from "zod";

const Variable = z.object({
  key: z.string().min(1).max(100),
  type: z.enum(["string", "number"]),
  fallback_value: z.union([z.string().max(2000), z.number(), z.null()]).optional(),
});
const ReplyTo = z.union([z.string().min(1).max(998), z.array(z.string().min(1).max(998)).max(50)]);
const Alias = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9_.-]+$/, "must be letters, digits, _, . or -");

/** POST /templates. */
export const CreateTemplateSchema = z.object({
  name: z.string().trim().min(1).max(200),
  html: z.string().min(1).max(1_000_000),
  subject: z.string().max(998).nullable().optional(),
  text: z.string().max(1_000_000).nullable().optional(),
  alias: Alias.nullable().optional(),
  from: z.string().min(1).max(998).nullable().optional(),
  reply_to: ReplyTo.nullable().optional(),
  variables: z.array(Variable).optional(),
});

/** PATCH /templates/:id: the fields given replace the draft's (null clears an optional one). */
export const UpdateTemplateSchema = CreateTemplateSchema.partial().extend({
  name: z.string().trim().min(1).max(200).optional(),
});

/** GET /templates and the other cursor lists: limit 1–100 (default 20), after | before. */
export const PageQuerySchema = z
  .object({
    limit: z.coerce.number().int().min(1).max(100).default(20),
    after: z.string().min(1).optional(),
    before: z.string().min(1).optional(),
  })
  .refine((q) => !(q.after && q.before), { message: "`after` and `before` cannot be used together", path: ["after"] });

/** POST /topics. */
export const CreateTopicSchema = z.object({
  name: z.string().trim().min(1).max(50),
  description: z.string().max(200).optional(),
  default_subscription: z.enum(["opt_in", "opt_out"]),
});

/** PATCH /topics/:id (the default subscription cannot be changed, as at Resend). */
export const UpdateTopicSchema = z.object({
  id: z.string().optional(),
  name: z.string().trim().min(1).max(50).optional(),
  description: z.string().max(200).optional(),
  default_subscription: z.never({ error: "cannot be changed after the topic is created" }).optional(),
});

/** PATCH /contacts/:id_or_email/topics: the subscriptions to set. */
export const ContactTopicsSchema = z
  .array(z.object({ id: z.string().min(1).max(64), subscription: z.enum(["opt_in", "opt_out"]) }))
  .min(1)
  .max(100);

/** POST /relay/templates/:id/preview. */
export const PreviewTemplateSchema = z.object({
  variables: z.record(z.string().max(100), z.union([z.string().max(100_000), z.number()])).optional(),
  version: z.enum(["draft", "published"]).default("draft"),
});
