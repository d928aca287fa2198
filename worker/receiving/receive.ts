/**
 * Receiving mail (Resend's emails.receiving): the email() handler (inbound/email.ts) hands over
 * mail that is not a report; when its recipient's domain is a verified domain of a tenant with
 * receiving enabled, the message is kept and published.
 *
 * DESCRIPTION
 *   receiveMail(env, message, bytes, nowMs)  null when the recipient's domain does not receive
 *       (the handler then refuses the message as before). Otherwise: beyond the tenant's daily
 *       quota (tenant_settings.receiving_daily_quota, else RECEIVING_DAILY_QUOTA) the message is
 *       refused (setReject, core/received.ts quotaReply) → "receiving_refused"; else its raw bytes
 *       go to R2 (`received/<ms>/<id>`, model/files.ts), then ONE D1 batch inserts its row and
 *       its email.received event (event_log, the pull feed) and reads the tenant's endpoints,
 *       and the event is queued for them (one webhooks message per endpoint) → "received".
 *
 * INVARIANTS
 *   The raw bytes are in R2 before the row that names them; a stop between the two leaves an
 *   orphan object that retention deletes (keys sort by time). Nothing is acknowledged to Email
 *   Routing before the row is written: an error thrown here makes it retry or refuse the
 *   message. A failed enqueue is logged and its claim released: the event stays in the feed.
 *
 * ERRORS
 *   Throws on an R2 or D1 failure (Email Routing tries again).
 */
import PostalMime from "postal-mime";
import { countSince, insertReceivedStatement, receivingDomainOf, type ReceivedRow } from "../db/received";
import { logInsertStatements, releaseFeedClaims, returnedEvents, type FeedRow } from "../db/events";
import { enabledEndpointsStatement, toPublishEndpoint } from "../db/webhook-publication";
import { eventId } from "../webhooks/core/event-id";
import { endpointWants } from "../webhooks/core/publication";
import { enqueueJobs, makeBundles, makeJob } from "../webhooks/jobs";
import { keptKey } from "../model/files";
import { settingsOf } from "../settings/settings";
import { dayStart, idFloor, quotaReply, receivedFields, uuidV7, type ReceivedFields } from "./core/received";

/** What the handler hands over (ForwardableEmailMessage's part used here). */
export interface ReceivableMessage {
  readonly from: string;
  readonly to: string;
  setReject(reason: string): void;
}

/** The email.received envelope (Resend's ReceivedEmailEventData). */
export function receivedEnvelope(id: string, createdAtMs: number, f: ReceivedFields) {
  return {
    type: "email.received" as const,
    created_at: new Date(createdAtMs).toISOString(),
    data: {
      email_id: id,
      created_at: new Date(createdAtMs).toISOString(),
      from: f.from,
      to: f.to,
      bcc: f.bcc ?? [],
      cc: f.cc ?? [],
      received_for: f.received_for,
      message_id: f.message_id ?? "",
      subject: f.subject,
      attachments: f.attachments.map((a) => ({
        id: a.id,
        filename: a.filename,
        content_type: a.content_type,
        content_disposition: a.content_disposition,
        content_id: a.content_id,
      })),
    },
  };
}

/** See the header. */
export async function receiveMail(
  env: Env,
  message: ReceivableMessage,
  bytes: Uint8Array,
  nowMs = Date.now(),
): Promise<"received" | "receiving_refused" | null> {
  const to = message.to.trim().replace(/^<|>$/g, "");
  const domain = await receivingDomainOf(env.DB, to.slice(to.lastIndexOf("@") + 1));
  if (!domain) return null;
  const tenant = domain.tenant_id;
  const quota = domain.quota ?? settingsOf(env).receivingDailyQuota;
  if ((await countSince(env.DB, tenant, idFloor(dayStart(nowMs)))) >= quota) {
    message.setReject(quotaReply(quota));
    return "receiving_refused";
  }
  const parsed = await PostalMime.parse(bytes, { attachmentEncoding: "arraybuffer" });
  const attachments = parsed.attachments.map((a) => ({
    ...a,
    size: typeof a.content === "string" ? a.content.length : a.content.byteLength,
  }));
  const fields = receivedFields(
    { ...parsed, attachments },
    { from: message.from, to },
    attachments.map(() => crypto.randomUUID()),
  );
  const id = uuidV7(nowMs, crypto.getRandomValues(new Uint8Array(10)));
  const key = keptKey("received", nowMs, id);
  await env.BODIES.put(key, bytes, { httpMetadata: { contentType: "message/rfc822" } });
  const row: ReceivedRow = {
    tenant_id: tenant,
    id,
    created_at: nowMs,
    domain_id: domain.id,
    envelope_from: message.from,
    from_addr: fields.from,
    to_json: JSON.stringify(fields.to),
    cc_json: fields.cc && JSON.stringify(fields.cc),
    bcc_json: fields.bcc && JSON.stringify(fields.bcc),
    reply_to_json: fields.reply_to && JSON.stringify(fields.reply_to),
    received_for_json: JSON.stringify(fields.received_for),
    subject: fields.subject,
    message_id: fields.message_id,
    headers_json: JSON.stringify(fields.headers),
    attachments_json: JSON.stringify(fields.attachments),
    raw_key: key,
    size: bytes.byteLength,
  };
  await publishReceived(env, row, fields, nowMs);
  return "received";
}

/** Inserts the row and its event in one batch, then queues the event for the tenant's endpoints. */
async function publishReceived(env: Env, row: ReceivedRow, fields: ReceivedFields, nowMs: number): Promise<void> {
  const type = "email.received";
  const evt = eventId({ emailId: row.id, recipient: "", attempt: 0, type });
  const body = JSON.stringify(receivedEnvelope(row.id, row.created_at, fields));
  const inserts = logInsertStatements(
    env.DB,
    [
      {
        tenant: row.tenant_id,
        emailId: row.id,
        rows: [
          {
            source_seq: 0,
            part: 0,
            type,
            recipient: null,
            created_at: row.created_at,
            data: null,
            event_id: evt,
            event_type: type,
            body,
          },
        ],
      },
    ],
    nowMs,
  );
  const results = await env.DB.batch([
    insertReceivedStatement(env.DB, row),
    ...inserts,
    enabledEndpointsStatement(env.DB, [row.tenant_id]),
  ]);
  const feed = results
    .slice(1, 1 + inserts.length)
    .flatMap((r) => returnedEvents((r.results ?? []) as FeedRow[]))
    .filter((r) => r.event_id !== null);
  const endpoints = (
    (results[results.length - 1]?.results ?? []) as { id: string; tenant_id: string; events: string | null }[]
  ).map(toPublishEndpoint);
  const jobs = feed.flatMap((f) =>
    endpoints
      .filter((ep) => endpointWants(ep.events, f.type))
      .map((ep) => makeJob(f.tenant_id, ep.id, { id: f.event_id, type: f.type, body: f.body })),
  );
  if (jobs.length === 0) return;
  try {
    await enqueueJobs(
      env.WEBHOOKS,
      makeBundles(jobs).map((job) => ({ job })),
    );
  } catch (e) {
    await releaseFeedClaims(
      env.DB,
      feed.map((f) => f.event_id),
      nowMs,
    ).catch(() => undefined);
    console.error(
      JSON.stringify({
        error: "email.received not queued; it stays in the event feed",
        id: row.id,
        detail: e instanceof Error ? e.message : String(e),
      }),
    );
  }
}
