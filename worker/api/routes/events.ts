/**
 * The pull feed of delivery-status events, and the delivery side of webhook endpoints:
 * dead letters and replay.
 *
 * DESCRIPTION
 *   GET  /relay/events?after=<event id>&limit=&type=  the caller's events, oldest first, after
 *        the given event → { object: "list", has_more, data: [{ id, type, created_at, data }] }:
 *        exactly the envelopes pushed to webhooks, `id` = their webhook-id, so a consumer can
 *        catch up after an outage. `type` is one event type or a comma-separated list.
 *   GET  /relay/webhooks/:id/dead-letters?limit=&after=<event id>  deliveries to the endpoint
 *        that used up the retry schedule (or were refused), oldest first.
 *   POST /relay/webhooks/:id/replay  { from?, to? (ISO 8601 times), after?, until? (event ids) }
 *        re-enqueues the caller's events in that range that the endpoint's filter takes, first
 *        attempt, same webhook-id; at most 1000 per call (`has_more` and `last_event_id` to
 *        continue with `after`). Marks the replayed dead letters.
 *
 * ERRORS
 *   422 validation_error for a bad query or body, an unknown cursor event, or replay to a
 *   disabled endpoint; 404 not_found for another tenant's or a missing endpoint.
 */
import { Hono } from "hono";
import { z } from "zod";
import type { FeedRow } from "../../db/events";
import { feedRange, feedSeqOf, listFeed } from "../../db/feed";
import { listDeadLetters, markReplayed } from "../../db/webhook-deliveries";
import { getEndpoint } from "../../db/webhooks";
import { EMAIL_EVENT_TYPES } from "../../webhooks/core/envelope";
import { endpointWants } from "../../webhooks/core/publication";
import { enqueueJobs, makeJob } from "../../webhooks/jobs";
import { emailOfEventId, LEGACY_EVENT_ID } from "../../webhooks/core/event-id";
import { isMessageId } from "../../model/ids";
import { type AppEnv } from "../http/context";
import { parseInput, readJson } from "../http/body";
import { ApiError } from "../../model/errors";

const REPLAY_LIMIT = 1000;

/** An event id: "evt_", the email id, "_" and 16 hex digits (core/event-id.ts), or the earlier form (evt_ and 32 hex digits). */
const EventIdSchema = z
  .string()
  .max(200)
  .refine(
    (id) => LEGACY_EVENT_ID.test(id) || (emailOfEventId(id) !== null && isMessageId(emailOfEventId(id)!)),
    "expected an event id (evt_, the email id, _ and 16 hex digits)",
  );
const TypeListSchema = z
  .string()
  .transform((s) =>
    s
      .split(",")
      .map((t) => t.trim())
      .filter((t) => t !== ""),
  )
  .pipe(z.array(z.enum(EMAIL_EVENT_TYPES as [string, ...string[]])).max(EMAIL_EVENT_TYPES.length));

/** GET /relay/events query. */
export const EventFeedQuerySchema = z.object({
  after: EventIdSchema.optional(),
  limit: z.coerce.number().int().min(1).max(100).default(100),
  type: TypeListSchema.optional(),
});

/** GET /relay/webhooks/:id/dead-letters query. */
export const DeadLetterQuerySchema = z.object({
  after: EventIdSchema.optional(),
  limit: z.coerce.number().int().min(1).max(100).default(50),
});

/** POST /relay/webhooks/:id/replay body: a time range, an event id range, or both. */
export const ReplaySchema = z
  .object({
    from: z.iso.datetime({ offset: true }).optional(),
    to: z.iso.datetime({ offset: true }).optional(),
    after: EventIdSchema.optional(),
    until: EventIdSchema.optional(),
  })
  .strict()
  .refine((r) => r.from !== undefined || r.to !== undefined || r.after !== undefined || r.until !== undefined, {
    message: "give a time range (from, to) or an event id range (after, until)",
  });

/** The feed item of a stored envelope: `id` first, then the envelope as pushed. */
function feedItem(row: FeedRow): Record<string, unknown> {
  return { id: row.event_id, ...(JSON.parse(row.body) as Record<string, unknown>) };
}

/** The tenant's seq of a cursor event, or a 422. */
async function seqOf(db: D1Database, tenant: string, id: string, field: string): Promise<number> {
  const seq = await feedSeqOf(db, tenant, id);
  if (seq === null) throw new ApiError(422, "validation_error", `Invalid \`${field}\`: no such event.`);
  return seq;
}

/** GET /relay/events (mounted behind the API key middleware). */
export function eventRoutes() {
  const r = new Hono<AppEnv>();
  r.get("/", async (c) => {
    const q = parseInput(EventFeedQuerySchema, c.req.query());
    const tenant = c.get("tenant");
    const afterSeq = q.after === undefined ? 0 : await seqOf(c.env.DB, tenant, q.after, "after");
    const page = await listFeed(c.env.DB, tenant, { afterSeq, limit: q.limit, ...(q.type ? { types: q.type } : {}) });
    return c.json({ object: "list", has_more: page.hasMore, data: page.rows.map(feedItem) });
  });
  return r;
}

function timeOf(iso: string | undefined, fallback: number): number {
  return iso === undefined ? fallback : Date.parse(iso);
}

/** /relay/webhooks/:id/dead-letters and /replay (mounted behind the API key middleware). */
export function webhookDeliveryRoutes() {
  const r = new Hono<AppEnv>();

  r.get("/:id/dead-letters", async (c) => {
    const q = parseInput(DeadLetterQuerySchema, c.req.query());
    const endpoint = await getEndpoint(c.env.DB, c.get("tenant"), c.req.param("id"));
    if (!endpoint) throw new ApiError(404, "not_found", "Webhook not found.");
    const page = await listDeadLetters(c.env.DB, endpoint.id, q);
    return c.json({
      object: "list",
      has_more: page.hasMore,
      data: page.rows.map((d) => ({
        object: "dead_letter",
        event_id: d.event_id,
        type: d.type,
        attempts: d.attempts,
        reason: d.reason,
        dead_lettered_at: new Date(d.created_at).toISOString(),
        replayed_at: d.replayed_at === null ? null : new Date(d.replayed_at).toISOString(),
      })),
    });
  });

  r.post("/:id/replay", async (c) => {
    const body = parseInput(ReplaySchema, (await readJson(c, 16 * 1024)).value);
    const tenant = c.get("tenant");
    const endpoint = await getEndpoint(c.env.DB, tenant, c.req.param("id"));
    if (!endpoint) throw new ApiError(404, "not_found", "Webhook not found.");
    if (endpoint.status !== "enabled")
      throw new ApiError(
        422,
        "validation_error",
        'The webhook is disabled; enable it (PATCH status "enabled") before replaying.',
      );
    const afterSeq = body.after === undefined ? 0 : await seqOf(c.env.DB, tenant, body.after, "after");
    const untilSeq =
      body.until === undefined ? Number.MAX_SAFE_INTEGER : await seqOf(c.env.DB, tenant, body.until, "until");
    const rows = await feedRange(c.env.DB, tenant, {
      afterSeq,
      untilSeq,
      fromMs: timeOf(body.from, 0),
      toMs: timeOf(body.to, Number.MAX_SAFE_INTEGER),
      limit: REPLAY_LIMIT + 1,
    });
    const page = rows.slice(0, REPLAY_LIMIT);
    const filter = endpoint.events === null ? null : (JSON.parse(endpoint.events) as string[]);
    const chosen = page.filter((row) => endpointWants(filter, row.type));
    await enqueueJobs(
      c.env.WEBHOOKS,
      chosen.map((row) => ({
        job: makeJob(tenant, endpoint.id, { id: row.event_id, type: row.type, body: row.body }),
      })),
    );
    await markReplayed(
      c.env.DB,
      endpoint.id,
      chosen.map((row) => row.event_id),
      Date.now(),
    );
    const last = page[page.length - 1];
    return c.json(
      {
        object: "replay",
        webhook_id: endpoint.id,
        enqueued: chosen.length,
        has_more: rows.length > REPLAY_LIMIT,
        last_event_id: last?.event_id ?? null,
      },
      202,
    );
  });

  return r;
}
