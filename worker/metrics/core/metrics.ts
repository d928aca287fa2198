/*
 * NAME
 *   metrics - Resend's email metrics from hourly counts
 *
 * SUMMARY
 *   The shell reads a tenant's events in a time range grouped by UTC hour, event type and
 *   sending domain (and its received mail likewise); this module folds those rows into
 *   Resend's answer: totals, and rows by period and/or domain, counts and rates.
 *
 * DESCRIPTION
 *   METRICS                  Resend's metric names, in Resend's order.
 *   HourCount                { hour (ms of the UTC hour), type (an event type or "received"),
 *                            domain (the From domain; "" unknown), n }.
 *   bucketOf(hourMs, g, tz)  the start (ms) of the daily / weekly (Monday) / monthly period of
 *                            `hourMs` in the IANA zone `tz` (hourly: the hour itself); periods
 *                            are built from UTC hours, so a zone whose offset is not a whole
 *                            hour puts each hour in the period of its start.
 *   foldMetrics(rows, q)     { totals, data? }: `data` only when dimensions are asked for, one
 *                            row per (period, domain) present, sorted by period then domain;
 *                            only the metrics asked for. Counts: sent, delivered, bounced (all
 *                            of the relay's bounces are permanent: bounced_permanent),
 *                            complained, unsubscribed, suppressed, failed, delivery_delayed,
 *                            received. Rates, as fractions to four places (0 when the base is
 *                            0): delivery_rate and bounce_rate of sent, complaint_rate and
 *                            unsubscribe_rate of delivered. opened, clicked and their rates are
 *                            0: the relay does not track opens or clicks.
 *   validZone(tz)            whether `tz` is an IANA zone the runtime knows.
 *
 * INVARIANTS
 *   Pure: no I/O, no clock. The totals are the sums over the same rows as the data, whatever
 *   the dimensions.
 *
 * ERRORS
 *   RangeError from bucketOf for a zone validZone refuses (the shell checks first).
 */

export const METRICS = [
  "received",
  "delivered",
  "complained",
  "suppressed",
  "bounced",
  "bounced_transient",
  "bounced_permanent",
  "bounced_undetermined",
  "opened",
  "clicked",
  "unsubscribed",
  "delivery_delayed",
  "failed",
  "sent",
  "unique_opened",
  "unique_clicked",
  "delivery_rate",
  "open_rate",
  "click_rate",
  "bounce_rate",
  "complaint_rate",
  "unsubscribe_rate",
] as const;

export type Metric = (typeof METRICS)[number];
export type Granularity = "hourly" | "daily" | "weekly" | "monthly";

/** One group of the shell's read. */
export interface HourCount {
  hour: number;
  type: string;
  domain: string;
  n: number;
}

/** What the answer is folded by. */
export interface FoldQuery {
  metrics: readonly Metric[];
  byPeriod: boolean;
  byDomain: boolean;
  granularity: Granularity;
  timezone: string;
  /** The tenant's domains by name (domain_id, domain_name in the rows). */
  domainIds: ReadonlyMap<string, string>;
}

const COUNTED: Readonly<Record<string, Metric>> = {
  "email.sent": "sent",
  "email.delivered": "delivered",
  "email.bounced": "bounced",
  "email.complained": "complained",
  "email.unsubscribed": "unsubscribed",
  "email.suppressed": "suppressed",
  "email.failed": "failed",
  "email.delivery_delayed": "delivery_delayed",
  received: "received",
};

/** Whether `tz` is a zone the runtime knows. */
export function validZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/** The wall-clock fields of `ms` in `tz`. */
function wall(ms: number, tz: string): { y: number; m: number; d: number; h: number; wd: number } {
  const parts = new Intl.DateTimeFormat("en-US", {
    timeZone: tz,
    year: "numeric",
    month: "numeric",
    day: "numeric",
    hour: "numeric",
    hourCycle: "h23",
    weekday: "short",
  }).formatToParts(ms);
  const get = (t: string) => parts.find((p) => p.type === t)?.value ?? "0";
  const wd = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"].indexOf(get("weekday"));
  return { y: Number(get("year")), m: Number(get("month")), d: Number(get("day")), h: Number(get("hour")), wd };
}

const HOUR = 3_600_000;

/** The period start of an hour (see the header). */
export function bucketOf(hourMs: number, g: Granularity, tz: string): number {
  if (g === "hourly") return hourMs;
  const w = wall(hourMs, tz);
  const back = g === "daily" ? w.h : g === "weekly" ? w.wd * 24 + w.h : (w.d - 1) * 24 + w.h;
  // Stepping back whole hours of wall time from this hour; a change of offset within the period moves the start by it.
  return hourMs - back * HOUR;
}

type Counts = Partial<Record<Metric, number>>;

const ratio = (a: number, b: number) => (b === 0 ? 0 : Math.round((a / b) * 10_000) / 10_000);

function finish(c: Counts, metrics: readonly Metric[]): Counts {
  const v = (m: Metric) => c[m] ?? 0;
  const all: Record<Metric, number> = {
    received: v("received"),
    delivered: v("delivered"),
    complained: v("complained"),
    suppressed: v("suppressed"),
    bounced: v("bounced"),
    bounced_transient: 0,
    bounced_permanent: v("bounced"),
    bounced_undetermined: 0,
    opened: 0,
    clicked: 0,
    unsubscribed: v("unsubscribed"),
    delivery_delayed: v("delivery_delayed"),
    failed: v("failed"),
    sent: v("sent"),
    unique_opened: 0,
    unique_clicked: 0,
    delivery_rate: ratio(v("delivered"), v("sent")),
    open_rate: 0,
    click_rate: 0,
    bounce_rate: ratio(v("bounced"), v("sent")),
    complaint_rate: ratio(v("complained"), v("delivered")),
    unsubscribe_rate: ratio(v("unsubscribed"), v("delivered")),
  };
  return Object.fromEntries(metrics.map((m) => [m, all[m]]));
}

/** The answer's totals and rows (see the header). */
export function foldMetrics(
  rows: readonly HourCount[],
  q: FoldQuery,
): { totals: Counts; data?: (Counts & { period?: string; domain_id?: string | null; domain_name?: string })[] } {
  const total: Counts = {};
  const groups = new Map<string, { period: number | null; domain: string | null; c: Counts }>();
  for (const r of rows) {
    const metric = COUNTED[r.type];
    if (!metric) continue;
    total[metric] = (total[metric] ?? 0) + r.n;
    if (!q.byPeriod && !q.byDomain) continue;
    const period = q.byPeriod ? bucketOf(r.hour, q.granularity, q.timezone) : null;
    const domain = q.byDomain ? r.domain : null;
    const key = `${period}|${domain}`;
    const g = groups.get(key) ?? { period, domain, c: {} };
    g.c[metric] = (g.c[metric] ?? 0) + r.n;
    groups.set(key, g);
  }
  if (!q.byPeriod && !q.byDomain) return { totals: finish(total, q.metrics) };
  const data = [...groups.values()]
    .sort((a, b) => (a.period ?? 0) - (b.period ?? 0) || (a.domain ?? "").localeCompare(b.domain ?? ""))
    .map((g) => ({
      ...(g.period !== null ? { period: new Date(g.period).toISOString() } : {}),
      ...(g.domain !== null ? { domain_id: q.domainIds.get(g.domain) ?? null, domain_name: g.domain } : {}),
      ...finish(g.c, q.metrics),
    }));
  return { totals: finish(total, q.metrics), data };
}
