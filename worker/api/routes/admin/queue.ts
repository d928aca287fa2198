/**
 * Operator routes over the Transport and Destination DOs and the D1 index (operator key only).
 * Suspensions are suspensions.ts's; the mail that came back, inbound.ts's.
 *
 * DESCRIPTION
 *   GET    /relay/queue          qshape across transports (destination × age bucket, TOTAL first)
 *                                of the active queue (in core) and of the deferred queue,
 *                                in-flight counts and the time from dispatch to report of each
 *                                transport's recent entries (in_flight_ms), recipient counts by
 *                                state / transport / destination from D1, and the age
 *                                percentiles of open recipients.
 *   GET    /relay/destinations   every destination queue in core: window, busy, todo, limit,
 *                                state, dead or suspended until, last failure reason.
 *   GET    /relay/destinations/:transport/:queue
 *                                one destination with its Destination DO record, feedback
 *                                history (window over time), and the provider rule it falls
 *                                under and why (its MX hosts and the suffix that matched).
 *   POST   /relay/flush          { transport? } retry deferred mail now and revive dead
 *                                destinations (postqueue -f), in one or every transport.
 *   GET    /relay/stats?window=  delivered / bounced / deferred / failed per minute (D1 events).
 *
 * ERRORS
 *   403 restricted_api_key for a tenant key; 422 validation_error for bad input; 404 not_found
 *   for an unknown transport or destination.
 */
import { Hono, type Context } from "hono";
import { transportParams, type Ceiling } from "../../../../durable-objects/core";
import { schedulerConfigOf } from "../../../settings/scheduler";
import { QSHAPE_BUCKETS_MIN } from "../../../../durable-objects/core/inspect";
import { openAges, stateCounts, throughputRows } from "../../../db/admin";
import { mergeQshape, stateTable, throughputSeries } from "../../../dashboard/core/operator-views";
import { type AppEnv } from "../../http/context";
import { parseInput, readOptionalJson } from "../../http/body";
import { ApiError } from "../../../model/errors";
import { FlushSchema, StatsQuerySchema } from "./schemas";
import { providerOfDestination } from "./providers";
import {
  allTransports,
  destinationStub,
  inspectAll,
  knownTransport,
  transportStub,
  type Inspection,
} from "../../../policy/transports";

/** Age percentiles reported by GET /relay/queue. */
export const AGE_PERCENTILES = [50, 90, 95, 99] as const;

export const iso = (sec: number | null) => (sec === null || sec <= 0 ? null : new Date(sec * 1000).toISOString());

/** The destination_concurrency_limit of a transport (0 = unlimited), from SCHEDULER_CONFIG. */
/** A learned session ceiling (relay §12.7) as the API shows it, or null. */
function ceilingView(c: Ceiling | null | undefined) {
  return c
    ? {
        limit: c.limit,
        learned_at: iso(c.at),
        probe_gap_deliveries: c.gap,
        deliveries_to_probe: c.left ?? 0,
        not_before: iso(c.probeAt),
        climbing: c.climbing ?? false,
      }
    : null;
}

function limitOf(env: Env): (transport: string) => number {
  const cfg = schedulerConfigOf(env);
  return (transport) => transportParams(cfg, transport).concurrencyLimit;
}

/** One destination as the API shows it. */
function destinationView(limit: (transport: string) => number, d: Inspection["destinations"][number]) {
  return {
    object: "destination" as const,
    transport: d.transport,
    queue: d.queue,
    nexthop: d.nexthop,
    state: d.state,
    window: d.window,
    busy: d.busy,
    todo: d.todo,
    limit: limit(d.transport),
    dead_until: d.state === "dead" ? iso(d.until) : null,
    suspended_until: d.state === "suspended" ? iso(d.until) : null,
    last_response: d.reason,
    success: d.success,
    failure: d.failure,
    fail_cohorts: d.failCohorts,
    last_done_at: iso(d.lastDone),
  };
}

/** An optional JSON body: {} when empty. */
async function optionalJson(c: Context<AppEnv>): Promise<unknown> {
  return (await readOptionalJson(c, 16 * 1024)) ?? {};
}

/** The operator routes (mounted under /relay behind the API key and the operator check). */
export function queueRoutes() {
  const r = new Hono<AppEnv>();

  r.get("/queue", async (c) => {
    const nowMs = Date.now();
    const names = await allTransports(c.env);
    const [inspections, counts, ages] = await Promise.all([
      inspectAll(c.env, names),
      stateCounts(c.env.DB),
      openAges(c.env.DB, nowMs, AGE_PERCENTILES),
    ]);
    return c.json({
      object: "queue",
      generated_at: new Date(nowMs).toISOString(),
      buckets_min: [...QSHAPE_BUCKETS_MIN],
      qshape: mergeQshape(
        inspections.map((i) => ({ transport: i.transport, qshape: i.qshape })),
        QSHAPE_BUCKETS_MIN.length + 1,
      ),
      deferred: mergeQshape(
        inspections.map((i) => ({ transport: i.transport, qshape: i.deferred })),
        QSHAPE_BUCKETS_MIN.length + 1,
      ),
      transports: inspections.map((i) => ({
        transport: i.transport,
        inflight: i.inflight,
        in_core: i.qshape[0]?.total ?? 0,
        deferred: i.deferred[0]?.total ?? 0,
        destinations: i.destinations.length,
        in_flight_ms: i.inFlightTimes ?? null,
      })),
      counts: stateTable(counts, 50),
      open: {
        count: ages.count,
        age_percentiles: ages.percentiles.map((p) => ({ p: p.p, age_seconds: Math.round(p.age_ms / 1000) })),
      },
    });
  });

  r.get("/destinations", async (c) => {
    const inspections = await inspectAll(c.env, await allTransports(c.env));
    const limit = limitOf(c.env);
    return c.json({
      object: "list",
      data: inspections.flatMap((i) => i.destinations.map((d) => destinationView(limit, d))),
    });
  });

  r.get("/destinations/:transport/:queue", async (c) => {
    const transport = await knownTransport(c.env, c.req.param("transport"));
    const queue = c.req.param("queue");
    const [inspection, dest, provider] = await Promise.all([
      transportStub(c.env, transport).inspect(),
      destinationStub(c.env, transport, queue).get(),
      providerOfDestination(c.env, queue),
    ]);
    const inCore = (inspection as Inspection).destinations.find((d) => d.queue === queue);
    if (!inCore && !dest.record) throw new ApiError(404, "not_found", "Destination not found.");
    const rec = dest.record;
    return c.json({
      ...(inCore
        ? destinationView(limitOf(c.env), inCore)
        : {
            object: "destination" as const,
            transport,
            queue,
            nexthop: queue,
            state: "idle",
            window: null,
            busy: 0,
            todo: 0,
            limit: limitOf(c.env)(transport),
          }),
      record:
        rec === null
          ? null
          : {
              window: rec.window,
              dead_until: iso(rec.deadUntil),
              reason: rec.reason,
              last_report_at: iso(rec.lastReportAt),
              success: rec.success,
              failure: rec.failure,
              fail_cohorts: rec.failCohorts,
              ceiling: ceilingView(rec.ceiling),
            },
      history: dest.history.map((h) => ({
        at: new Date(h.at * 1000).toISOString(),
        kind: h.kind,
        outcome: h.outcome,
        window: h.window,
        busy: h.busy,
        reason: h.reason,
        reply_rule: h.replyRule ?? null,
      })),
      provider,
    });
  });

  r.post("/flush", async (c) => {
    const body = parseInput(FlushSchema, await optionalJson(c));
    const names = body.transport ? [await knownTransport(c.env, body.transport)] : await allTransports(c.env);
    const inspections = await inspectAll(c.env, names);
    // Each Transport DO also revives its dead destinations' Destination DOs.
    await Promise.all(names.map((n) => transportStub(c.env, n).flush()));
    const dead = inspections.flatMap((i) => i.destinations.filter((d) => d.state === "dead"));
    return c.json({
      object: "flush",
      transports: names,
      revived: dead.map((d) => ({ transport: d.transport, queue: d.queue })),
    });
  });

  r.get("/stats", async (c) => {
    const q = parseInput(StatsQuerySchema, c.req.query());
    const nowMs = Date.now();
    const toMin = Math.floor(nowMs / 60_000);
    const fromMin = toMin - q.window + 1;
    const series = throughputSeries(
      await throughputRows(c.env.DB, fromMin * 60_000, (toMin + 1) * 60_000),
      fromMin,
      toMin,
    );
    const totals = series.reduce(
      (t, p) => ({
        delivered: t.delivered + p.delivered,
        bounced: t.bounced + p.bounced,
        deferred: t.deferred + p.deferred,
        failed: t.failed + p.failed,
      }),
      { delivered: 0, bounced: 0, deferred: 0, failed: 0 },
    );
    return c.json({
      object: "stats",
      window_minutes: q.window,
      from: new Date(fromMin * 60_000).toISOString(),
      to: new Date((toMin + 1) * 60_000).toISOString(),
      totals,
      series: series.map((p) => ({ ...p, at: new Date(p.at).toISOString() })),
    });
  });

  return r;
}
