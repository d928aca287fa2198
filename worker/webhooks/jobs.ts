/**
 * The `webhooks` Queue's messages: a bundle of one publication's events for one endpoint, or one
 * (endpoint, event) job, and how they are sent.
 *
 * DESCRIPTION
 *   WebhookBundle     { v: 2, tenant, endpointId, events: [{ eventId, type, body? }] }: what a
 *                     publication enqueues, one per endpoint (split to stay within one 64 KB
 *                     billed operation), first attempts only. A queue operation is billed per
 *                     message: a one-recipient email's email.sent and email.delivered are one
 *                     message, not two, and a ten-recipient email's twenty are one, not twenty.
 *   makeBundles(jobs) the bundles of a list of first-attempt jobs: grouped by (tenant, endpoint)
 *                     in order, each under BUNDLE_BYTES of JSON (a body that would pass
 *                     JOB_BODY_LIMIT_BYTES is left out, as in a job).
 *   jobsOfBundle(b)   the bundle's events as first-attempt jobs (how the consumer treats them:
 *                     each event keeps its own attempts, delays and dead letter; a retry leaves
 *                     the bundle as a job of its own).
 *   isWebhookBundle(x) shape check.
 *   WebhookJob        { v, tenant, endpointId, eventId, type, attempt, notBeforeMs?, body? }.
 *                     `body` is the envelope's JSON text, exactly as stored in event_log; it is
 *                     left out when the message would exceed JOB_BODY_LIMIT_BYTES (Queues take
 *                     at most 128 KB per message), and the consumer then reads it from D1.
 *   makeJob(...)      a first-attempt job for an event.
 *   enqueueJobs(q, items)  sendBatch in chunks of at most 100 messages and ~200 KB (the Queues
 *                     limits are 100 messages and 256 KB per batch), each with its delay.
 *   delaySecondsFor(atMs, nowMs)  the queue delay for a due time: whole seconds, rounded up, at
 *                     most 12 h (Queues' limit); a later due time is kept in notBeforeMs and the
 *                     consumer re-delays the job when it arrives early.
 *   isWebhookJob(x)   shape check of a received body.
 */

/** One delivery of one event to one endpoint. */
export interface WebhookJob {
  v: 1;
  tenant: string;
  endpointId: string;
  eventId: string;
  type: string;
  /** The attempt this message is for, 1-based; the same webhook-id on every one. */
  attempt: number;
  /** Not to be tried before this time (ms); absent = at once. */
  notBeforeMs?: number;
  /** The envelope JSON text; absent when too large for a queue message. */
  body?: string;
}

/** One publication's events for one endpoint, first attempts. */
export interface WebhookBundle {
  v: 2;
  tenant: string;
  endpointId: string;
  events: { eventId: string; type: string; body?: string }[];
}

/** Largest JSON of a bundle: one billed queue operation (64 KB) with room for the envelope. */
export const BUNDLE_BYTES = 60_000;

/** Largest body carried inside a queue message, bytes. */
export const JOB_BODY_LIMIT_BYTES = 100_000;
/** Queues' longest delay, seconds. */
export const MAX_DELAY_SECONDS = 43_200;
const BATCH_BYTES = 200_000;
const BATCH_MESSAGES = 100;

/** A first-attempt job; the body is left out when too large or not given (the consumer reads it: feedBodyOf). */
export function makeJob(
  tenant: string,
  endpointId: string,
  event: { id: string; type: string; body: string | null },
): WebhookJob {
  const job: WebhookJob = { v: 1, tenant, endpointId, eventId: event.id, type: event.type, attempt: 1 };
  return event.body !== null && new TextEncoder().encode(event.body).length <= JOB_BODY_LIMIT_BYTES
    ? { ...job, body: event.body }
    : job;
}

/** Whole seconds of queue delay until atMs (rounded up, capped at 12 h). */
export function delaySecondsFor(atMs: number, nowMs: number): number {
  return Math.min(MAX_DELAY_SECONDS, Math.max(0, Math.ceil((atMs - nowMs) / 1000)));
}

/** Shape check of a queue message body. */
export function isWebhookJob(x: unknown): x is WebhookJob {
  const j = x as Partial<WebhookJob> | null;
  return (
    typeof j === "object" &&
    j !== null &&
    j.v === 1 &&
    typeof j.tenant === "string" &&
    typeof j.endpointId === "string" &&
    typeof j.eventId === "string" &&
    typeof j.type === "string" &&
    typeof j.attempt === "number" &&
    j.attempt >= 1
  );
}

/** Sends jobs (or bundles) in batches within the Queues limits. */
export async function enqueueJobs(
  queue: Queue,
  items: readonly { job: WebhookJob | WebhookBundle; delaySeconds?: number }[],
): Promise<void> {
  let chunk: MessageSendRequest[] = [];
  let bytes = 0;
  const flush = async () => {
    if (chunk.length > 0) await queue.sendBatch(chunk);
    chunk = [];
    bytes = 0;
  };
  for (const { job, delaySeconds } of items) {
    const size = new TextEncoder().encode(JSON.stringify(job)).length + 64;
    if (chunk.length >= BATCH_MESSAGES || bytes + size > BATCH_BYTES) await flush();
    chunk.push({ body: job, contentType: "json", ...(delaySeconds ? { delaySeconds } : {}) });
    bytes += size;
  }
  await flush();
}

const utf8 = new TextEncoder();

/** Bundles of first-attempt jobs: per (tenant, endpoint), in order, each under BUNDLE_BYTES. */
export function makeBundles(jobs: readonly WebhookJob[]): WebhookBundle[] {
  const out: WebhookBundle[] = [];
  const open = new Map<string, { bundle: WebhookBundle; bytes: number }>();
  for (const j of jobs) {
    const event = { eventId: j.eventId, type: j.type, ...(j.body !== undefined ? { body: j.body } : {}) };
    let size = utf8.encode(JSON.stringify(event)).length + 1;
    if (size > BUNDLE_BYTES - 200) {
      delete event.body; // read from D1 by the consumer
      size = utf8.encode(JSON.stringify(event)).length + 1;
    }
    const key = `${j.tenant}\u0000${j.endpointId}`;
    let cur = open.get(key);
    if (!cur || cur.bytes + size > BUNDLE_BYTES) {
      cur = {
        bundle: { v: 2, tenant: j.tenant, endpointId: j.endpointId, events: [] },
        bytes: utf8.encode(JSON.stringify({ v: 2, tenant: j.tenant, endpointId: j.endpointId, events: [] })).length,
      };
      open.set(key, cur);
      out.push(cur.bundle);
    }
    cur.bundle.events.push(event);
    cur.bytes += size;
  }
  return out;
}

/** The bundle's events as first-attempt jobs. */
export function jobsOfBundle(b: WebhookBundle): WebhookJob[] {
  return b.events.map((e) => ({
    v: 1,
    tenant: b.tenant,
    endpointId: b.endpointId,
    eventId: e.eventId,
    type: e.type,
    attempt: 1,
    ...(e.body !== undefined ? { body: e.body } : {}),
  }));
}

/** Shape check of a bundle body. */
export function isWebhookBundle(x: unknown): x is WebhookBundle {
  const b = x as Partial<WebhookBundle> | null;
  return (
    typeof b === "object" &&
    b !== null &&
    b.v === 2 &&
    typeof b.tenant === "string" &&
    typeof b.endpointId === "string" &&
    Array.isArray(b.events) &&
    b.events.length > 0 &&
    b.events.every(
      (e) =>
        typeof e?.eventId === "string" &&
        typeof e.type === "string" &&
        (e.body === undefined || typeof e.body === "string"),
    )
  );
}
