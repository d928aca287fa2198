/**
 * Writing a batch of messages' Outbox events to D1 and publishing them: called by the classify
 * consumer (consumers/classify.ts) and the deliver consumer (consumers/deliver-index.ts) with
 * the index upserts of the same messages, before the Outboxes are told the events are written.
 *
 * DESCRIPTION
 *   publishEvents(env, states, index?)  turns the messages' new internal rows into
 *       Resend envelopes (core/publication.ts; delivery_delayed per WEBHOOK_DELAYED_* against the
 *       stored notice state), then in ONE D1 batch: the event log rows (db/events.ts: each
 *       transition with the envelope it gives, if any; idempotent by Outbox event; this is also
 *       the pull feed), the index upserts of `index` (db/messages.ts; after the log rows, so a
 *       new messages row names its email's first run, migration 0037), the notice states, suppressions for hard bounces
 *       and complaints (core/suppression-policy.ts), and the tenants' enabled endpoints; when an
 *       endpoint is enabled and an envelope to push was not stored by this batch (a repeated
 *       publication, a deferral counted before), a second batch takes over its claim if it
 *       lapsed. Then it enqueues, per endpoint, one `webhooks` message
 *       (a bundle, jobs.ts) with every event of this publication the endpoint's filter takes,
 *       carrying the stored bodies.
 *
 *   Why per endpoint rather than per event with fan-out in the consumer: a 410 or an outage of
 *   one endpoint never holds another's copy, and the consumer's per-endpoint health applies to
 *   whole messages. Why bundles rather than one message per (endpoint, event): queue operations
 *   are billed per message, three each. Each event of a bundle still has its own attempt
 *   count, delay and dead letter: one that fails leaves the bundle as a job of its own.
 *
 * INVARIANTS
 *   What is pushed is read back from event_log (RETURNING), so pushes and the feed carry the
 *   same bytes. A repeated call (the classify retry path, a redelivered queue message) stores
 *   nothing twice.
 *   Two concurrent publications of the same events (the delivery and the classify path) enqueue
 *   them once: the one whose insert stored an envelope holds its claim (enqueued_at, set by the
 *   insert itself, so no claim UPDATE is written per event); the other gets it only through the
 *   takeover, after CLAIM_LEASE_MS or a release. A claim is released when the enqueue fails, and
 *   lapses after CLAIM_LEASE_MS, so a publication repeated because the first one died
 *   re-enqueues under the same webhook-ids (receivers dedupe on webhook-id).
 *   Nothing is acked to the Outbox before this returns, so a failure here repeats it later.
 *
 * ERRORS
 *   Throws on a D1 or queue failure; the caller's existing failure path retries the batch.
 */
import type { SyncState } from "../model/message";
import { indexStatements, messageFields, type IndexItem } from "../db/messages";
import { compactBody, expandBody, type MessageFields } from "../webhooks/core/stored-body";
import { eventFields } from "../db/feed";
import {
  feedTakeoverStatement,
  logInsertStatements,
  releaseFeedClaims,
  returnedEvents,
  type FeedRow,
  type LogRow,
} from "../db/events";
import {
  enabledEndpointsStatement,
  noticeUpsertStatement,
  readNotices,
  suppressionUpsertStatement,
  toPublishEndpoint,
  type SuppressionInsert,
} from "../db/webhook-publication";
import type { MessageInfo } from "../webhooks/core/envelope";
import {
  endpointWants,
  noticeKey,
  planPublication,
  type NoticeRecord,
  type PlannedEvent,
  type SourceMessage,
} from "../webhooks/core/publication";
import { suppressionFor, type SuppressibleEvent } from "../webhooks/core/suppression-policy";
import { parseWebhookConfig, type WebhookVars } from "../webhooks/core/webhook-config";
import { enqueueJobs, makeBundles, makeJob } from "../webhooks/jobs";
import { settingsOf } from "../settings/settings";

/** How long a claim on events for the queue holds before a repeated publication may take it, ms. */
const CLAIM_LEASE_MS = 10_000;

function messageInfo(s: SyncState): MessageInfo {
  const sum = s.view.summary;
  return {
    emailId: s.view.id,
    createdAtMs: s.view.created_at,
    from: sum.from,
    to: sum.to,
    subject: sum.subject ?? "",
    messageId: sum.message_id,
    tags: Object.fromEntries((sum.tags ?? []).map((t) => [t.name, t.value])),
  };
}

function parseData(text: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === "object" ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

function toSource(s: SyncState): SourceMessage {
  return {
    message: messageInfo(s),
    tenant: s.view.tenant,
    cancelledRecipients: s.view.recipients.filter((r) => r.status === "cancelled").map((r) => r.email),
    events: s.events.map((e) => ({
      seq: e.seq,
      type: e.type,
      recipient: e.recipient,
      createdAtMs: e.created_at,
      data: parseData(e.data),
    })),
  };
}

/** Stored notice states of every recipient with a deferral among the rows. */
async function noticesFor(db: D1Database, sources: SourceMessage[]): Promise<Map<string, NoticeRecord>> {
  const keys = sources.flatMap((m) =>
    m.events
      .filter((e) => e.type === "email.delivery_delayed" && e.recipient !== null)
      .map((e) => ({ emailId: m.message.emailId, recipient: e.recipient as string })),
  );
  const rows = await readNotices(db, keys);
  return new Map(rows.map((n) => [noticeKey(n.emailId, n.recipient), n]));
}

function suppressionsOf(events: readonly PlannedEvent[]): SuppressionInsert[] {
  return events.flatMap((e) => {
    if (e.type !== "email.bounced" && e.type !== "email.complained" && e.type !== "email.unsubscribed") return [];
    const s = suppressionFor(JSON.parse(e.body) as SuppressibleEvent, e.createdAtMs);
    return s === null
      ? []
      : [
          {
            tenant_id: e.tenant,
            address: s.address,
            scope: s.scope,
            reason: s.reason,
            created_at: e.createdAtMs,
            expires_at: s.expiresAtMs,
          },
        ];
  });
}

/**
 * The log rows of one message: each transition with its first envelope, further envelopes on rows
 * of their own; the envelopes stored compact when `fields` (its messages row is written in the same batch).
 */
function logRows(
  s: SyncState,
  planned: readonly PlannedEvent[],
  seen: Set<string>,
  fields: MessageFields | null,
): LogRow[] {
  const bySource = new Map<number, PlannedEvent[]>();
  for (const e of planned) {
    if (seen.has(e.id)) continue; // one envelope per webhook-id
    seen.add(e.id);
    bySource.set(e.sourceSeq, [...(bySource.get(e.sourceSeq) ?? []), e]);
  }
  return s.events.flatMap((ev) => {
    const envs = bySource.get(ev.seq) ?? [];
    // The row's columns a stored body may leave to it: event_type, created_at, recipient.
    const env = (e: PlannedEvent | undefined, created_at: number, recipient: string | null) => ({
      event_id: e?.id ?? null,
      event_type: e?.type ?? null,
      body:
        e === undefined
          ? null
          : fields === null
            ? e.body
            : compactBody(e.body, fields, { type: e.type, created_at, recipient }),
    });
    return [
      {
        source_seq: ev.seq,
        part: 0,
        type: ev.type,
        recipient: ev.recipient,
        created_at: ev.created_at,
        data: ev.data,
        ...env(envs[0], ev.created_at, ev.recipient),
      },
      ...envs.slice(1).map((e, i) => ({
        source_seq: ev.seq,
        part: i + 1,
        type: e.type,
        recipient: e.recipient,
        created_at: e.createdAtMs,
        data: null,
        ...env(e, e.createdAtMs, e.recipient),
      })),
    ];
  });
}

/** Writes and publishes the new events of `states` with the index upserts of `index` (see the header). */
export async function publishEvents(
  env: Env,
  states: readonly SyncState[],
  index: readonly IndexItem[] = [],
): Promise<void> {
  const withEvents = states.filter((s) => s.events.length > 0);
  const sources = withEvents.map(toSource);
  if (sources.length === 0) {
    if (index.length > 0) await env.DB.batch(indexStatements(env.DB, index));
    return;
  }
  const cfg = settingsOf(env).webhooks;
  const plan = planPublication(sources, await noticesFor(env.DB, sources), cfg.events);
  const nowMs = Date.now();
  const seen = new Set<string>();
  // Each email's planned events, grouped once (not a filter of them all per email: quadratic in the batch).
  const byEmail = new Map<string, typeof plan.events>();
  for (const e of plan.events) {
    const list = byEmail.get(e.emailId);
    if (list) list.push(e);
    else byEmail.set(e.emailId, [e]);
  }
  const indexed = new Set(index.map((i) => i.view.id));
  const fields = new Map(withEvents.map((s) => [s.view.id, messageFields(s.view)]));
  const logs = withEvents.map((s) => ({
    tenant: s.view.tenant,
    emailId: s.view.id,
    rows: logRows(s, byEmail.get(s.view.id) ?? [], seen, indexed.has(s.view.id) ? fields.get(s.view.id)! : null),
  }));
  const inserts = logInsertStatements(env.DB, logs, nowMs, indexed);
  const upserts = indexStatements(
    env.DB,
    index,
    logs.reduce((n, l) => n + l.rows.length, 0),
  );
  const suppressions = suppressionsOf(plan.events);
  const tenants = [...new Set(sources.map((s) => s.tenant))];
  const ids = [...plan.events.map((e) => e.id), ...plan.recheck];
  const pushing = ids.length > 0;
  const stmts = [
    ...inserts,
    ...upserts,
    ...(plan.notices.length > 0 ? [noticeUpsertStatement(env.DB, plan.notices)] : []),
    ...(suppressions.length > 0 ? [suppressionUpsertStatement(env.DB, suppressions)] : []),
    ...(pushing ? [enabledEndpointsStatement(env.DB, tenants)] : []),
  ];
  const results = await env.DB.batch(stmts);
  if (!pushing) return;
  const endpoints = (
    (results[results.length - 1]?.results ?? []) as { id: string; tenant_id: string; events: string | null }[]
  ).map(toPublishEndpoint);
  if (endpoints.length === 0) return; // nothing to push: the claims the inserts took lapse unused
  const returned = results.slice(0, inserts.length).flatMap((r) => returnedEvents((r?.results ?? []) as FeedRow[]));
  // The inserts return every envelope they stored, claimed. Only one they did not store (a repeated
  // publication's, a deferral counted before) can have a claim that lapsed: the takeover, a second
  // batch, runs for those alone, and a first publication (the normal case) makes no such statement.
  const got = new Set(returned.map((r) => r.event_id));
  const missing = ids.filter((id) => !got.has(id));
  if (missing.length > 0) {
    const [taken] = await env.DB.batch([feedTakeoverStatement(env.DB, missing, nowMs, CLAIM_LEASE_MS)]);
    returned.push(...returnedEvents((taken?.results ?? []) as FeedRow[]));
  }
  // As stored: a compact body is made whole from the message it names (the columns its row holds);
  // one of a message not in this publication (none is) would be left for the consumer to read whole.
  const rows = returned
    .filter((r) => r.event_id !== null)
    .map((r) => ({ ...r, body: expandBody(r.body, fields.get(r.email_id) ?? null, eventFields(r)) }));
  const jobs = rows.flatMap((row) =>
    endpoints
      .filter((ep) => ep.tenant_id === row.tenant_id && endpointWants(ep.events, row.type))
      .map((ep) => makeJob(row.tenant_id, ep.id, { id: row.event_id, type: row.type, body: row.body })),
  );
  try {
    if (jobs.length > 0)
      await enqueueJobs(
        env.WEBHOOKS,
        makeBundles(jobs).map((job) => ({ job })),
      );
  } catch (e) {
    await releaseFeedClaims(
      env.DB,
      rows.map((r) => r.event_id),
      nowMs,
    ).catch(() => undefined);
    throw e;
  }
}
