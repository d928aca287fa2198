/**
 * Request schemas of the /domains and /api-keys routes, kept apart from the routes so the OpenAPI
 * document can import them without the Workers runtime.
 */
import { z } from "zod";
import { domainName } from "../../domains/core/names";

const Label = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/i, "must be a DNS label");
export const CreateDomainSchema = z.object({
  // One way everywhere (domains/core/names.ts): case, trailing dot, IDN to A-labels; no public suffix.
  name: z
    .string()
    .min(3)
    .max(253)
    .transform((s, ctx) => {
      const r = domainName(s);
      if (r.ok) return r.name;
      ctx.addIssue({ code: "custom", message: r.why });
      return z.NEVER;
    }),
  region: z.enum(["us-east-1", "eu-west-1", "sa-east-1", "ap-northeast-1"]).optional(),
  custom_return_path: Label.optional(),
  open_tracking: z.boolean().optional(),
  click_tracking: z.boolean().optional(),
  tls: z.enum(["enforced", "opportunistic"]).optional(),
  capabilities: z
    .object({
      sending: z.enum(["enabled", "disabled"]).optional(),
      receiving: z.enum(["enabled", "disabled"]).optional(),
    })
    .optional(),
  tracking_subdomain: z.string().max(63).optional(),
});
/**
 * PATCH /domains/:id, every field the SDK's domains.update sends. Strict: an unknown field is a
 * 422, never ignored. What the relay does not do is refused by name (routes/domains.ts).
 */
export const UpdateDomainSchema = z
  .object({
    open_tracking: z.boolean().optional(),
    click_tracking: z.boolean().optional(),
    tls: z.enum(["enforced", "opportunistic"]).optional(),
    capabilities: z
      .object({
        sending: z.enum(["enabled", "disabled"]).optional(),
        receiving: z.enum(["enabled", "disabled"]).optional(),
      })
      .strict()
      .optional(),
    tracking_subdomain: z.string().max(63).optional(),
  })
  .strict();

export const CreateApiKeySchema = z.object({
  name: z.string().trim().min(1).max(50),
  permission: z.enum(["full_access", "sending_access"]).optional(),
  domain_id: z.string().min(1).max(64).optional(),
});

/** PATCH /api-keys/:id (Resend's apiKeys.update: a rename). */
export const UpdateApiKeySchema = z.object({ name: z.string().trim().min(1).max(50) });
