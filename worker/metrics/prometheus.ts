/**
 * GET /metrics: the relay's state in Prometheus' text format (core/prom.ts formats), gathered
 * without a full scan of anything that grows with the mail (the route is polled).
 *
 * DESCRIPTION
 *   metricsText(env, nowMs)  one request per Transport DO (metrics(): in-core counts from memory,
 *       incoming and deferred messages counted up to METRIC_COUNT_CAP, its METRICS_TOP_N busiest
 *       destinations and the rest summed as destination "other"), one per Outbox shard (outcomes
 *       by status and reply class since the object started), and D1 reads of tables the size of
 *       the configuration (egress health, webhook endpoint health), of the accept refusals per
 *       day (30 days at most) and of the webhook backlog through its partial index (capped).
 *   Families:
 *     cohort_queue_recipients{transport,state}                 todo | in_flight   gauge
 *     cohort_queue_messages{transport,state}                   incoming | deferred gauge
 *     cohort_destination_recipients{transport,destination,state} the busiest, and "other"  gauge
 *     cohort_destination_window{transport,destination}         the busiest          gauge
 *     cohort_outcomes_total{status,code_class,enhanced_class}  delivered | deferred | bounced | expired; 2, 4, 5; X.Y  counter
 *     cohort_egress_up{pool,egress}                            1, or 0 while suspended gauge
 *     cohort_egress_suspended_until_seconds{pool,egress}       when a suspension ends  gauge
 *     cohort_webhook_unclaimed_events                          envelopes waiting to be enqueued again  gauge
 *     cohort_webhook_endpoints_blocked                         endpoints in a dead period or throttled gauge
 *     cohort_accept_refusals_total{reason,status}              refused send requests  counter
 *
 * INVARIANTS
 *   Every label's values are bounded: transports, the top N destinations plus "other",
 *   configured egresses, statuses, reply classes and error names. Never one series per
 *   recipient domain.
 */
import { outboxName } from "../model/ids";
import { METRIC_COUNT_CAP, type TransportMetrics } from "../model/transport";
import { allTransports } from "../policy/transports";
import { egressPoolsOf } from "../egress/egress";
import { usable, type EgressHealth } from "../egress/core/health";
import { formatFamilies, type Family, type Sample } from "./core/prom";
import { settingsOf } from "../settings/settings";

const gauge = (name: string, help: string, samples: Sample[]): Family => ({ name, help, type: "gauge", samples });

async function queueFamilies(env: Env): Promise<Family[]> {
  const topN = settingsOf(env).metricsTopN;
  const names = await allTransports(env);
  const all: TransportMetrics[] = await Promise.all(
    names.map(async (t) => ({ ...(await env.TRANSPORT_QUEUE.getByName(t).metrics(topN)), transport: t })),
  );
  const rcpts: Sample[] = [];
  const msgs: Sample[] = [];
  const dest: Sample[] = [];
  const window: Sample[] = [];
  for (const m of all) {
    const t = { transport: m.transport };
    rcpts.push(
      { labels: { ...t, state: "todo" }, value: m.todo },
      { labels: { ...t, state: "in_flight" }, value: m.inflight },
    );
    msgs.push(
      { labels: { ...t, state: "incoming" }, value: m.incoming },
      { labels: { ...t, state: "deferred" }, value: m.deferred },
    );
    for (const d of m.destinations) {
      const at = { ...t, destination: d.queue };
      dest.push(
        { labels: { ...at, state: "todo" }, value: d.todo },
        { labels: { ...at, state: "in_flight" }, value: d.busy },
      );
      window.push({ labels: at, value: d.window });
    }
    if (m.other.queues > 0) {
      const at = { ...t, destination: "other" };
      dest.push(
        { labels: { ...at, state: "todo" }, value: m.other.todo },
        { labels: { ...at, state: "in_flight" }, value: m.other.busy },
      );
    }
  }
  return [
    gauge(
      "cohort_queue_recipients",
      "Recipients in a Transport DO's active queue: waiting to be selected (todo) or in a delivery (in_flight).",
      rcpts,
    ),
    gauge(
      "cohort_queue_messages",
      `Messages waiting for the active queue (incoming) or for a retry (deferred), counted up to ${METRIC_COUNT_CAP}.`,
      msgs,
    ),
    gauge(
      "cohort_destination_recipients",
      'Recipients of the busiest destinations (METRICS_TOP_N; the rest summed as destination="other").',
      dest,
    ),
    gauge(
      "cohort_destination_window",
      "The concurrency window of the busiest destinations (0: dead, below 0: suspended).",
      window,
    ),
  ];
}

async function outcomeFamily(env: Env): Promise<Family> {
  const shards = Array.from({ length: settingsOf(env).outboxShards }, (_, s) => s);
  const snaps = await Promise.all(shards.map((s) => env.OUTBOX.getByName(outboxName(s)).metrics()));
  const sum = new Map<string, number>();
  for (const r of snaps.flat())
    sum.set(`${r.status}|${r.code}|${r.enhanced}`, (sum.get(`${r.status}|${r.code}|${r.enhanced}`) ?? 0) + r.n);
  return {
    name: "cohort_outcomes_total",
    type: "counter",
    help: "Recipient outcomes recorded by the Outbox shards since they started (a restart starts them at zero), by status and reply class.",
    samples: [...sum].sort().map(([k, n]) => {
      const [status, code, enhanced] = k.split("|") as [string, string, string];
      return { labels: { status, code_class: code, enhanced_class: enhanced }, value: n };
    }),
  };
}

async function egressFamilies(env: Env, nowMs: number): Promise<Family[]> {
  const pools = egressPoolsOf(env);
  if (!pools) return [];
  const rows = (
    await env.DB.prepare("SELECT egress, health FROM egress_health").all<{ egress: string; health: string }>()
  ).results;
  const health = new Map(rows.map((r) => [r.egress, JSON.parse(r.health) as EgressHealth]));
  const up: Sample[] = [];
  const until: Sample[] = [];
  for (const [pool, members] of pools.pools) {
    for (const m of members) {
      const h = health.get(m.id);
      up.push({ labels: { pool, egress: m.id }, value: h && usable(h, Math.floor(nowMs / 1000)) === "down" ? 0 : 1 });
      if (h?.state === "suspended") until.push({ labels: { pool, egress: m.id }, value: h.suspendedUntil });
    }
  }
  return [
    gauge(
      "cohort_egress_up",
      "1 while an egress of a pool may be used (healthy or on probation), 0 while it is suspended.",
      up,
    ),
    gauge(
      "cohort_egress_suspended_until_seconds",
      "When an egress's current or last suspension ends (unix seconds).",
      until,
    ),
  ];
}

async function webhookAndRefusals(env: Env, nowMs: number): Promise<Family[]> {
  const [unclaimed, endpoints, refusals] = await env.DB.batch([
    env.DB.prepare(
      `SELECT count(*) AS n FROM (SELECT 1 FROM event_runs WHERE enqueued_at IS NULL AND (event_id IS NOT NULL OR rest_envelopes = 1) LIMIT ${METRIC_COUNT_CAP})`,
    ),
    env.DB.prepare("SELECT state FROM webhook_endpoint_health"),
    env.DB.prepare(
      "SELECT reason, status, sum(n) AS n FROM accept_refusals GROUP BY reason, status ORDER BY reason, status",
    ),
  ]);
  const until = (state: string) => (JSON.parse(state) as { blockedUntilMs?: number | null }).blockedUntilMs ?? 0;
  const blocked = (endpoints!.results as { state: string }[]).filter((r) => until(r.state) > nowMs).length;
  const waiting = (unclaimed!.results[0] as { n: number }).n;
  const refused = refusals!.results as { reason: string; status: number; n: number }[];
  return [
    gauge(
      "cohort_webhook_unclaimed_events",
      `Stored rows of webhook envelopes whose enqueue failed, to be enqueued again (up to ${METRIC_COUNT_CAP}; a row holds an email's envelopes of one publication).`,
      [{ value: waiting }],
    ),
    gauge("cohort_webhook_endpoints_blocked", "Webhook endpoints in a dead period or throttled by Retry-After now.", [
      { value: blocked },
    ]),
    {
      name: "cohort_accept_refusals_total",
      help: "Send requests refused, by error name and HTTP status (the last 30 days).",
      type: "counter",
      samples: refused.map((r) => ({ labels: { reason: r.reason, status: String(r.status) }, value: r.n })),
    },
  ];
}

/** See the header. */
export async function metricsText(env: Env, nowMs = Date.now()): Promise<string> {
  const [queues, outcomes, egress, rest] = await Promise.all([
    queueFamilies(env),
    outcomeFamily(env),
    egressFamilies(env, nowMs),
    webhookAndRefusals(env, nowMs),
  ]);
  return formatFamilies([...queues, outcomes, ...egress, ...rest]);
}
