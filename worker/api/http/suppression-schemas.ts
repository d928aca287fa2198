/**
 * Request schemas of Resend's /suppressions routes (routes/resend-suppressions.ts), kept apart
 * from the routes so the OpenAPI document can import them without the Workers runtime.
 */
import { z } from "zod";

const Email = z.string().min(3).max(320);

/** POST /suppressions. */
export const ResendAddSuppressionSchema = z.object({ email: Email });

/** POST /suppressions/batch/add. */
export const BatchAddSuppressionsSchema = z.object({ emails: z.array(Email).min(1).max(1000) });

/** POST /suppressions/batch/remove: emails or ids, not both. */
export const BatchRemoveSuppressionsSchema = z.union([
  z.object({ emails: z.array(Email).min(1).max(1000), ids: z.undefined().optional() }),
  z.object({ ids: z.array(z.string().min(1).max(1000)).min(1).max(1000), emails: z.undefined().optional() }),
]);
