/**
 * The Worker entry: HTTP API, the classify, deliver and webhooks queue consumers, the sweeper cron, and the Durable
 * Object classes.
 */
import { createApp } from "./api/app";
import { handleClassifyBatch } from "./consumers/classify";
import { handleDeliverBatch } from "./consumers/deliver";
import { handleWebhooksBatch } from "./consumers/webhooks";
import { outboxName, shardCount } from "../durable-objects/storage/outbox-ids";

export { TransportQueue } from "../durable-objects/transport-queue";
export { DestinationQueue } from "../durable-objects/destination-queue";
export { Outbox } from "../durable-objects/outbox";

const app = createApp();

/** Wakes every Outbox shard's sweeper (orphans can exist in a shard that never got an envelope). */
async function wakeSweepers(env: Env): Promise<void> {
  const n = shardCount(env.OUTBOX_SHARDS);
  await Promise.all(Array.from({ length: n }, (_, s) => env.OUTBOX.getByName(outboxName(s)).ensureSweep(s)));
}

export default {
  fetch: (request, env, ctx) => app.fetch(request, env, ctx),
  queue: (batch, env, _ctx) => (batch.queue === "webhooks" || batch.queue === "webhooks-slow" ? handleWebhooksBatch(batch, env)
    : batch.queue === "deliver" ? handleDeliverBatch(batch, env) : handleClassifyBatch(batch, env)),
  scheduled: (_controller, env, ctx) => ctx.waitUntil(wakeSweepers(env)),
} satisfies ExportedHandler<Env>;
