/**
 * The `email-events` Queue consumer: Cloudflare Email Service's sending events (one event
 * subscription per sending domain, all publishing to this queue) applied to the recipients the
 * cf-email egress handed to the service (core/email-service.ts says what each event means).
 *
 * DESCRIPTION
 *   handleEmailServiceBatch(batch, env)  for each event: the recipient is found by the service's
 *       message id (D1 `cf_email_sends`, written when the service accepted it: delivery/cf-email.ts)
 *       and the event applied through its Outbox (afterDelivery: the receiving server's reply,
 *       email.delivery_delayed, a late bounce with email.bounced and the bounce's suppression, or
 *       a complaint with email.complained and the complaint-rate brake), so webhooks and GET
 *       /emails/:id report it as they report SMTP. An event about a message the relay did not
 *       send, or of another shape, is logged and acknowledged; a failure retries the message.
 *
 * INVARIANTS
 *   Applying an event twice changes nothing twice (a redelivered event finds the bounce or the
 *   complaint recorded: "duplicate").
 */
import { outboxOf } from "../model/ids";
import { readEmailServiceEvent } from "./core/email-service";
import { recordComplaint } from "../policy/complaint-brake";

/** The queue's name (wrangler.toml). */
export const EMAIL_EVENTS_QUEUE = "email-events";

async function apply(env: Env, body: unknown): Promise<string> {
  const ev = readEmailServiceEvent(body);
  if ("error" in ev) return ev.error;
  const row = await env.DB.prepare("SELECT email_id, address FROM cf_email_sends WHERE cf_message_id = ?")
    .bind(ev.messageId)
    .first<{ email_id: string; address: string }>();
  if (!row) return `no recipient of this relay has Email Service message id ${ev.messageId}`;
  const a = ev.action;
  if (a.kind === "complaint")
    return (await recordComplaint(env, row.email_id, null, row.address, a.feedbackType)).result;
  const outbox = outboxOf(env, row.email_id);
  const res =
    a.kind === "bounce"
      ? await outbox.afterDelivery(row.email_id, null, {
          kind: "bounce",
          target: { address: row.address },
          response: a.response,
        })
      : await outbox.afterDelivery(row.email_id, null, {
          kind: "relayed",
          address: row.address,
          response: a.response,
          delayed: a.delayed,
        });
  return res.result;
}

/** See the header. */
export async function handleEmailServiceBatch(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  await Promise.all(
    batch.messages.map(async (msg) => {
      try {
        const result = await apply(env, msg.body);
        if (result !== "ok" && result !== "duplicate")
          console.warn(JSON.stringify({ warning: "Email Service event not applied", result }));
        msg.ack();
      } catch (e) {
        console.error(
          JSON.stringify({
            error: "Email Service event failed; retried",
            detail: e instanceof Error ? e.message : String(e),
          }),
        );
        msg.retry({ delaySeconds: Math.min(2 ** Math.max(msg.attempts, 1), 300) });
      }
    }),
  );
}
