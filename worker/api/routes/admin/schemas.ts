/**
 * Request schemas (zod) of the admin API under /relay/: they validate the input and generate
 * the OpenAPI document's parameters (openapi/admin.ts). Response shapes are responses.ts's.
 *
 * DESCRIPTION
 *   FlushSchema           POST /relay/flush: { transport? } (every transport when absent).
 *   SuspendSchema         POST /relay/suspensions: { target, transport?, name, ttl_seconds }.
 *   ResumeQuerySchema     DELETE /relay/suspensions/:target/:name?transport=.
 *   SearchQuerySchema     GET /relay/messages: id, address, tag (name or name:value), state,
 *                         tenant (operators only), limit 1–100 (default 20), after.
 *   StatsQuerySchema      GET /relay/stats: window in minutes 1–1440 (default 60).
 *   InboundQuerySchema    GET /relay/inbound: days 1–90 (default 7).
 *   ReportsQuerySchema    GET /relay/inbound/reports: days 1–90 (default 7), verdict, limit 1–100
 *                         (default 50), before (ISO 8601, for the next page).
 *   EventsQuerySchema     GET /relay/messages/:id/events: limit 1–1000 (default 500).
 */
import { z } from "zod";

const Name = z.string().min(1).max(255).regex(/^\S+$/, "must not contain spaces");

/** POST /relay/flush. */
export const FlushSchema = z.object({ transport: Name.optional() });

/** What a suspension applies to. */
/** A provider rule (worker/net/core/providers.ts), as PUT /relay/providers/:name takes it (the name from the path) and the routes show it. */
export const ProviderRuleBodySchema = z.object({
  mx: z.array(z.string()).min(1).max(20).describe('MX host suffixes, e.g. ".google.com"'),
  window: z
    .object({
      initial: z.number().int().min(1).max(1000).optional(),
      limit: z.number().int().min(1).max(1000).optional(),
    })
    .optional()
    .describe(
      "each domain's window starts at initial and stays at most limit; limit also caps the provider's sessions",
    ),
  messages_per_session: z.number().int().min(1).max(100_000).optional(),
  recipients_per_message: z.number().int().min(1).max(1000).optional(),
  rate: z.string().optional().describe('deliveries per interval to the whole provider, e.g. "300/m"'),
  require_tls: z.boolean().optional(),
  sources: z.record(z.string(), z.string()).optional().describe("where each value comes from, by field name"),
});

export const SuspensionTargetSchema = z.enum(["destination", "tenant", "transport", "site", "egress", "jobid", "bulk"]);

/** POST /relay/suspensions. */
export const SuspendSchema = z.object({
  target: SuspensionTargetSchema,
  transport: Name.optional().describe("destination: its transport (default DEFAULT_TRANSPORT)"),
  name: Name.describe(
    "destination queue (nexthop), tenant id, transport name, site (MX host group or provider rule)," +
      " egress id, campaign (<tenant>/<campaign tag>) or tenant (bulk: its mail with one-click unsubscribe)",
  ),
  ttl_seconds: z
    .number()
    .int()
    .min(1)
    .max(30 * 86_400),
});

/** DELETE /relay/suspensions/:target/:name query. */
export const ResumeQuerySchema = z.object({ transport: Name.optional() });

/** The recipient states search accepts. */
export const StateSchema = z.enum([
  "incoming",
  "ready",
  "active",
  "deferred",
  "delivered",
  "bounced",
  "expired",
  "suppressed",
  "cancelled",
]);

/** GET /relay/messages. */
export const SearchQuerySchema = z.object({
  id: z.string().min(1).max(64).optional(),
  address: z.string().min(3).max(320).optional(),
  tag: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,256}(:[A-Za-z0-9_-]{1,256})?$/, "must be name or name:value")
    .optional(),
  state: StateSchema.optional(),
  tenant: z.string().min(1).max(64).optional().describe("operators only: one tenant"),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  after: z.string().min(1).max(64).optional(),
});

/** GET /relay/stats. */
export const StatsQuerySchema = z.object({ window: z.coerce.number().int().min(1).max(1440).default(60) });

/** GET /relay/inbound. */
export const InboundQuerySchema = z.object({ days: z.coerce.number().int().min(1).max(90).default(7) });

/** GET /relay/inbound/reports. */
export const ReportsQuerySchema = z.object({
  days: z.coerce.number().int().min(1).max(90).default(7),
  verdict: z
    .enum(["acted", "duplicate", "mismatch", "not_delivered", "unauthenticated", "unmatched", "info"])
    .optional(),
  limit: z.coerce.number().int().min(1).max(100).default(50),
  before: z.string().datetime({ offset: true }).optional(),
});

/** GET /relay/messages/:id/events. */
export const EventsQuerySchema = z.object({ limit: z.coerce.number().int().min(1).max(1000).default(500) });
