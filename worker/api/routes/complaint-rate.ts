/**
 * The complaint rate of a tenant and of each of its sending domains over a rolling window.
 *
 * DESCRIPTION
 *   GET /relay/complaint-rate?days=7[&tenant=]  { object: "complaint_rate", tenant, days, from,
 *       threshold, totals: {delivered, complained, rate}, domains: [{domain, delivered,
 *       complained, rate}] }: email.delivered and email.complained events since `from` (now minus
 *       `days`, at most MESSAGE_RETENTION_DAYS back, since older events are gone), by the From
 *       domain of their email; rate = complained / delivered (0 when nothing was delivered).
 *       `threshold` is COMPLAINT_RATE_THRESHOLD (default 0.003: Gmail's and Yahoo's bulk-sender
 *       line of 0.3 %); `bulk_paused_until` is the complaint-rate brake's (api/complaint-brake.ts),
 *       or null. A tenant key sees its own tenant; an operator key may name any.
 *   DELETE /relay/complaint-rate/pause?tenant=  (operator) lifts the brake.
 *
 * INVARIANTS
 *   Reads the tenant's events in the window through event_log's primary key (tenant_id, seq;
 *   seq is the event's time in µs) and each one's email by its primary key: the rows read grow
 *   with the tenant's mail in the window, never with anyone else's. Not on any mail's path.
 */
import { Hono } from "hono";
import { z } from "zod";
import { type AppEnv } from "../http/context";
import { parseInput } from "../http/body";
import { RoleCache, scopeOf } from "../http/operator";
import {
  complaintCounts,
  complaintRate,
  complaintThreshold,
  liftBrake,
  pausedUntil,
  sumCounts,
  windowStart,
} from "../../policy/complaint-brake";
import { ApiError } from "../../model/errors";

/** The query of GET /relay/complaint-rate. */
export const ComplaintRateQuerySchema = z.object({
  days: z.coerce.number().int().min(1).max(90).default(7),
  tenant: z.string().min(1).max(200).optional(),
});

const Rate = z.object({ delivered: z.number().int(), complained: z.number().int(), rate: z.number() });
/** Its answer. */
export const ComplaintRateBody = z.object({
  object: z.literal("complaint_rate"),
  tenant: z.string(),
  days: z.number().int(),
  from: z.string(),
  threshold: z.number(),
  bulk_paused_until: z.string().nullable(),
  totals: Rate,
  domains: z.array(Rate.extend({ domain: z.string() })),
});

const rate = (delivered: number, complained: number) => ({
  delivered,
  complained,
  rate: complaintRate(delivered, complained),
});

/** The route, mounted at /relay/complaint-rate. */
export function complaintRateRoutes() {
  const r = new Hono<AppEnv>();
  const roles = new RoleCache();
  r.get("/", async (c) => {
    const q = parseInput(ComplaintRateQuerySchema, c.req.query());
    const scope = await scopeOf(c, roles);
    const tenant = scope === null ? (q.tenant ?? c.get("tenant")) : c.get("tenant");
    const fromMs = windowStart(c.env, q.days, Date.now());
    const by = await complaintCounts(c.env.DB, tenant, fromMs);
    const all = sumCounts(by);
    const paused = await pausedUntil(c.env.DB, tenant, Date.now());
    return c.json({
      object: "complaint_rate",
      tenant,
      days: q.days,
      from: new Date(fromMs).toISOString(),
      threshold: complaintThreshold(c.env),
      bulk_paused_until: paused === null ? null : new Date(paused).toISOString(),
      totals: rate(all.d, all.c),
      domains: [...by].sort(([a], [b]) => (a < b ? -1 : 1)).map(([domain, x]) => ({ domain, ...rate(x.d, x.c) })),
    });
  });
  r.delete("/pause", async (c) => {
    if ((await scopeOf(c, roles)) !== null)
      throw new ApiError(403, "restricted_api_key", "Only an operator key lifts the complaint-rate brake.");
    const tenant = parseInput(ComplaintRateQuerySchema, c.req.query()).tenant ?? c.get("tenant");
    await liftBrake(c.env, tenant);
    return c.json({ object: "complaint_rate_pause", tenant, lifted: true });
  });
  return r;
}
