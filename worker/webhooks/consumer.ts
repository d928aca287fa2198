/**
 * The `webhooks` and `webhooks-slow` Queue consumer: signed webhook delivery with retries, dead
 * letters and per-endpoint health.
 *
 * DESCRIPTION
 *   handleWebhooksBatch(batch, env)  each message is one event for one endpoint, or a bundle
 *       of one publication's events for one endpoint (webhooks/jobs.ts), whose events are
 *       handled each as a message of its own (webhook-bundles.ts: the bundle's queue message
 *       is settled once all are; one that is retried leaves as a job of its own). Events are
 *       grouped by endpoint and every endpoint's lane runs
 *       concurrently; inside a lane at most the endpoint's window (core/endpoint-health.ts) is
 *       in flight, each request with its own timeout (15 s). Per attempt (core/retry.ts):
 *         2xx                        ack;
 *         410                        the endpoint is disabled (status "disabled"), the event
 *                                    dead-lettered, and the lane's other events too;
 *         other failure              re-sent with the schedule's delay (or Retry-After on
 *                                    429/503) and attempt + 1, same webhook-id; when the
 *                                    schedule is used up, dead-lettered (D1, listed by
 *                                    GET /relay/webhooks/:id/dead-letters, replayable).
 *       A retry is ack + re-send with delaySeconds (at most 12 h; a later due time rides in
 *       notBeforeMs and an early arrival is re-delayed), not msg.retry(), so the attempt
 *       number lives in the message and the queue's own retries stay for crashes.
 *       While an endpoint is backed off (dead period after failed cohorts, or a Retry-After
 *       throttle) its pending deliveries are re-sent delayed until the block ends, without
 *       using up an attempt. Health is read from and written back to D1 once per batch.
 *       The SSRF guard runs again before sending (webhooks/send.ts); a refused target, a
 *       disabled endpoint or a deleted event is dead-lettered, a deleted endpoint dropped.
 *
 *   Why one slow endpoint never delays another: requests of one batch run concurrently, but a
 *   batch ends with its slowest request, and the next batch of the queue waits for it (always
 *   so under wrangler dev; in production until the consumer scales out). So an endpoint whose
 *   request took longer than SLOW_MS is marked slow (slowUntilMs, stored with its health) for
 *   SLOW_MARK_MS, and while it is slow the `webhooks` consumer forwards its deliveries, untried,
 *   to the `webhooks-slow` queue, whose consumer delivers them the same way. A slow endpoint
 *   then holds up only other slow endpoints; a fast answer on the slow lane clears the mark.
 *
 * INVARIANTS
 *   Each message is acked or retried on its own; one bad message never fails the batch. The
 *   webhook-id never changes across attempts, re-sends, lane changes and replays.
 *
 * ERRORS
 *   A D1 or queue failure while handling a message retries that message (same attempt).
 */
import { endpointsByIds, healthUpsertStatement, readHealth } from "../db/webhook-deliveries";
import type { EndpointRow } from "../db/webhooks";
import { initialHealth, type EndpointHealth } from "./core/endpoint-health";
import { decideAfterAttempt } from "./core/retry";
import type { WebhookConfig } from "./core/webhook-config";
import { isWebhookBundle, isWebhookJob } from "./jobs";
import { BundleLedger } from "./bundles";
import { guardTarget, signingSecrets } from "./send";
import { resolvedTarget } from "../net/fetch-guard";
import { settingsOf } from "../settings/settings";
import {
  applyDecision,
  deadLetter,
  forwardToSlowLane,
  log,
  logFailedAttempt,
  resendAt,
  retryLater,
  runWindow,
  type Item,
  type Lane,
} from "./lane";

/** An arrival this much before its due time is re-delayed, ms. */
const EARLY_SLACK_MS = 1_000;

/** Endpoint health as stored: the core's state plus the slow mark. */
type StoredHealth = EndpointHealth & { slowUntilMs?: number | null };

function healthOf(stored: unknown, cfg: WebhookConfig): StoredHealth {
  const s = stored as Partial<StoredHealth> | undefined;
  if (s?.v !== 1 || typeof s.window !== "number") return { ...initialHealth(cfg.health), slowUntilMs: null };
  // In-flight counts do not outlive an invocation: a crashed one must not leak slots.
  return { ...(s as StoredHealth), inflight: 0 };
}

/** Settles items that must not be sent now; returns the ones to send. */
async function triage(env: Env, endpoint: EndpointRow | undefined, items: Item[]): Promise<Item[]> {
  const nowMs = Date.now();
  const send: Item[] = [];
  for (const it of items) {
    try {
      if (!endpoint || endpoint.tenant_id !== it.job.tenant)
        it.msg.ack(); // deleted endpoint: nothing to deliver to
      else if (it.job.notBeforeMs !== undefined && it.job.notBeforeMs - nowMs > EARLY_SLACK_MS)
        await resendAt(env, it, it.job, it.job.notBeforeMs);
      else if (endpoint.status !== "enabled") await deadLetter(env, it, "endpoint disabled");
      else send.push(it);
    } catch (e) {
      retryLater(it, e);
    }
  }
  return send;
}

/** Delivers one endpoint's items; returns the lane (for its health) or null. */
async function runLane(
  env: Env,
  cfg: WebhookConfig,
  slowLane: boolean,
  endpoint: EndpointRow | undefined,
  stored: unknown,
  items: Item[],
): Promise<Lane | null> {
  const send = await triage(env, endpoint, items);
  if (!endpoint || send.length === 0) return null;
  // The URL, then every address its host name resolves to (DoH), before each send.
  const resolved = guardTarget(env, endpoint.endpoint) ?? (await resolvedTarget(env, endpoint.endpoint));
  const refused = typeof resolved === "string" ? resolved : resolved.kind === "refused" ? resolved.reason : null;
  if (refused !== null) {
    await Promise.all(send.map((it) => deadLetter(env, it, refused).catch((e) => retryLater(it, e))));
    return null;
  }
  const { slowUntilMs, ...health } = healthOf(stored, cfg);
  const storedJson = stored === undefined ? null : JSON.stringify(stored);
  const lane: Lane = {
    env,
    cfg,
    endpoint,
    health,
    slowUntilMs: slowUntilMs ?? null,
    slowLane,
    storedJson,
    secrets: [],
    disabled: false,
  };
  if (typeof resolved !== "string" && resolved.kind === "unresolved") {
    // As a network error of every item: retried on the usual schedule, counted as attempts.
    const nowMs = Date.now();
    await Promise.all(
      send.map((it) => {
        const decision = decideAfterAttempt(
          { attempt: it.job.attempt, outcome: { kind: "network-error", message: resolved.reason }, nowMs },
          cfg.retry,
        );
        logFailedAttempt(it, { kind: "network-error", message: resolved.reason }, decision);
        return applyDecision(lane, it, decision).catch((e) => retryLater(it, e));
      }),
    );
    return null;
  }
  if (!slowLane && lane.slowUntilMs !== null && lane.slowUntilMs > Date.now()) {
    await forwardToSlowLane(env, send);
    return null;
  }
  try {
    lane.secrets = await signingSecrets(env, endpoint, Date.now());
  } catch (e) {
    for (const it of send) retryLater(it, e);
    return null;
  }
  await runWindow(lane, send);
  return lane;
}

/** Valid jobs (a bundle's events each on its own) grouped by endpoint; malformed bodies are acked and logged. */
function groupJobs(batch: MessageBatch<unknown>, ledger: BundleLedger): Map<string, Item[]> {
  const groups = new Map<string, Item[]>();
  for (const msg of batch.messages) {
    const items: Item[] = isWebhookJob(msg.body)
      ? [{ msg, job: msg.body }]
      : isWebhookBundle(msg.body)
        ? ledger.expand(msg, msg.body)
        : [];
    if (items.length === 0) {
      log("webhooks: malformed queue message", { id: msg.id });
      msg.ack();
      continue;
    }
    for (const it of items) {
      const list = groups.get(it.job.endpointId) ?? [];
      list.push(it);
      groups.set(it.job.endpointId, list);
    }
  }
  return groups;
}

/** Stores the lanes' endpoint health and slow marks (in-flight counts are never stored). */
async function storeHealth(env: Env, lanes: Lane[]): Promise<void> {
  // A healthy endpoint's state mostly comes back as it was: it is written only when it changed (a row written each time otherwise).
  const changed = lanes
    .map((l) => ({ l, state: { ...l.health, inflight: 0, slowUntilMs: l.slowUntilMs } }))
    .filter(({ l, state }) => JSON.stringify(state) !== l.storedJson);
  const stmts = changed.map(({ l, state }) => healthUpsertStatement(env.DB, l.endpoint.id, state, Date.now()));
  if (stmts.length > 0)
    await env.DB.batch(stmts).catch((e) =>
      log("webhooks: health write failed", { detail: e instanceof Error ? e.message : String(e) }),
    );
}

/** The queue handler of both lanes. */
export async function handleWebhooksBatch(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const cfg = settingsOf(env).webhooks;
  const slowLane = batch.queue === "webhooks-slow";
  const ledger = new BundleLedger();
  try {
    await deliverBatch(env, cfg, slowLane, groupJobs(batch, ledger));
  } finally {
    await ledger.settle(slowLane ? env.WEBHOOKS_SLOW : env.WEBHOOKS);
  }
}

/** Delivers the grouped items of one batch, endpoint by endpoint, and stores the endpoints' health. */
async function deliverBatch(
  env: Env,
  cfg: WebhookConfig,
  slowLane: boolean,
  groups: Map<string, Item[]>,
): Promise<void> {
  if (groups.size === 0) return;
  const ids = [...groups.keys()];
  let endpoints: Map<string, EndpointRow>;
  let health: Map<string, unknown>;
  try {
    endpoints = new Map((await endpointsByIds(env.DB, ids)).map((r) => [r.id, r]));
    health = await readHealth(env.DB, ids);
  } catch (e) {
    for (const list of groups.values()) for (const it of list) retryLater(it, e);
    return;
  }
  const lanes = await Promise.all(
    ids.map((id) => runLane(env, cfg, slowLane, endpoints.get(id), health.get(id), groups.get(id) ?? [])),
  );
  await storeHealth(
    env,
    lanes.filter((l): l is Lane => l !== null),
  );
}
