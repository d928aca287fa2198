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
 *       line of 0.3 %). A tenant key sees its own tenant; an operator key may name any.
 *
 * INVARIANTS
 *   Reads the tenant's events in the window through event_log's primary key (tenant_id, seq;
 *   seq is the event's time in µs) and each one's email by its primary key: the rows read grow
 *   with the tenant's mail in the window, never with anyone else's. Not on any mail's path.
 */
import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../app";
import { parseInput } from "../body";
import { RoleCache, scopeOf } from "./admin/operator";

/** The query of GET /relay/complaint-rate. */
export const ComplaintRateQuerySchema = z.object({
  days: z.coerce.number().int().min(1).max(90).default(7),
  tenant: z.string().min(1).max(200).optional(),
});

const Rate = z.object({ delivered: z.number().int(), complained: z.number().int(), rate: z.number() });
/** Its answer. */
export const ComplaintRateBody = z.object({
  object: z.literal("complaint_rate"), tenant: z.string(), days: z.number().int(), from: z.string(), threshold: z.number(),
  totals: Rate, domains: z.array(Rate.extend({ domain: z.string() })),
});

const RATE_SQL = `SELECT e.type AS type, lower(rtrim(substr(m.from_addr, instr(m.from_addr, '@') + 1), '> ')) AS domain, count(*) AS n
  FROM event_log e JOIN messages m ON m.id = e.email_id
  WHERE e.tenant_id = ?1 AND e.seq >= ?2 AND e.type IN ('email.delivered', 'email.complained')
  GROUP BY 1, 2`;

/** The threshold from the environment (see the header). */
export function complaintThreshold(env: Env): number {
  const t = Number(env.COMPLAINT_RATE_THRESHOLD);
  return Number.isFinite(t) && t > 0 && t < 1 ? t : 0.003;
}

const rate = (delivered: number, complained: number) => ({ delivered, complained, rate: delivered === 0 ? 0 : Math.round((complained / delivered) * 1e6) / 1e6 });

/** The route, mounted at /relay/complaint-rate. */
export function complaintRateRoutes() {
  const r = new Hono<AppEnv>();
  const roles = new RoleCache();
  r.get("/", async (c) => {
    const q = parseInput(ComplaintRateQuerySchema, c.req.query());
    const scope = await scopeOf(c, roles);
    const tenant = scope === null ? q.tenant ?? c.get("tenant") : c.get("tenant");
    const retentionDays = Number(c.env.MESSAGE_RETENTION_DAYS) > 0 ? Number(c.env.MESSAGE_RETENTION_DAYS) : q.days;
    const fromMs = Date.now() - Math.min(q.days, retentionDays) * 86_400_000;
    const rows = (await c.env.DB.prepare(RATE_SQL).bind(tenant, fromMs * 1000).all<{ type: string; domain: string; n: number }>()).results;
    const by = new Map<string, { d: number; c: number }>();
    for (const row of rows) {
      const cur = by.get(row.domain) ?? { d: 0, c: 0 };
      if (row.type === "email.delivered") cur.d += row.n;
      else cur.c += row.n;
      by.set(row.domain, cur);
    }
    const all = [...by.values()].reduce((t, x) => ({ d: t.d + x.d, c: t.c + x.c }), { d: 0, c: 0 });
    return c.json({
      object: "complaint_rate", tenant, days: q.days, from: new Date(fromMs).toISOString(), threshold: complaintThreshold(c.env),
      totals: rate(all.d, all.c), domains: [...by].sort(([a], [b]) => (a < b ? -1 : 1)).map(([domain, x]) => ({ domain, ...rate(x.d, x.c) })),
    });
  });
  return r;
}
