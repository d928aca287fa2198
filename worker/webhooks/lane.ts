/**
 * One endpoint's lane of the webhooks consumer: its items sent within the endpoint's window, each
 * attempt's outcome fed to the endpoint's health, and each item settled by the retry decision.
 *
 * DESCRIPTION
 *   runWindow(lane, items)  starts items while the endpoint's window (core/endpoint-health.ts) has a
 *       slot, each request with its own timeout; stops starting once the lane is disabled, marked
 *       slow (the rest go to webhooks-slow untried), backed off, or out of its time budget
 *       (LANE_BUDGET_MS), and re-sends the rest delayed with their attempts unchanged.
 *   applyDecision(lane, item, d)  carries out core/retry.ts's decision: ack, re-send at d.atMs with
 *       the next attempt, dead-letter, or disable the endpoint (410) and dead-letter.
 *   resendAt, deadLetter, forwardToSlowLane, retryLater  the ways an item leaves a batch.
 *
 * INVARIANTS
 *   A re-send keeps the webhook-id and rides its due time in notBeforeMs; every item is acked or
 *   retried exactly once; a request slower than SLOW_MS marks the endpoint slow for SLOW_MARK_MS.
 *
 * ERRORS
 *   A D1 or queue failure while handling an item retries that item (same attempt).
 */
import { disableEndpoint, feedBodyOf, insertDeadLetter } from "../db/webhook-deliveries";
import type { EndpointRow } from "../db/webhooks";
import { acquireSlot, onDeliveryFailure, onDeliverySuccess, type EndpointHealth } from "./core/endpoint-health";
import { decideAfterAttempt, parseRetryAfter, type HttpOutcome, type RetryDecision } from "./core/retry";
import type { WebhookConfig } from "./core/webhook-config";
import { delaySecondsFor, enqueueJobs, type WebhookJob } from "./jobs";
import type { JobMessage } from "./bundles";
import { postWebhook } from "./send";

/** A request slower than this marks its endpoint slow, ms. */
const SLOW_MS = 2_000;

/** How long a slow mark lasts without a fast answer, ms. */
const SLOW_MARK_MS = 600_000;

/** How long one lane may keep starting deliveries before it re-sends the rest, ms. */
const LANE_BUDGET_MS = 20_000;

/** One job to deliver and the queue message that carries it (a bundle's message for a bundled event). */
export type Item = { msg: JobMessage; job: WebhookJob };

/** What a lane works with. */
export interface Lane {
  env: Env;
  cfg: WebhookConfig;
  endpoint: EndpointRow;
  health: EndpointHealth;
  slowUntilMs: number | null;
  /** Whether this is the webhooks-slow consumer. */
  slowLane: boolean;
  /** The state as stored when the lane started (JSON), so an unchanged state is not written again. */
  storedJson: string | null;
  secrets: string[];
  disabled: boolean;
}

/** One JSON error line on the console. */
export function log(error: string, fields: Record<string, unknown>): void {
  console.error(JSON.stringify({ error, ...fields }));
}

/** One line per failed attempt: which delivery, what came back, what happens next; never a stack or a body. */
export function logFailedAttempt(item: Item, outcome: HttpOutcome, d: RetryDecision): void {
  const got =
    outcome.kind === "response"
      ? { status: outcome.status }
      : outcome.kind === "timeout"
        ? { error: "timeout" }
        : { error: "network", detail: (outcome.message ?? "").slice(0, 200) };
  const next =
    d.kind === "retry" ? { next_attempt: d.nextAttempt, next_at: new Date(d.atMs).toISOString() } : { next: d.kind };
  console.warn(
    JSON.stringify({
      warning: "webhooks: attempt failed",
      endpoint: item.job.endpointId,
      event: item.job.eventId,
      attempt: item.job.attempt,
      ...got,
      ...next,
    }),
  );
}

/** Logs why handling failed and lets the queue retry the message (same attempt). */
export function retryLater(item: Item, e: unknown): void {
  log("webhooks: handling failed", {
    event: item.job.eventId,
    endpoint: item.job.endpointId,
    detail: e instanceof Error ? e.message : String(e),
  });
  item.msg.retry({ delaySeconds: Math.min(2 ** Math.max(item.msg.attempts, 1), 300) });
}

/** Re-sends the job (same attempt unless changed) to be tried at atMs, then acks the original. */
export async function resendAt(env: Env, item: Item, job: WebhookJob, atMs: number): Promise<void> {
  await enqueueJobs(env.WEBHOOKS, [
    { job: { ...job, notBeforeMs: atMs }, delaySeconds: delaySecondsFor(atMs, Date.now()) },
  ]);
  item.msg.ack();
}

/** Moves items, untried, to the webhooks-slow queue. */
export async function forwardToSlowLane(env: Env, items: Item[]): Promise<void> {
  try {
    await enqueueJobs(
      env.WEBHOOKS_SLOW,
      items.map((it) => ({ job: it.job })),
    );
    for (const it of items) it.msg.ack();
  } catch (e) {
    for (const it of items) retryLater(it, e);
  }
}

/** Records the item as a dead letter (D1) with the reason, then acks it. */
export async function deadLetter(env: Env, item: Item, reason: string): Promise<void> {
  const j = item.job;
  await insertDeadLetter(env.DB, {
    endpoint_id: j.endpointId,
    event_id: j.eventId,
    tenant_id: j.tenant,
    type: j.type,
    attempts: j.attempt,
    reason,
    created_at: Date.now(),
  });
  item.msg.ack();
}

/** The block a honoured Retry-After asks for, as an absolute time, if any. */
function throttleUntil(outcome: HttpOutcome, nowMs: number): number | undefined {
  if (outcome.kind !== "response" || (outcome.status !== 429 && outcome.status !== 503)) return undefined;
  const waitMs = parseRetryAfter(outcome.retryAfter, nowMs);
  return waitMs === null ? undefined : nowMs + waitMs;
}

/** Carries out the retry decision for one delivered-to item. */
export async function applyDecision(lane: Lane, item: Item, d: RetryDecision): Promise<void> {
  if (d.kind === "delivered") return item.msg.ack();
  if (d.kind === "retry") return resendAt(lane.env, item, { ...item.job, attempt: d.nextAttempt }, d.atMs);
  if (d.kind === "dead-letter") return deadLetter(lane.env, item, d.reason);
  lane.disabled = true;
  await disableEndpoint(lane.env.DB, lane.endpoint.id, d.reason, Date.now());
  await deadLetter(lane.env, item, `${d.reason}: endpoint disabled`);
}

/** One attempt of one item: send, feed the endpoint's health, act on the decision. */
async function attempt(lane: Lane, item: Item): Promise<void> {
  try {
    const body = item.job.body ?? (await feedBodyOf(lane.env.DB, item.job.eventId));
    if (body === null) {
      lane.health = { ...lane.health, inflight: Math.max(0, lane.health.inflight - 1) };
      return await deadLetter(lane.env, item, "event no longer stored");
    }
    const startMs = Date.now();
    const outcome = await postWebhook({
      url: lane.endpoint.endpoint,
      id: item.job.eventId,
      body,
      secrets: lane.secrets,
      timeoutMs: lane.cfg.timeoutMs,
      nowMs: startMs,
    });
    const nowMs = Date.now();
    lane.slowUntilMs = nowMs - startMs > SLOW_MS ? nowMs + SLOW_MARK_MS : null;
    const decision = decideAfterAttempt({ attempt: item.job.attempt, outcome, nowMs }, lane.cfg.retry);
    if (decision.kind !== "delivered") logFailedAttempt(item, outcome, decision);
    lane.health =
      decision.kind === "delivered"
        ? onDeliverySuccess(lane.health, lane.cfg.health)
        : onDeliveryFailure(lane.health, nowMs, lane.cfg.health, throttleUntil(outcome, nowMs));
    await applyDecision(lane, item, decision);
  } catch (e) {
    retryLater(item, e);
  }
}

/** Settles the lane's remaining items without trying them; true when it did. */
async function settleRest(lane: Lane, pending: Item[], nowMs: number, deadline: number): Promise<boolean> {
  if (lane.disabled) {
    await Promise.all(
      pending.splice(0).map((it) => deadLetter(lane.env, it, "endpoint disabled").catch((e) => retryLater(it, e))),
    );
    return true;
  }
  if (!lane.slowLane && lane.slowUntilMs !== null && lane.slowUntilMs > nowMs) {
    await forwardToSlowLane(lane.env, pending.splice(0));
    return true;
  }
  const slot = acquireSlot(lane.health, nowMs);
  const untilMs = slot.decision.kind === "wait" ? slot.decision.untilMs : nowMs > deadline ? nowMs + 1000 : null;
  if (untilMs === null) return false;
  // Backed off (or out of time): a later batch tries them, attempts unchanged.
  await Promise.all(
    pending.splice(0).map((it) => resendAt(lane.env, it, it.job, untilMs).catch((e) => retryLater(it, e))),
  );
  return true;
}

/** Sends the lane's items within the endpoint's window. */
export async function runWindow(lane: Lane, items: Item[]): Promise<void> {
  const pending = [...items];
  const running = new Set<Promise<void>>();
  const deadline = Date.now() + LANE_BUDGET_MS;
  while (pending.length > 0) {
    const nowMs = Date.now();
    if (await settleRest(lane, pending, nowMs, deadline)) break;
    const slot = acquireSlot(lane.health, nowMs);
    if (slot.decision.kind === "full") {
      if (running.size === 0) lane.health = { ...lane.health, inflight: 0 };
      else await Promise.race(running);
      continue;
    }
    lane.health = slot.state;
    const item = pending.shift() as Item;
    const p: Promise<void> = attempt(lane, item).finally(() => running.delete(p));
    running.add(p);
  }
  await Promise.all(running);
}
