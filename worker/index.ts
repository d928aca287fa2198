/**
 * The Worker entry: HTTP API, the classify, deliver, webhooks and email-events (Cloudflare Email
 * Service's sending events) queue consumers, the cron (the
 * Outbox sweepers and D1 retention; daily, the TLS-RPT reports), mail that comes back through Email Routing (bounces,
 * feedback reports: inbound/email.ts), and the Durable Object classes.
 */
import { createApp } from "./api/app";
import { handleClassifyBatch } from "./classify/consumer";
import { handleDeliverBatch } from "./delivery/consumer";
import { handleWebhooksBatch } from "./webhooks/consumer";
import { purgeExpired } from "./db/retention";
import { deleteLapsedClaims } from "./db/domains";
import { outboxName } from "./model/ids";
import { meterClass, meterWorker } from "./meter";
import { configProblems, notConfigured, servedFromEdge } from "./settings/config-check";
import { handleInbound } from "./inbound/email";
import { applyWarmups } from "./policy/warmup";
import { settingsOf } from "./settings/settings";
import { purgeKept } from "./receiving/retention";
import { sendTlsReports, TLSRPT_CRON } from "./tls-policy/tlsrpt";
import { EMAIL_EVENTS_QUEUE, handleEmailServiceBatch } from "./inbound/email-service";

import { TransportQueue as TransportQueueObject } from "../durable-objects/transport/transport-queue";
import { DestinationQueue as DestinationQueueObject } from "../durable-objects/destination/destination-queue";
import { Outbox as OutboxObject } from "../durable-objects/outbox/outbox";
import { DeliveryAgent as DeliveryAgentObject } from "./delivery/delivery-agent";

// Each Durable Object class with the meter around it (worker/meter/objects.ts): its storage, env,
// requests and duration counted where METER is "on"; made as it is everywhere else.
export const TransportQueue = meterClass("TransportQueue", TransportQueueObject);
export type TransportQueue = TransportQueueObject;
export const DestinationQueue = meterClass("DestinationQueue", DestinationQueueObject);
export type DestinationQueue = DestinationQueueObject;
export const Outbox = meterClass("Outbox", OutboxObject);
export type Outbox = OutboxObject;
export const DeliveryAgent = meterClass("DeliveryAgent", DeliveryAgentObject);
export type DeliveryAgent = DeliveryAgentObject;

const app = createApp();

/** Wakes every Outbox shard's sweeper (orphans can exist in a shard that never got an envelope). */
async function wakeSweepers(env: Env): Promise<void> {
  const n = settingsOf(env).outboxShards;
  await Promise.all(Array.from({ length: n }, (_, s) => env.OUTBOX.getByName(outboxName(s)).ensureSweep(s)));
}

/**
 * Deletes D1 rows past MESSAGE_RETENTION_DAYS (worker/db/retention.ts) and domain claims left
 * unverified past DOMAIN_CLAIM_TTL_HOURS; a failure waits for the next run.
 */
async function purgeD1(env: Env, nowMs: number): Promise<void> {
  try {
    const r = await purgeExpired(env.DB, nowMs, settingsOf(env).retentionMs / 86_400_000);
    if (r.rows > 0 || r.truncated) console.log(JSON.stringify({ event: "d1 retention", ...r }));
    // Received mail and the files kept for download links (worker/receiving/retention.ts).
    const k = await purgeKept(env, nowMs, settingsOf(env).retentionMs);
    if (k.rows > 0 || k.objects > 0 || k.truncated)
      console.log(JSON.stringify({ event: "kept files retention", ...k }));
    const lapsed = await deleteLapsedClaims(env.DB, nowMs - settingsOf(env).domainClaimTtlMs);
    if (lapsed > 0) console.log(JSON.stringify({ event: "domain claims lapsed", claims: lapsed }));
  } catch (e) {
    console.error(JSON.stringify({ error: "d1 retention failed", detail: e instanceof Error ? e.message : String(e) }));
  }
}

// Every entry runs with the metered env (meterWorker, worker/meter/objects.ts), and none runs while
// a production secret is missing or malformed (config-check.ts): requests get a 503 naming it,
// queue batches are retried later, the cron waits. A development Worker answers nothing that came
// through Cloudflare's edge (config-check.ts servedFromEdge).
export default meterWorker({
  fetch: (request, env, ctx) => {
    const edge = servedFromEdge(request, env);
    if (edge !== null) return edge;
    const problems = configProblems(env);
    if (problems.length > 0) return notConfigured(problems);
    return app.fetch(request, env, ctx);
  },
  queue: (b, env, _ctx) => {
    const problems = configProblems(env);
    if (problems.length > 0) throw new Error(`the relay is not configured: ${problems.join("; ")}`);
    return b.queue === "webhooks" || b.queue === "webhooks-slow"
      ? handleWebhooksBatch(b, env)
      : b.queue === "deliver"
        ? handleDeliverBatch(b, env)
        : b.queue === EMAIL_EVENTS_QUEUE
          ? handleEmailServiceBatch(b, env)
          : handleClassifyBatch(b, env); // classify, classify-bulk
  },
  scheduled: (controller, env, ctx) => {
    const problems = configProblems(env);
    if (problems.length > 0) {
      console.error(JSON.stringify({ error: "the relay is not configured; the sweepers wait", problems }));
      return;
    }
    if (controller.cron === TLSRPT_CRON) {
      ctx.waitUntil(
        sendTlsReports(env, controller.scheduledTime)
          .then((r) => console.log(JSON.stringify({ event: "tls-rpt reports", ...r })))
          .catch((e: unknown) => {
            console.error(
              JSON.stringify({
                error: "TLS-RPT reports not sent; the next day's run tries again",
                detail: e instanceof Error ? e.message : String(e),
              }),
            );
          }),
      );
      return;
    }
    ctx.waitUntil(wakeSweepers(env));
    ctx.waitUntil(purgeD1(env, controller.scheduledTime));
    // An IP warm-up's caps of the new day (a D1 read; the Transport DOs only when a day turned).
    ctx.waitUntil(
      applyWarmups(env, Math.floor(controller.scheduledTime / 1000)).catch((e: unknown) => {
        console.error(
          JSON.stringify({
            error: "warm-up caps not applied; the next run tries again",
            detail: e instanceof Error ? e.message : String(e),
          }),
        );
      }),
    );
  },
  email: async (message, env, _ctx) => {
    const problems = configProblems(env);
    // Thrown, Email Routing tells the sending server to try later: nothing is lost meanwhile.
    if (problems.length > 0) throw new Error(`the relay is not configured: ${problems.join("; ")}`);
    await handleInbound(message, env);
  },
});
