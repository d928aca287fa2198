/**
 * The `webhooks` Queue's messages: one per (endpoint, event), and how they are sent.
 *
 * DESCRIPTION
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

/** Largest body carried inside a queue message, bytes. */
export const JOB_BODY_LIMIT_BYTES = 100_000;
/** Queues' longest delay, seconds. */
export const MAX_DELAY_SECONDS = 43_200;
const BATCH_BYTES = 200_000;
const BATCH_MESSAGES = 100;

/** A first-attempt job; the body is left out when too large. */
export function makeJob(tenant: string, endpointId: string, event: { id: string; type: string; body: string }): WebhookJob {
  const job: WebhookJob = { v: 1, tenant, endpointId, eventId: event.id, type: event.type, attempt: 1 };
  return new TextEncoder().encode(event.body).length <= JOB_BODY_LIMIT_BYTES ? { ...job, body: event.body } : job;
}

/** Whole seconds of queue delay until atMs (rounded up, capped at 12 h). */
export function delaySecondsFor(atMs: number, nowMs: number): number {
  return Math.min(MAX_DELAY_SECONDS, Math.max(0, Math.ceil((atMs - nowMs) / 1000)));
}

/** Shape check of a queue message body. */
export function isWebhookJob(x: unknown): x is WebhookJob {
  const j = x as Partial<WebhookJob> | null;
  return typeof j === "object" && j !== null && j.v === 1 && typeof j.tenant === "string" && typeof j.endpointId === "string"
    && typeof j.eventId === "string" && typeof j.type === "string" && typeof j.attempt === "number" && j.attempt >= 1;
}

/** Sends jobs in batches within the Queues limits. */
export async function enqueueJobs(queue: Queue, items: readonly { job: WebhookJob; delaySeconds?: number }[]): Promise<void> {
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
