/**
 * Resend's emails.metrics: a tenant's delivery, bounce, complaint and unsubscribe counts and
 * rates over a time range, in all, by period and by sending domain.
 *
 * DESCRIPTION
 *   GET /emails/metrics?start_date=&end_date=&timezone=&granularity=&metrics=&dimensions=&domain_id=
 *       → { object: "metrics", start_date, end_date, metrics, dimensions, granularity, totals,
 *       data? }. end_date defaults to now, start_date to six days before it (no earlier than
 *       MESSAGE_RETENTION_DAYS back: older events are gone); metrics to all of them; dimensions to
 *       none (totals only). domain_id keeps the mail of those sending domains. The counts are the
 *       events pushed for the tenant's mail in the range (metrics/email-metrics.ts reads them by
 *       primary key, core/metrics.ts folds them); what each metric means is core/metrics.ts's.
 *
 * ERRORS
 *   422 validation_error for a bad date, an end before the start, an unknown zone or metric;
 *   422 for the `email` and `broadcast` dimensions and the email_id and broadcast_id filters,
 *   which the relay does not break metrics down by (it has no broadcasts).
 */
import { Hono } from "hono";
import { listDomains } from "../../db/domains";
import { foldMetrics, METRICS, validZone } from "../../metrics/core/metrics";
import { hourlyCounts } from "../../metrics/email-metrics";
import { type AppEnv } from "../http/context";
import { parseInput } from "../http/body";
import { ApiError } from "../../model/errors";
import { settingsOf } from "../../settings/settings";
import { MetricsQuerySchema } from "../http/metrics-schemas";

const DAY = 86_400_000;
const bad = (m: string) => new ApiError(422, "validation_error", m);

function dateOf(s: string | undefined, name: string, fallback: number): number {
  if (s === undefined) return fallback;
  const t = Date.parse(s);
  if (!Number.isFinite(t)) throw bad(`Invalid \`${name}\`: expected an ISO 8601 date or date-time.`);
  return t;
}

/** The /emails/metrics route (mounted behind the API key middleware, before /emails). */
export function emailMetricsRoutes() {
  const r = new Hono<AppEnv>();
  r.get("/", async (c) => {
    const q = parseInput(MetricsQuerySchema, c.req.query());
    if (q.dimensions?.includes("email") || q.dimensions?.includes("broadcast") || q.email_id || q.broadcast_id) {
      throw bad(
        "The `email` and `broadcast` dimensions and the `email_id` and `broadcast_id` filters are not supported: " +
          "this relay breaks metrics down by period and by domain.",
      );
    }
    if (!validZone(q.timezone))
      throw bad(`Invalid \`timezone\`: ${JSON.stringify(q.timezone)} is not an IANA time zone.`);
    const now = Date.now();
    const end = dateOf(q.end_date, "end_date", now);
    const start = Math.max(dateOf(q.start_date, "start_date", end - 6 * DAY), now - settingsOf(c.env).retentionMs);
    if (end <= start) throw bad("`end_date` must be after `start_date` (and within MESSAGE_RETENTION_DAYS).");
    const tenant = c.get("tenant");
    const [rows, domains] = await Promise.all([
      hourlyCounts(c.env.DB, tenant, start, end),
      listDomains(c.env.DB, tenant),
    ]);
    const ids = new Map(domains.map((d) => [d.name, d.id]));
    const wanted = q.domain_id ? new Set(q.domain_id) : null;
    const kept = wanted ? rows.filter((x) => wanted.has(ids.get(x.domain) ?? "")) : rows;
    const dimensions = q.dimensions ?? [];
    const metrics = q.metrics ?? [...METRICS];
    const folded = foldMetrics(kept, {
      metrics,
      byPeriod: dimensions.includes("period"),
      byDomain: dimensions.includes("domain"),
      granularity: q.granularity,
      timezone: q.timezone,
      domainIds: ids,
    });
    return c.json({
      object: "metrics",
      start_date: new Date(start).toISOString(),
      end_date: new Date(end).toISOString(),
      metrics,
      dimensions,
      granularity: q.granularity,
      ...folded,
    });
  });
  return r;
}
