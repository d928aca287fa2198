/**
 * The query of GET /emails/metrics (Resend's emails.metrics), kept apart from the route so the
 * OpenAPI document can import it without the Workers runtime.
 */
import { z } from "zod";
import { METRICS } from "../../metrics/core/metrics";

const list = <T extends z.ZodType<unknown, string>>(item: T) =>
  z
    .string()
    .optional()
    .transform((s) =>
      s
        ? s
            .split(",")
            .map((x) => x.trim())
            .filter(Boolean)
        : undefined,
    )
    .pipe(z.array(item).optional());

/** GET /emails/metrics query. */
export const MetricsQuerySchema = z.object({
  start_date: z.string().min(1).optional(),
  end_date: z.string().min(1).optional(),
  timezone: z.string().min(1).max(64).default("UTC"),
  granularity: z.enum(["hourly", "daily", "weekly", "monthly"]).default("daily"),
  metrics: list(z.enum(METRICS)),
  dimensions: list(z.enum(["period", "domain", "email", "broadcast"])),
  domain_id: list(z.string().min(1).max(64)),
  email_id: list(z.string().min(1).max(64)),
  broadcast_id: list(z.string().min(1).max(64)),
});
