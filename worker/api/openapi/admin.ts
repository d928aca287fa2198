/**
 * The OpenAPI rows (document.ts ROUTES) of the operator's endpoints under /relay/: the queue and
 * its destinations, flush and suspensions; pickup policies, IP warm-up and provider rules; the
 * mail that came back, the stats; and the egress pools.
 *
 * INVARIANTS
 *   Each answers 403 to a tenant's key; response shapes are routes/admin/responses.ts's.
 */
import { z } from "zod";
import type { Operation } from "./types";
import { PolicyLimitsSchema } from "../routes/admin/policies";
import { WarmupAdvanceSchema, WarmupPlanSchema } from "../routes/admin/warmup";
import { AdminResponses as Admin } from "../routes/admin/responses";
import {
  FlushSchema,
  InboundQuerySchema,
  ProviderRuleBodySchema,
  ReportsQuerySchema,
  ResumeQuerySchema,
  StatsQuerySchema,
  SuspendSchema,
} from "../routes/admin/schemas";

const EgressMember = z.object({
  id: z.string(),
  state: z.enum(["healthy", "suspended", "probation"]),
  suspended_until: z.string().nullable(),
  reason: z.string().nullable(),
});
const EgressView = z.object({
  object: z.literal("egress"),
  pools: z.array(z.object({ name: z.string(), members: z.array(EgressMember) })),
  events: z.array(
    z.object({ egress: z.string(), pool: z.string(), kind: z.string(), detail: z.string().nullable(), at: z.string() }),
  ),
});

/** The queue (qshape), destinations, flush and suspensions. */
export const QUEUE_ROUTES: Operation[] = [
  {
    method: "get",
    path: "/relay/queue",
    summary: "Operator: qshape by destination and age, counts by state/transport/destination, age percentiles",
    operationId: "adminQueue",
    auth: true,
    ok: { status: 200, schema: Admin.queue },
    errors: [401, 403],
  },
  {
    method: "get",
    path: "/relay/destinations",
    summary: "Operator: every destination queue (window, busy, limit, dead-until, last response)",
    operationId: "adminDestinations",
    auth: true,
    ok: { status: 200, schema: Admin.destinations },
    errors: [401, 403],
  },
  {
    method: "get",
    path: "/relay/destinations/{transport}/{queue}",
    summary:
      "Operator: one destination with its feedback history (window over time) and the provider rule it falls under, and why",
    operationId: "adminDestination",
    auth: true,
    ok: { status: 200, schema: Admin.destination },
    errors: [401, 403, 404],
  },
  {
    method: "post",
    path: "/relay/flush",
    summary: "Operator: retry deferred mail now and revive dead destinations (postqueue -f)",
    operationId: "adminFlush",
    auth: true,
    body: FlushSchema,
    ok: { status: 200, schema: Admin.flush },
    errors: [400, 401, 403, 404, 422],
  },
  {
    method: "post",
    path: "/relay/suspensions",
    summary: "Operator: suspend a destination, tenant or transport for a TTL",
    operationId: "adminSuspend",
    auth: true,
    body: SuspendSchema,
    ok: { status: 201, schema: Admin.suspension },
    errors: [400, 401, 403, 404, 422],
  },
  {
    method: "get",
    path: "/relay/suspensions",
    summary: "Operator: suspensions in force",
    operationId: "adminSuspensions",
    auth: true,
    ok: { status: 200, schema: Admin.suspensions },
    errors: [401, 403],
  },
  {
    method: "delete",
    path: "/relay/suspensions/{target}/{name}",
    summary: "Operator: resume a suspended destination, tenant or transport",
    operationId: "adminResume",
    auth: true,
    query: ResumeQuerySchema,
    ok: { status: 200, schema: Admin.resumed },
    errors: [401, 403, 404, 422],
  },
];

/** Pickup policies, warm-up plans, provider rules, then inbound mail and stats. */
export const POLICY_ROUTES: Operation[] = [
  {
    method: "get",
    path: "/relay/policies",
    summary:
      "Operator: pickup policies in force (caps, rates, connect intervals, suspensions, reply-rule throttles) by transport and key",
    operationId: "adminPolicies",
    auth: true,
    ok: { status: 200, schema: Admin.policies },
    errors: [401, 403],
  },
  {
    method: "put",
    path: "/relay/policies/{key}",
    summary:
      "Operator: set a key's concurrency cap, rate and connect interval (tenant:, jobid:, " +
      "bulk:, egress:, site:, transport:, dest: keys, or a configured combination joined by +)",
    operationId: "adminPutPolicy",
    auth: true,
    body: PolicyLimitsSchema,
    ok: { status: 200, schema: Admin.policies },
    errors: [400, 401, 403, 404, 422],
  },
  {
    method: "delete",
    path: "/relay/policies/{key}",
    summary: "Operator: remove a key's cap, rate and interval (a suspension stays)",
    operationId: "adminDeletePolicy",
    auth: true,
    ok: { status: 200, schema: Admin.policyDeleted },
    errors: [401, 403, 404, 422],
  },
  {
    method: "get",
    path: "/relay/warmup",
    summary: "Operator: IP warm-up plans (per egress: its day and today's caps per provider)",
    operationId: "adminWarmups",
    auth: true,
    ok: { status: 200, schema: Admin.warmups },
    errors: [401, 403],
  },
  {
    method: "put",
    path: "/relay/warmup/{egress}",
    summary: "Operator: create or replace an egress's warm-up plan (the default ramp when none is given)",
    operationId: "adminPutWarmup",
    auth: true,
    body: WarmupPlanSchema,
    ok: { status: 200, schema: Admin.warmup },
    errors: [400, 401, 403, 422],
  },
  {
    method: "post",
    path: "/relay/warmup/{egress}/advance",
    summary: "Operator: move a warm-up plan on (or back) by days",
    operationId: "adminAdvanceWarmup",
    auth: true,
    body: WarmupAdvanceSchema,
    ok: { status: 200, schema: Admin.warmup },
    errors: [400, 401, 403, 404, 422],
  },
  {
    method: "delete",
    path: "/relay/warmup/{egress}",
    summary: "Operator: end an egress's warm-up (its caps go)",
    operationId: "adminDeleteWarmup",
    auth: true,
    ok: { status: 200, schema: Admin.warmupDeleted },
    errors: [401, 403, 404, 422],
  },
  {
    method: "get",
    path: "/relay/providers",
    summary: "Operator: provider rules (MX host suffixes and the shape given to every domain hosted there)",
    operationId: "adminProviders",
    auth: true,
    ok: { status: 200, schema: Admin.providers },
    errors: [401, 403],
  },
  {
    method: "get",
    path: "/relay/providers/{name}",
    summary: "Operator: one provider rule",
    operationId: "adminProvider",
    auth: true,
    ok: { status: 200, schema: Admin.provider },
    errors: [401, 403, 404],
  },
  {
    method: "put",
    path: "/relay/providers/{name}",
    summary: "Operator: create or replace a provider rule",
    operationId: "adminPutProvider",
    auth: true,
    body: ProviderRuleBodySchema,
    ok: { status: 200, schema: Admin.provider },
    errors: [400, 401, 403, 422],
  },
  {
    method: "delete",
    path: "/relay/providers/{name}",
    summary: "Operator: delete a provider rule",
    operationId: "adminDeleteProvider",
    auth: true,
    ok: { status: 200, schema: Admin.providerDeleted },
    errors: [401, 403, 404],
  },
  {
    method: "get",
    path: "/relay/inbound",
    summary:
      "Operator: mail that came back through Email Routing (bounces, complaints, auto-replies, rejections) by day and kind",
    operationId: "adminInbound",
    auth: true,
    query: InboundQuerySchema,
    ok: { status: 200, schema: Admin.inbound },
    errors: [401, 403, 422],
  },
  {
    method: "get",
    path: "/relay/inbound/reports",
    summary:
      "Operator: the DSNs and ARF reports that came back, newest first, " +
      "each with its verdict (acted, unauthenticated, mismatch, unmatched, ...) and its first 64 KiB",
    operationId: "adminInboundReports",
    auth: true,
    query: ReportsQuerySchema,
    ok: { status: 200, schema: Admin.reports },
    errors: [401, 403, 422],
  },
  {
    method: "get",
    path: "/relay/stats",
    summary: "Operator: delivered/bounced/deferred/failed per minute over a window",
    operationId: "adminStats",
    auth: true,
    query: StatsQuerySchema,
    ok: { status: 200, schema: Admin.stats },
    errors: [401, 403, 422],
  },
];

/** Egress pools and their members' health. */
export const EGRESS_ROUTES: Operation[] = [
  {
    method: "get",
    path: "/relay/egress",
    summary: "Operator: egress pools, each member's health, and the latest suspensions, failovers and returns",
    operationId: "adminEgress",
    auth: true,
    ok: { status: 200, schema: EgressView },
    errors: [401, 403],
  },
];
