/**
 * Response shapes (zod) of the admin API under /relay/, for the OpenAPI document's responses
 * (openapi/admin.ts, openapi/messages.ts). Request schemas are schemas.ts's.
 *
 * DESCRIPTION
 *   AdminResponses        the body each admin route answers with, by name: queue, destinations,
 *                         destination, policies, warmups, providers, flush, suspensions, stats,
 *                         inbound, reports, search, events and the rest.
 */
import { z } from "zod";
import { ProviderRuleBodySchema, StateSchema, SuspensionTargetSchema } from "./schemas";

// Response shapes, for the OpenAPI document (openapi/admin.ts, openapi/messages.ts).
const Iso = z.string().describe("ISO 8601");
const Counts = z.record(z.string(), z.number().int());
const Group = z.object({
  transport: z.string().nullable(),
  destination: z.string().nullable().optional(),
  total: z.number().int(),
  states: Counts,
});
const ShapeRow = z.object({
  transport: z.string(),
  destination: z.string(),
  total: z.number().int(),
  buckets: z.array(z.number().int()),
});
const Destination = z
  .object({
    object: z.literal("destination"),
    transport: z.string(),
    queue: z.string(),
    nexthop: z.string(),
    state: z.enum(["ready", "dead", "suspended", "idle"]),
    window: z.number().nullable(),
    busy: z.number().int(),
    todo: z.number().int(),
    limit: z.number().int(),
    dead_until: Iso.nullable().optional(),
    suspended_until: Iso.nullable().optional(),
    last_response: z.string().nullable().optional(),
  })
  .passthrough();
const Suspension = z.object({
  object: z.literal("suspension"),
  target: SuspensionTargetSchema,
  transport: z.string().nullable(),
  name: z.string(),
  key: z.string(),
  until: Iso.nullable(),
  transports: z.array(z.string()),
  set_by: z.string().nullable().optional(),
});
const Event = z.object({
  object: z.literal("event"),
  seq: z.number().int(),
  type: z.string(),
  recipient: z.string().nullable(),
  created_at: Iso,
  data: z.unknown(),
});

const PolicyView = z.object({
  object: z.literal("policy"),
  transport: z.string(),
  key: z.string(),
  concurrency: z.number().int().nullable(),
  rate: z.string().nullable(),
  interval_seconds: z.number().int().nullable(),
  suspended_until: z.string().nullable(),
  set_by: z.string().nullable(),
  throttle: z.object({ rate: z.string(), until: z.string().nullable(), set_by: z.string() }).nullable(),
});
const WarmupView = z.object({
  object: z.literal("warmup"),
  egress: z.string(),
  started_at: z.string(),
  day: z.number().int(),
  days: z.number().int(),
  done: z.boolean(),
  caps_today: z.record(z.string(), z.object({ per_day: z.number().int(), per_hour: z.number().int() })),
  plan: z.object({
    ramp: z.array(z.object({ per_day: z.number().int(), per_hour: z.number().int().optional() })),
    scale: z.record(z.string(), z.number()).optional(),
  }),
});
const ProviderRuleSchema = ProviderRuleBodySchema.extend({ object: z.literal("provider"), name: z.string() });

/** Response bodies of the admin routes. */
export const AdminResponses = {
  queue: z.object({
    object: z.literal("queue"),
    generated_at: Iso,
    buckets_min: z.array(z.number().int()).describe("upper bounds of the age buckets; the last bucket is open-ended"),
    qshape: z.array(ShapeRow).describe("active queue (in core), TOTAL first"),
    deferred: z.array(ShapeRow).describe("deferred queue, TOTAL first"),
    transports: z.array(
      z.object({
        transport: z.string(),
        inflight: z.number().int(),
        in_core: z.number().int(),
        deferred: z.number().int(),
        destinations: z.number().int(),
        in_flight_ms: z
          .object({
            reports: z.number().int(),
            mean_ms: z.number(),
            p50_ms: z.number(),
            p99_ms: z.number(),
            max_ms: z.number(),
            peak_in_flight: z.number().int(),
          })
          .nullable()
          .describe(
            "time from dispatch to report of the transport's last (up to 1,024) reported entries, ms," +
              " and the most entries in flight at one of those reports (against process_limit); null before the first since the object started",
          ),
      }),
    ),
    counts: z.object({
      total: z.number().int(),
      by_state: Counts,
      by_transport: z.array(Group),
      by_destination: z.array(Group),
    }),
    open: z.object({
      count: z.number().int(),
      age_percentiles: z.array(z.object({ p: z.number(), age_seconds: z.number() })),
    }),
  }),
  destinations: z.object({ object: z.literal("list"), data: z.array(Destination) }),
  destination: Destination.extend({
    record: z
      .object({
        window: z.number(),
        dead_until: Iso.nullable(),
        reason: z.string().nullable(),
        last_report_at: Iso.nullable(),
      })
      .passthrough()
      .nullable(),
    history: z.array(
      z.object({
        at: Iso,
        kind: z.string(),
        outcome: z.string(),
        window: z.number(),
        busy: z.number().int(),
        reason: z.string().nullable(),
        reply_rule: z.string().nullable(),
      }),
    ),
    provider: z
      .object({
        rule: z.string().nullable(),
        mx_hosts: z.array(z.string()),
        matched: z.object({ mx_host: z.string(), suffix: z.string() }).nullable(),
        error: z.string().optional(),
      })
      .nullable()
      .describe(
        "the provider rule the destination's MX hosts fall under, and the host and suffix that matched; null for a relay nexthop",
      ),
  }),
  policies: z.object({ object: z.literal("list"), data: z.array(PolicyView) }),
  policyDeleted: z.object({ object: z.literal("policy"), key: z.string(), deleted: z.boolean() }),
  warmup: WarmupView,
  warmups: z.object({ object: z.literal("list"), data: z.array(WarmupView) }),
  warmupDeleted: z.object({ object: z.literal("warmup"), egress: z.string(), deleted: z.boolean() }),
  provider: ProviderRuleSchema,
  providers: z.object({ object: z.literal("list"), data: z.array(ProviderRuleSchema) }),
  providerDeleted: z.object({ object: z.literal("provider"), name: z.string(), deleted: z.boolean() }),
  flush: z.object({
    object: z.literal("flush"),
    transports: z.array(z.string()),
    revived: z.array(z.object({ transport: z.string(), queue: z.string() })),
  }),
  suspension: Suspension,
  suspensions: z.object({ object: z.literal("list"), data: z.array(Suspension) }),
  resumed: z.object({
    object: z.literal("suspension"),
    target: SuspensionTargetSchema,
    transport: z.string().nullable(),
    name: z.string(),
    key: z.string(),
    deleted: z.boolean(),
  }),
  stats: z.object({
    object: z.literal("stats"),
    window_minutes: z.number().int(),
    from: Iso,
    to: Iso,
    totals: z.object({
      delivered: z.number().int(),
      bounced: z.number().int(),
      deferred: z.number().int(),
      failed: z.number().int(),
    }),
    series: z.array(
      z.object({
        at: Iso,
        delivered: z.number().int(),
        bounced: z.number().int(),
        deferred: z.number().int(),
        failed: z.number().int(),
      }),
    ),
  }),
  inbound: z.object({
    object: z.literal("inbound"),
    from: z.string(),
    totals: z.record(z.string(), z.number().int()),
    days: z.array(z.object({ day: z.string(), counts: z.record(z.string(), z.number().int()) })),
  }),
  reports: z.object({
    object: z.literal("list"),
    has_more: z.boolean(),
    data: z.array(
      z.object({
        object: z.literal("inbound_report"),
        id: z.string(),
        received_at: Iso,
        kind: z.enum(["dsn", "arf"]),
        verdict: z.string(),
        email_id: z.string().nullable(),
        tenant: z.string().nullable(),
        envelope_from: z.string(),
        envelope_to: z.string(),
        message_id: z.string().nullable(),
        detail: z.record(z.string(), z.unknown()),
        size: z.number().int(),
        raw: z.string().describe("the first 64 KiB of the message"),
      }),
    ),
  }),
  search: z.object({
    object: z.literal("list"),
    has_more: z.boolean(),
    data: z.array(
      z.object({
        object: z.literal("email"),
        id: z.string(),
        tenant: z.string(),
        from: z.string(),
        subject: z.string().nullable(),
        created_at: Iso,
        last_event: z.string(),
        recipients: z.array(
          z.object({
            email: z.string(),
            status: StateSchema,
            attempts: z.number().int(),
            transport: z.string().nullable(),
            nexthop: z.string().nullable(),
          }),
        ),
      }),
    ),
  }),
  events: z.object({ object: z.literal("list"), data: z.array(Event) }),
  messageEvents: z.array(Event),
};
