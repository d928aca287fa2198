/**
 * The accept path: Idempotency-Key, bodies to R2 and classification, envelopes to the Outbox.
 *
 * DESCRIPTION
 *   idempotencyOf(c, tenant, rawBody)  the validated Idempotency-Key header with the request hash,
 *                                      or null; a bad key is 400 invalid_idempotency_key.
 *   replayIfKnown                      a finished request's stored response for a retry, or null;
 *                                      409s for a different payload or a request in flight.
 *   storeAndQueue                      the qmail order: every body to R2 (`mess/<id>`) first (with
 *                                      the classify stage's decisions, made meanwhile), then one
 *                                      Outbox request: one transaction with the envelopes, their
 *                                      decisions and the idempotency record (the Outbox admits
 *                                      decided ones to the Transport DOs with its next
 *                                      AdmissionBatch). Messages left undecided (scheduled, or
 *                                      a failed look-up) go to the classify queue, and a message with
 *                                      attachments gets the copy kept for their links
 *                                      (PreparedMessage.keep), both after the commit. The response
 *                                      is stored with the key, so a retry gets it byte for byte.
 *                                      While the Outbox says mail arrives faster than it is
 *                                      delivered, the answer waits IN_FLOW_DELAY_MS.
 *
 * INVARIANTS
 *   Nothing is acknowledged before its envelope is committed. A stop after the body write leaves an
 *   orphan the sweeper deletes; a stop after the commit leaves a message the sweeper re-queues.
 *
 * ERRORS
 *   ApiError 400 invalid_idempotency_key, 409 invalid_idempotent_request,
 *   409 concurrent_idempotent_requests, 500 application_error when accept took too long.
 */
import type { Context } from "hono";
import { bodyKey, outboxName } from "../model/ids";
import type { IdempotencyClaim, IdempotencyResult, StoredResponse } from "../model/message";
import type { ClassifyJob } from "../model/message";
import { bulkOf, type NewMessage } from "../model/message";
import { decideNew } from "../classify/classify-message";
import type { SuppressionPrefetch } from "../classify/lookups";
import { ApiError } from "../model/errors";
import type { PreparedMessage } from "./prepare";
import { IdempotencyKeySchema } from "./schemas";
import { settingsOf } from "../settings/settings";

/** A request's idempotency claim and the token reserving it. */
export interface Idempotency {
  claim: IdempotencyClaim;
  token: string;
}

/** What storeAndQueue needs. */
export interface AcceptInput {
  tenant: string;
  shard: number;
  idempotency: Idempotency | null;
  prepared: PreparedMessage[];
  response: StoredResponse;
  /** Gives the accept slot back (the accept gate's leaveGate), once the messages are stored. */
  leaveGate?: (() => void) | undefined;
  /** The suppression entries the request read with its key (api/http/send-reads.ts), if it did. */
  prefetch?: SuppressionPrefetch | undefined;
}

async function sha256Hex(text: string): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** The request's Idempotency-Key claim, or null when the header is absent. */
export async function idempotencyOf(c: Context, rawBody: string): Promise<Idempotency | null> {
  const key = c.req.header("idempotency-key");
  if (key === undefined) return null;
  if (!IdempotencyKeySchema.safeParse(key).success) {
    throw new ApiError(
      400,
      "invalid_idempotency_key",
      "The Idempotency-Key must be 1–256 printable ASCII characters without spaces.",
    );
  }
  const hash = await sha256Hex(`${c.req.method} ${c.req.path}\n${rawBody}`);
  return { claim: { key, hash }, token: crypto.randomUUID() };
}

/** The stored response for a finished request with this key, or an ApiError for a conflict. */
function resolveSeen(r: Exclude<IdempotencyResult, { kind: "fresh" }>): StoredResponse {
  if (r.kind === "replay") return r.response;
  if (r.kind === "mismatch") {
    throw new ApiError(
      409,
      "invalid_idempotent_request",
      "Same idempotency key used with a different request payload. Change your idempotency key or payload.",
    );
  }
  throw new ApiError(
    409,
    "concurrent_idempotent_requests",
    "Same idempotency key used while original request is still in progress. Try the request again later.",
  );
}

/** Whether a body's UTF-8 text is at most `limit` bytes. */
function fitsInline(b: string | Uint8Array, limit: number): boolean {
  if (typeof b !== "string") return b.byteLength <= limit;
  // A UTF-16 unit is 1 to 3 bytes: encode only when the bounds do not decide.
  if (b.length > limit) return false;
  return b.length * 3 <= limit || new TextEncoder().encode(b).byteLength <= limit;
}

/** Stores the prepared messages and queues them for classification; returns the response to send. */
export async function storeAndQueue(env: Env, input: AcceptInput): Promise<StoredResponse> {
  const outbox = env.OUTBOX.getByName(outboxName(input.shard));
  const idem = input.idempotency;
  let undecided: NewMessage[] = input.prepared.map((p) => p.record);
  let pauseMs = 0;
  let admitting: string[] = [];
  if (idem) {
    const seen = await outbox.reserve(input.tenant, idem.claim, idem.token);
    if (seen.kind !== "fresh") return resolveSeen(seen);
  }
  try {
    // Small bodies ride in the Outbox row (no R2 put now, no R2 get at delivery); the rest go to R2 first.
    // The classify stage's decisions are made here, beside the body writes, so that the Outbox
    // stores each message decided in its accept request and admits it with its next batch (no
    // classify queue message).
    const limit = settingsOf(env).inlineBodyBytes;
    const inline = input.prepared.map((p) => fitsInline(p.body, limit));
    const bodiesAt = Date.now();
    const [decisions] = await Promise.all([
      decideNew(
        env,
        input.tenant,
        input.prepared.map((p) => p.record),
        input.prefetch,
      ),
      ...input.prepared
        .filter((_, i) => !inline[i])
        .map((p) => env.BODIES.put(bodyKey(p.record.id), p.body, { httpMetadata: { contentType: "message/rfc822" } })),
    ]);
    const messages = input.prepared.map((p, i): NewMessage => ({
      ...p.record,
      ...(inline[i] ? { body: p.body } : {}),
      ...(decisions[i] ? { decisions: decisions[i] } : {}),
    }));
    undecided = messages.filter((m) => m.decisions === undefined);
    const res = await outbox.accept(
      { tenant: input.tenant, idempotency: idem?.claim ?? null, messages, response: input.response, bodiesAt },
      idem?.token,
    );
    if (res.kind === "stale")
      throw new ApiError(
        500,
        "application_error",
        "Accepting the message took too long; nothing was queued. Retry the request.",
      );
    if (res.kind !== "accepted") return resolveSeen(res);
    pauseMs = res.pauseMs ?? 0;
    admitting = res.admitting ?? [];
  } catch (e) {
    if (idem) await outbox.release(input.tenant, idem.claim.key, idem.token).catch(() => undefined);
    throw e;
  }
  await Promise.all([queueForClassify(env, input.tenant, undecided), keepCopies(env, input.prepared)]);
  // Postfix's in_flow_delay: while mail arrives faster than it is delivered, the answer (the
  // message already safe) waits, so that a sender at full speed leaves the CPU to delivery.
  if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
  // The answer waits for the messages' admission (the Transport DO then holds them: their Outbox
  // rows need no entry in the sweeper's index), out of the accept slot: waiting costs the isolate nothing.
  input.leaveGate?.();
  if (admitting.length > 0) await outbox.admitted(admitting);
  return input.response;
}

/**
 * Writes the copies kept for attachment download links (model/files.ts; retention deletes them)
 * once the messages are accepted, so that they never hold up the accept itself. A failure is
 * only logged: the email goes out all the same, and its attachment links answer 404.
 */
async function keepCopies(env: Env, prepared: PreparedMessage[]): Promise<void> {
  await Promise.all(
    prepared
      .filter((p) => p.keep !== undefined)
      .map(async (p) => {
        try {
          await env.BODIES.put(p.keep!, p.body, { httpMetadata: { contentType: "message/rfc822" } });
        } catch (e) {
          const detail = e instanceof Error ? e.message : String(e);
          console.error(
            JSON.stringify({ error: "attachment copy not kept; its links answer 404", id: p.record.id, detail }),
          );
        }
      }),
  );
}

/** The HTTP response for a stored (or replayed) response. */
export function jsonResponse(r: StoredResponse): Response {
  return new Response(r.body, { status: r.status, headers: { "content-type": "application/json" } });
}

/** Bytes of one classify queue message at most: a queue operation is billed per 64 KB. */
const CLASSIFY_JOB_BYTES = 60_000;

/**
 * Hands new messages to the classify queues, as few queue messages as fit (see ClassifyJob), in
 * two lanes by size (BULK_LANE_RCPTS); a scheduled message carries no recipients (it is decided
 * when due). A failure is only logged (the sweeper re-queues).
 */
async function queueForClassify(env: Env, tenant: string, records: NewMessage[]): Promise<void> {
  const small = records.filter((r) => r.scheduledAt !== null || r.rcptTo.length <= BULK_LANE_RCPTS);
  const bulk = records.filter((r) => !small.includes(r));
  try {
    await Promise.all([
      sendJobs(env.CLASSIFY, classifyJobs(tenant, small)),
      sendJobs(env.CLASSIFY_BULK, classifyJobs(tenant, bulk)),
    ]);
  } catch (e) {
    console.error(
      JSON.stringify({
        error: "classify enqueue failed; the Outbox sweeper will retry",
        ids: records.map((r) => r.id),
        detail: e instanceof Error ? e.message : String(e),
      }),
    );
  }
}

/**
 * Messages of more recipients than this are classified in the `classify-bulk` queue: two lanes,
 * each with its own consumer, so a small message never waits behind a bulk job's classification.
 */
const BULK_LANE_RCPTS = 10;

/** The records as few classify jobs as fit (see ClassifyJob). */
function classifyJobs(tenant: string, records: NewMessage[]): ClassifyJob[] {
  const jobs: ClassifyJob[] = [];
  let batch: { id: string; tenant: string; rcpts: string[]; bulk?: { topic: string | null } }[] = [];
  let bytes = 0;
  for (const r of records) {
    if (r.scheduledAt !== null) {
      jobs.push({ id: r.id });
      continue;
    }
    const bulk = bulkOf(r.summary);
    const item = { id: r.id, tenant, rcpts: r.rcptTo, ...(bulk ? { bulk } : {}) };
    const size = JSON.stringify(item).length;
    if (batch.length > 0 && bytes + size > CLASSIFY_JOB_BYTES) {
      jobs.push({ batch });
      batch = [];
      bytes = 0;
    }
    batch.push(item);
    bytes += size;
  }
  if (batch.length > 0) jobs.push({ batch });
  return jobs;
}

async function sendJobs(queue: Queue, jobs: ClassifyJob[]): Promise<void> {
  for (let i = 0; i < jobs.length; i += 100)
    await queue.sendBatch(jobs.slice(i, i + 100).map((body) => ({ body, contentType: "json" as const })));
}
