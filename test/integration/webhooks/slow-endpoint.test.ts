/**
 * One slow endpoint never delays another: a receiver that takes 4 s per answer is marked slow
 * after its first slow answer, its deliveries move to the webhooks-slow queue, and from then on
 * a fast receiver of the same events gets them while the slow one's requests are outstanding.
 */
import { env } from "cloudflare:test";
import { expect, it } from "vitest";
import { newKey } from "../helpers";
import { createEndpoint, deliveredIds, envelopeOf, logWhen, newReceiver, send, type Delivery } from "./hooks";

const of = (log: Delivery[], emailId: string) => log.filter((d) => envelopeOf(d).data.email_id === emailId);

it("keeps delivering to a fast endpoint while another endpoint is slow to answer", async () => {
  const key = await newKey("slowpoke");
  const [slow, fast] = [await newReceiver(), await newReceiver()];
  await slow.setDefault(200, 4000);
  const slowEp = await createEndpoint(key, slow.url, ["email.sent", "email.delivered"]);
  await createEndpoint(key, fast.url, ["email.sent", "email.delivered"]);

  // The first slow answer marks the endpoint slow.
  const first = await send(key, { to: "p@sink.test" });
  await logWhen(slow, (l) => of(l, first).length >= 1, "the slow endpoint's first request");
  const marked = await logWhen(
    fast,
    (l) => deliveredIds(of(l, first)).size >= 2,
    "the first message's events at the fast endpoint",
  );
  expect(marked.length).toBeGreaterThanOrEqual(2);

  const second = await send(key, { to: "q@sink.test" });
  const fastLog = of(
    await logWhen(
      fast,
      (l) => deliveredIds(of(l, second)).size >= 2,
      "the second message's events at the fast endpoint",
    ),
    second,
  );
  const slowLog = of(
    await logWhen(slow, (l) => of(l, second).length >= 1, "the slow endpoint's request for the second message"),
    second,
  );
  // Both fast deliveries started before the slow receiver answered its first request for them.
  expect(Math.max(...fastLog.map((d) => d.at))).toBeLessThan(Math.min(...slowLog.map((d) => d.at)) + 4000);
  const row = await env.DB.prepare("SELECT state FROM webhook_endpoint_health WHERE endpoint_id = ?")
    .bind(slowEp.id)
    .first<{ state: string }>();
  expect(JSON.parse(row!.state).slowUntilMs).toBeGreaterThan(Date.now());
  // The slow endpoint still gets everything.
  await logWhen(slow, (l) => deliveredIds(l).size >= 4, "every event at the slow endpoint");
});
