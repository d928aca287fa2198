/**
 * The `deliver` Queue consumer (the delivery agent): each message is one entry the Transport
 * DO dispatched. The batch is grouped by nexthop and each group spread over up to its share of
 * the 6 sockets an invocation may hold (the platform limit), each session carrying several
 * entries with RSET between when there are more entries than sessions. Every entry's result
 * goes to the Transport DO (report, with the site failure for concurrency feedback) and to its
 * Outbox (per-recipient outcome); then each destination's reports go to its Destination DO, whose answer (window,
 * dead until) the Transport DO applies; the D1 index and events of every message touched are
 * written once, in one batch.
 *
 * DESCRIPTION
 *   handleDeliverBatch(batch, env)   the queue handler. Decisions live in deliver-plan.ts, the
 *                                    session in deliver-session.ts, the mx kind in deliver-mx.ts,
 *                                    the index in deliver-index.ts.
 *
 * INVARIANTS
 *   Each message is acked or retried on its own; one bad message never fails the batch. Reports
 *   are idempotent by entry id (Transport DO) and attempt (Outbox), so a redelivered message
 *   changes nothing twice; an entry no longer leased is not sent again, and recipients final in
 *   the Outbox are never sent again. An entry whose nexthop is not a relay (the `mx` kind, not wired yet)
 *   is acked without a report: its lease runs out and the Transport DO retries it.
 */
import { coreIdOf } from "../../durable-objects/storage/delivery-state";
import { destinationName, type DeliverJob } from "../../durable-objects/transport-queue";
import type { ReportAnswer } from "../../durable-objects/transport-types";
import type { DeliveryEnvelope, SyncState } from "../../durable-objects/storage/outbox-types";
import { outboxOf } from "./classify-message";
import { indexMessages, mergeEvents } from "./deliver-index";
import { versionOf } from "../db/messages";
import { groupByNexthop, judgeEntry, parseJob, relayTarget, splitForSessions } from "./deliver-plan";
import type { MxResolution } from "../net/core/mx";
import { createMxLookup, lookupFailureParts, mxSettingsOf, runMxSessions, type MxLookup, type MxSettings } from "./deliver-mx";
import { pool } from "../lib/pool";
import { hasWork, prepareJobs, readEnvelopes, runSession, unsentParts, type SessionPart } from "./deliver-session";

/** Simultaneous SMTP sessions per invocation (Workers allow 6 open sockets). */
const MAX_SOCKETS = 6;

type Item = { msg: Message<unknown>; job: DeliverJob };

function fail(msg: Message<unknown>, stage: string, e: unknown): void {
  console.error(JSON.stringify({ error: `deliver ${stage} failed`, body: msg.body, detail: e instanceof Error ? e.message : String(e) }));
  msg.retry({ delaySeconds: Math.min(2 ** Math.max(msg.attempts, 1), 300) });
}

/** What finishing one entry left for the Destination DO: the report as the destination sees it. */
interface Finished {
  messageId: string;
  transport: string;
  destination: { queue: string; busy: number; window: number } | null;
  siteFailure: { dsnStatus: string; reason: string } | null;
}

/**
 * Records the outcomes of one session's entries: final recipients first, each in its Outbox
 * (authoritative; a final recipient is never sent again, also when its queue message is
 * redelivered), then one report of every recorded entry to their Transport DO (it dispatches
 * once for all of them), then the deferred recipients with the next attempt time the DO decided
 * (known once the attempt's last entry is done). Each queue message is acked once its entry is
 * recorded, or retried on its own. Returns what the Destination DOs need of the acked ones, and
 * the state to index of every message whose Outbox record changed (also when its report failed:
 * a redelivered job whose report did land finds nothing left to do and indexes nothing); the
 * Outbox answers each outcome with it.
 */
async function finishAll(env: Env, items: Item[], parts: SessionPart[]): Promise<{ finished: Finished[]; changed: SyncState[] }> {
  const judged = parts.map((part, i) => ({ part, msg: items[i]!.msg, v: judgeEntry(part.job, part.matched, part.txn, part.site) }));
  const states = new Map<string, SyncState>();
  const keep = (s: SyncState | null) => { if (s) states.set(s.view.id, s); };
  const recorded = await Promise.all(judged.map(async ({ part, msg, v }) => {
    const finals = v.outcomes.filter((o) => o.status !== "deferred");
    try {
      if (finals.length > 0) keep((await outboxOf(env, part.job.messageId).recordOutcome(part.job.messageId, finals, true)).sync);
      return true;
    } catch (e) {
      fail(msg, "outcome", e);
      return false;
    }
  }));
  const open = judged.filter((_, i) => recorded[i]);
  const changed = () => [...states.values()];
  if (open.length === 0) return { finished: [], changed: changed() };
  const reports = open.map(({ part, v }) => ({
    entryId: part.job.entryId,
    report: { status: v.status, ...(part.site ? { siteFailure: { dsnStatus: part.site.dsnStatus, reason: part.site.reason } } : {}) },
    finalIdx: v.finalIdx,
  }));
  let answers: ReportAnswer[];
  try {
    answers = await env.TRANSPORT_QUEUE.getByName(open[0]!.part.job.transport).reportMany(reports);
  } catch (e) {
    for (const o of open) fail(o.msg, "report", e);
    return { finished: [], changed: changed() };
  }
  const finished = await Promise.all(open.map(async ({ part, msg, v }, i): Promise<Finished | null> => {
    const { job } = part;
    const answer = answers[i]!;
    // An expired attempt was already marked `expired` in the Outbox by the Transport DO.
    const coreId = coreIdOf(job.messageId, job.attempt);
    const deferred = answer.effects.find((e) => e.kind === "message-deferred" && e.messageId === coreId);
    const nextAt = deferred?.kind === "message-deferred" ? deferred.nextAttemptAt * 1000 : null;
    const later = v.outcomes.filter((o) => o.status === "deferred").map((o) => ({ ...o, nextAttemptAt: nextAt }));
    try {
      if (later.length > 0) keep((await outboxOf(env, job.messageId).recordOutcome(job.messageId, later, true)).sync);
      msg.ack();
    } catch (e) {
      fail(msg, "report", e);
      return null;
    }
    return { messageId: job.messageId, transport: job.transport, destination: answer.destination, siteFailure: reports[i]!.report.siteFailure ?? null };
  }));
  return { finished: finished.filter((f): f is Finished => f !== null), changed: changed() };
}

/**
 * The Destination DOs are the authority on windows and dead state: each destination's applied
 * reports go to its DO in one call, in order, and its answer (the state after the last) is
 * applied by the Transport DO (normally it already agrees). With DESTINATION_GROUPING = "site"
 * an `mx` nexthop's DO is its MX site's (the sorted set of MX hosts), shared by every domain
 * hosted there. Best effort: the outcomes are recorded already, and the next report carries the
 * destination's state again.
 */
async function feedDestinations(env: Env, done: Finished[], site: string | null): Promise<void> {
  const byQueue = new Map<string, { name: string; transport: string; queue: string; reports: Finished[] }>();
  for (const f of done) {
    if (!f.destination) continue;
    const name = site === null ? destinationName(f.transport, f.destination.queue) : destinationName(f.transport, `site:${site}`);
    const key = `${f.transport}/${f.destination.queue}`;
    const d = byQueue.get(key) ?? { name, transport: f.transport, queue: f.destination.queue, reports: [] };
    d.reports.push(f);
    byQueue.set(key, d);
  }
  try {
    for (const d of byQueue.values()) {
      const verdict = await env.DESTINATION_QUEUE.getByName(d.name).reportMany(d.reports.map((f) => ({ transport: f.transport, busy: f.destination!.busy, siteFailure: f.siteFailure })));
      // The Transport DO ran the same feedback: when it ended at the same window (and the
      // destination lives), the verdict would change nothing there; one DO request saved.
      const last = d.reports[d.reports.length - 1]!.destination!;
      if (verdict.deadUntil * 1000 <= Date.now() && last.window === verdict.window) continue;
      await env.TRANSPORT_QUEUE.getByName(d.transport).verdict(d.queue, verdict);
    }
  } catch (e) {
    console.error(JSON.stringify({ error: "deliver: destination feedback failed", detail: e instanceof Error ? e.message : String(e) }));
  }
}

/** The mx kind's settings and MX lookups of one invocation (created on first use). */
interface MxContext {
  settings: MxSettings;
  lookup: MxLookup;
}

/** Acks the items whose entry is no longer leased; returns the others. */
async function liveItems(env: Env, items: Item[]): Promise<Item[]> {
  // Entries no longer leased were reported already (a redelivered queue message) or given up
  // as crashed and retried as a new attempt: nothing to send.
  const live = new Set(await env.TRANSPORT_QUEUE.getByName(items[0]!.job.transport).leased(items.map((i) => i.job.entryId)));
  for (const it of items) if (!live.has(it.job.entryId)) it.msg.ack();
  return items.filter((i) => live.has(i.job.entryId));
}

/** A domain nexthop's MX lookup (the mx kind); null for a relay nexthop. */
async function lookupFor(nexthop: string, mx: () => MxContext): Promise<MxResolution | null> {
  return relayTarget(nexthop) ? null : mx().lookup(nexthop);
}

/** Sends the (leased) entries of one nexthop: to the relay kind's fixed host, or to MX hosts. */
async function sendGroup(env: Env, items: Item[], resolution: MxResolution | null, mx: () => MxContext, known?: Map<string, DeliveryEnvelope | null>): Promise<SessionPart[]> {
  const nexthop = items[0]!.job.nexthop;
  const prepared = await prepareJobs(env, items.map((i) => i.job), known);
  const target = relayTarget(nexthop);
  if (target) return runSession(env, target, prepared);
  if (!resolution || !hasWork(prepared)) return unsentParts(prepared);
  if (resolution.kind !== "hosts") return lookupFailureParts(prepared, resolution);
  return runMxSessions(env, resolution.hosts, prepared, mx().settings);
}

/**
 * Delivers one nexthop's entries in one session (per MX host tried) and records the results.
 * The MX lookup runs before the lease check, so an entry whose lease was taken back while the
 * resolver was slow is not sent.
 */
async function deliverGroup(env: Env, items: Item[], mx: () => MxContext, known?: Map<string, DeliveryEnvelope | null>): Promise<SyncState[]> {
  let parts: SessionPart[];
  let site: string | null = null;
  try {
    const resolution = await lookupFor(items[0]!.job.nexthop, mx);
    if (resolution?.kind === "hosts" && env.DESTINATION_GROUPING === "site") site = resolution.site;
    items = await liveItems(env, items);
    if (items.length === 0) return [];
    parts = await sendGroup(env, items, resolution, mx, known);
  } catch (e) {
    for (const it of items) fail(it.msg, "session", e);
    return [];
  }
  const { finished, changed } = await finishAll(env, items, parts);
  await feedDestinations(env, finished, site);
  return changed;
}

/** The queue handler. */
export async function handleDeliverBatch(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const items: Item[] = [];
  for (const msg of batch.messages) {
    const job = parseJob(msg.body);
    if (job) items.push({ msg, job });
    else {
      console.error(JSON.stringify({ error: "deliver: malformed queue message", body: msg.body }));
      msg.ack();
    }
  }
  let mx: MxContext | null = null;
  const mxContext = (): MxContext => {
    if (mx) return mx;
    const settings = mxSettingsOf(env);
    mx = { settings, lookup: createMxLookup(settings) };
    return mx;
  };
  // Every envelope of the batch in one request per Outbox shard (not one per entry); should that
  // fail, each session reads its own and fails alone.
  const known = await readEnvelopes(env, items.map((i) => i.job.messageId)).catch(() => undefined);
  const sessions = splitForSessions(groupByNexthop(items), MAX_SOCKETS);
  const touched = await pool(sessions.map((g) => () => deliverGroup(env, g, mxContext, known)), MAX_SOCKETS);
  // The latest state of each message (a message may span sessions; the Outbox answered each).
  const latest = new Map<string, SyncState>();
  for (const s of touched.flat()) {
    const prev = latest.get(s.view.id);
    if (!prev || versionOf(s.view) >= versionOf(prev.view)) latest.set(s.view.id, prev ? mergeEvents(s, prev) : s);
  }
  await indexMessages(env, [...latest.values()]);
}
