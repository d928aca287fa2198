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
 *     cohort_outcomes_total{status,code_class,enhanced_class}  delivered, deferred, bounced, expired  counter
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

async function queueFamilies(env: Env): Promise<Family[]> {
  const topN = settingsOf(env).metricsTopN;
  const all: TransportMetrics[] = await Promise.all((await allTransports(env)).map(async (t) => ({ ...(await env.TRANSPORT_QUEUE.getByName(t).metrics(topN)), transport: t })));
  const rcpts: Sample[] = [];
  const msgs: Sample[] = [];
  const dest: Sample[] = [];
  const window: Sample[] = [];
  for (const m of all) {
    rcpts.push({ labels: { transport: m.transport, state: "todo" }, value: m.todo }, { labels: { transport: m.transport, state: "in_flight" }, value: m.inflight });
    msgs.push({ labels: { transport: m.transport, state: "incoming" }, value: m.incoming }, { labels: { transport: m.transport, state: "deferred" }, value: m.deferred });
    for (const d of m.destinations) {
      dest.push({ labels: { transport: m.transport, destination: d.queue, state: "todo" }, value: d.todo }, { labels: { transport: m.transport, destination: d.queue, state: "in_flight" }, value: d.busy });
      window.push({ labels: { transport: m.transport, destination: d.queue }, value: d.window });
    }
    if (m.other.queues > 0) {
      dest.push({ labels: { transport: m.transport, destination: "other", state: "todo" }, value: m.other.todo }, { labels: { transport: m.transport, destination: "other", state: "in_flight" }, value: m.other.busy });
    }
  }
  return [
    { name: "cohort_queue_recipients", help: "Recipients in a Transport DO's active queue: waiting to be selected (todo) or in a delivery (in_flight).", type: "gauge", samples: rcpts },
    { name: "cohort_queue_messages", help: `Messages waiting for room in the active queue (incoming) or for a retry (deferred), counted up to ${METRIC_COUNT_CAP}.`, type: "gauge", samples: msgs },
    { name: "cohort_destination_recipients", help: "Recipients of the busiest destinations (METRICS_TOP_N; the rest summed as destination=\"other\").", type: "gauge", samples: dest },
    { name: "cohort_destination_window", help: "The concurrency window of the busiest destinations (0: dead, below 0: suspended).", type: "gauge", samples: window },
  ];
}

async function outcomeFamily(env: Env): Promise<Family> {
  const shards = Array.from({ length: settingsOf(env).outboxShards }, (_, s) => s);
  const snaps = await Promise.all(shards.map((s) => env.OUTBOX.getByName(outboxName(s)).metrics()));
  const sum = new Map<string, number>();
  for (const r of snaps.flat()) sum.set(`${r.status}|${r.code}|${r.enhanced}`, (sum.get(`${r.status}|${r.code}|${r.enhanced}`) ?? 0) + r.n);
  return {
    name: "cohort_outcomes_total", type: "counter",
    help: "Recipient outcomes recorded by the Outbox shards since they started (a restart starts them at zero), by status and reply class (2, 4, 5; enhanced X.Y).",
    samples: [...sum].sort().map(([k, n]) => {
      const [status, code, enhanced] = k.split("|") as [string, string, string];
      return { labels: { status, code_class: code, enhanced_class: enhanced }, value: n };
    }),
  };
}

async function egressFamilies(env: Env, nowMs: number): Promise<Family[]> {
  const pools = egressPoolsOf(env);
  if (!pools) return [];
  const rows = (await env.DB.prepare("SELECT egress, health FROM egress_health").all<{ egress: string; health: string }>()).results;
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
    { name: "cohort_egress_up", help: "1 while an egress of a pool may be used (healthy or on probation), 0 while it is suspended.", type: "gauge", samples: up },
    { name: "cohort_egress_suspended_until_seconds", help: "When an egress's current or last suspension ends (unix seconds).", type: "gauge", samples: until },
  ];
}

async function webhookAndRefusals(env: Env, nowMs: number): Promise<Family[]> {
  const [unclaimed, endpoints, refusals] = await env.DB.batch([
    env.DB.prepare(`SELECT count(*) AS n FROM (SELECT 1 FROM event_log WHERE event_id IS NOT NULL AND enqueued_at IS NULL LIMIT ${METRIC_COUNT_CAP})`),
    env.DB.prepare("SELECT state FROM webhook_endpoint_health"),
    env.DB.prepare("SELECT reason, status, sum(n) AS n FROM accept_refusals GROUP BY reason, status ORDER BY reason, status"),
  ]);
  const blocked = (endpoints!.results as { state: string }[]).filter((r) => (JSON.parse(r.state) as { blockedUntilMs?: number | null }).blockedUntilMs! > nowMs).length;
  return [
    { name: "cohort_webhook_unclaimed_events", help: `Webhook envelopes whose enqueue failed and that wait to be enqueued again (counted up to ${METRIC_COUNT_CAP}).`, type: "gauge", samples: [{ value: (unclaimed!.results[0] as { n: number }).n }] },
    { name: "cohort_webhook_endpoints_blocked", help: "Webhook endpoints in a dead period or throttled by Retry-After now.", type: "gauge", samples: [{ value: blocked }] },
    {
      name: "cohort_accept_refusals_total", help: "Send requests refused, by error name and HTTP status (the last 30 days).", type: "counter",
      samples: (refusals!.results as { reason: string; status: number; n: number }[]).map((r) => ({ labels: { reason: r.reason, status: String(r.status) }, value: r.n })),
    },
  ];
}

/** See the header. */
export async function metricsText(env: Env, nowMs = Date.now()): Promise<string> {
  const [queues, outcomes, egress, rest] = await Promise.all([queueFamilies(env), outcomeFamily(env), egressFamilies(env, nowMs), webhookAndRefusals(env, nowMs)]);
  return formatFamilies([...queues, outcomes, ...egress, ...rest]);
}
