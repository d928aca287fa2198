/**
 * Bundled webhook jobs (webhooks/jobs.ts): a one-recipient email's email.sent and
 * email.delivered go to an endpoint in one queue message, yet each event keeps its own attempts:
 * one the receiver refuses is retried on its own under the same webhook-id, the other is
 * delivered once; and a queued bundle whose endpoint answers 410 dead-letters every event.
 */
import { createExecutionContext, createMessageBatch, env, getQueueResult } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import worker from "../../../worker/index";
import { eventually, newKey } from "../helpers";
import { createEndpoint, logWhen, newReceiver, send } from "./hooks";

describe("webhook bundles", () => {
  it("retries only the event the endpoint refused, under its webhook-id; the other is delivered once", async () => {
    const key = await newKey("bundled");
    const receiver = await newReceiver();
    await receiver.script([{ status: 500 }]);
    await createEndpoint(key, receiver.url, ["email.sent", "email.delivered"]);
    await send(key, { to: "bundle@sink.test" });
    const log = await logWhen(
      receiver,
      (l) => l.filter((d) => d.status === 200).length >= 2,
      "both events accepted",
      15_000,
    );
    const ok = log.filter((d) => d.status === 200);
    const types = ok.map((d) => (JSON.parse(d.body) as { type: string }).type).sort();
    expect(types).toEqual(["email.delivered", "email.sent"]);
    const refused = log.find((d) => d.status === 500)!;
    // The refused event came again with the same id; the other was never sent twice.
    expect(log.filter((d) => d.headers["webhook-id"] === refused.headers["webhook-id"]).map((d) => d.status)).toEqual([
      500, 200,
    ]);
    const other = ok.find((d) => d.headers["webhook-id"] !== refused.headers["webhook-id"])!;
    expect(log.filter((d) => d.headers["webhook-id"] === other.headers["webhook-id"])).toHaveLength(1);
  });

  it("a bundle to an endpoint that answers 410: every event dead-lettered, the queue message acked once", async () => {
    const key = await newKey("bundle-gone");
    const receiver = await newReceiver();
    await receiver.setDefault(410);
    const ep = await createEndpoint(key, receiver.url, ["email.sent"]);
    const bundle = {
      v: 2,
      tenant: "bundle-gone",
      endpointId: ep.id,
      events: [1, 2, 3].map((i) => ({
        eventId: `evt_bundle_${i}`,
        type: "email.sent",
        body: JSON.stringify({ type: "email.sent", n: i }),
      })),
    };
    const batch = createMessageBatch("webhooks", [{ id: "b1", timestamp: new Date(), attempts: 1, body: bundle }]);
    const ctx = createExecutionContext();
    await worker.queue(batch, env, ctx);
    const result = await getQueueResult(batch, ctx);
    expect(result.explicitAcks).toEqual(["b1"]);
    expect(result.retryMessages).toEqual([]);
    const dead = await eventually(
      async () => {
        const rows = (
          await env.DB.prepare(
            "SELECT event_id, reason FROM webhook_dead_letters WHERE endpoint_id = ? ORDER BY event_id",
          )
            .bind(ep.id)
            .all<{ event_id: string; reason: string }>()
        ).results;
        return rows.length === 3 ? rows : undefined;
      },
      5000,
      "three dead letters",
    );
    expect(dead.map((d) => d.event_id)).toEqual(["evt_bundle_1", "evt_bundle_2", "evt_bundle_3"]);
    expect(dead.every((d) => d.reason.includes("disabled") || d.reason.includes("410"))).toBe(true);
  });
});
