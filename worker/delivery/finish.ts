/**
 * Finishing delivered entries, for either delivery agent (the `deliver` queue consumer or the
 * DeliveryAgent objects): each outcome recorded in its Outbox, one report per session to the
 * Transport DO, the deferred recipients with the retry time it decided, then each destination's
 * reports to its Destination DO. How an entry is acknowledged or retried is the caller's
 * (FinishItem): a queue message, or an agent's own retry.
 *
 * DESCRIPTION
 *   finishAll(env, items, parts, report?, acks?)  records and reports (through `report` when
 *                                  given; held event acks ride on the Outbox requests);
 *                                  returns what the Destination DOs need and the state to index
 *                                  of every message whose record changed.
 *   feedDestinations(env, done, site)  the Destination DOs' feedback (best effort).
 *   finishParts(env, items, parts, site)  both; returns the states to index.
 *   latestStates(states)           the latest state of each message, with the events of all.
 */
import {
  coreIdOf,
  destinationName,
  schedulerOf,
  type DeliverJob,
  type EntryReport,
  type ReportAnswer,
} from "../model/delivery";
import { settingsOf } from "../settings/settings";
import type { Effect } from "../../durable-objects/core";
import { byOutbox } from "../model/ids";
import type { OutcomeReport, SyncState } from "../model/message";
import { mergeEvents } from "../indexing/writes";
import { versionOf } from "../db/messages";
import { judgeEntry } from "./plan";
import { replyRulesOf } from "../settings/scheduler";
import type { SessionPart } from "./session";
import type { PendingAcks } from "../indexing/pending-acks";

/** One entry being finished: acknowledged once recorded, or retried on its own. */
export interface FinishItem {
  job: DeliverJob;
  ack(): void;
  retry(stage: string, e: unknown): void;
}

/** How the reports reach the Transport DO when not with reportMany (the agents' reportAndTake). */
export type ReportVia = (
  transport: ReturnType<Env["TRANSPORT_QUEUE"]["getByName"]>,
  reports: EntryReport[],
) => Promise<ReportAnswer[]>;

/** What finishing one entry left for the Destination DO: the report as the destination sees it. */
export interface Finished {
  messageId: string;
  transport: string;
  /** The Transport DO that scheduled it (a shard's name with TRANSPORT_SHARDS), for the verdict. */
  scheduler: string;
  /** The Transport DO's answer about the entry's destination (ReportAnswer). */
  destination: ReportAnswer["destination"];
  siteFailure: { dsnStatus: string; reason: string } | null;
  /** The reply rule the site failure set off, if any. */
  replyRule?: string;
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
export async function finishAll(
  env: Env,
  items: FinishItem[],
  parts: SessionPart[],
  report?: ReportVia,
  acks?: PendingAcks,
): Promise<{ finished: Finished[]; changed: SyncState[] }> {
  const rules = replyRulesOf(env);
  const judged = parts.map((part, i) => ({
    part,
    msg: items[i]!,
    v: judgeEntry(part.job, part.matched, part.txn, part.site, rules, part.blockedBy ?? null),
  }));
  const states = new Map<string, SyncState>();
  const keep = (s: SyncState | null) => {
    if (s) states.set(s.view.id, s);
  };
  const failedFinals = await recordAll(
    env,
    judged.map(({ part, v }) => ({
      id: part.job.messageId,
      reports: v.outcomes.filter((o) => o.status !== "deferred"),
    })),
    keep,
    acks,
  );
  const recorded = judged.map(({ msg }, i) => {
    const e = failedFinals.get(i);
    if (e !== undefined) msg.retry("outcome", e);
    return e === undefined;
  });
  const open = judged.filter((_, i) => recorded[i]);
  const changed = () => [...states.values()];
  if (open.length === 0) return { finished: [], changed: changed() };
  const reports = open.map(({ part, v }): EntryReport => ({
    entryId: part.job.entryId,
    report: {
      status: v.status,
      ...(part.site
        ? { siteFailure: { dsnStatus: part.site.dsnStatus, reason: part.site.reason } }
        : { ...deferringReply(v.outcomes) }),
      ...(part.provider ? { site: part.provider, ...(part.egress ? { egress: part.egress } : {}) } : {}),
      ...(part.remoteip ? { remoteip: part.remoteip } : {}),
    },
    finalIdx: v.finalIdx,
  }));
  let answers: ReportAnswer[];
  try {
    // The entries of one finish share their destination, so their Transport DO (schedulerOf).
    const transport = env.TRANSPORT_QUEUE.getByName(schedulerOf(open[0]!.part.job, settingsOf(env).transportShards));
    answers = report ? await report(transport, reports) : await transport.reportMany(reports);
  } catch (e) {
    for (const o of open) o.msg.retry("report", e);
    return { finished: [], changed: changed() };
  }
  // The reply rule each entry's refusal set off, if any (core/reply-rules.ts).
  const hits = open.map(({ part: { job } }, i) =>
    answers[i]!.effects.find(
      (e): e is Extract<Effect, { kind: "reply-rule" }> => e.kind === "reply-rule" && e.entryId === job.entryId,
    ),
  );
  const later = open.map(({ part: { job }, v }, i) => {
    // An expired attempt was already marked `expired` in the Outbox by the Transport DO.
    const coreId = coreIdOf(job.messageId, job.attempt);
    const deferred = answers[i]!.effects.find((e) => e.kind === "message-deferred" && e.messageId === coreId);
    const nextAt = deferred?.kind === "message-deferred" ? deferred.nextAttemptAt * 1000 : null;
    // A reply rule the session's refusal set off: said once, with the first deferred recipient.
    const hit = hits[i];
    const throttled = hit
      ? {
          rule: hit.rule,
          key: hit.key,
          until: hit.until * 1000,
          reply: hit.reply,
          action: hit.action,
          ...(hit.rate ? { rate: hit.rate } : {}),
        }
      : null;
    return {
      id: job.messageId,
      reports: v.outcomes
        .filter((o) => o.status === "deferred")
        .map((o, k) => ({ ...o, nextAttemptAt: nextAt, ...(k === 0 && throttled ? { throttled } : {}) })),
    };
  });
  const failedLater = await recordAll(env, later, keep, acks);
  const finished: Finished[] = [];
  open.forEach(({ part: { job }, msg }, i) => {
    const e = failedLater.get(i);
    if (e !== undefined) return msg.retry("report", e);
    msg.ack();
    const hit = hits[i];
    const scheduler = schedulerOf(job, settingsOf(env).transportShards);
    finished.push({
      messageId: job.messageId,
      transport: job.transport,
      scheduler,
      destination: answers[i]!.destination,
      siteFailure: reports[i]!.report.siteFailure ?? null,
      ...(hit ? { replyRule: hit.rule } : {}),
    });
  });
  return { finished, changed: changed() };
}

/** The reply that deferred an entry's recipients (the first with a code), for the Transport DO's reply rules. */
function deferringReply(
  outcomes: readonly OutcomeReport[],
): { reply: { code: number; enhanced: string | null; text: string } } | Record<string, never> {
  const r = outcomes.find((o) => o.status === "deferred" && typeof o.response?.code === "number")?.response;
  return r ? { reply: { code: r.code!, enhanced: r.enhanced ?? null, text: r.text ?? "" } } : {};
}

/**
 * Records the items' outcomes (those with any), one Outbox.recordOutcomes request per shard for
 * all of them (carrying the shard's held `acks`); `keep` gets each state to index. Returns the
 * error of each item (by index) whose shard's request failed.
 */
async function recordAll(
  env: Env,
  items: { id: string; reports: OutcomeReport[] }[],
  keep: (s: SyncState | null) => void,
  acks?: PendingAcks,
): Promise<Map<number, unknown>> {
  const failed = new Map<number, unknown>();
  const withReports = items.map((item, i) => ({ ...item, i })).filter((x) => x.reports.length > 0);
  await Promise.all(
    [...byOutbox(withReports, (x) => x.id)].map(async ([name, inShard]) => {
      try {
        const answers = await env.OUTBOX.getByName(name).recordOutcomes(
          inShard.map(({ id, reports }) => ({ id, reports })),
          true,
          acks?.take(name),
        );
        for (const a of answers) keep(a.sync);
      } catch (e) {
        for (const x of inShard) failed.set(x.i, e);
      }
    }),
  );
  return failed;
}

/**
 * The Destination DOs are the authority on windows and dead state: each destination's applied
 * reports go to its DO in one call, in order, and its answer (the state after the last) is
 * applied by the Transport DO (normally it already agrees). With DESTINATION_GROUPING = "site"
 * an `mx` nexthop's DO is its MX site's (the sorted set of MX hosts), shared by every domain
 * hosted there. Best effort: the outcomes are recorded already, and the next report carries the
 * destination's state again. With nexthop grouping a destination that never had a site failure
 * is not fed at all (durable-objects/transport/feedback-gate.ts).
 */
export async function feedDestinations(env: Env, done: Finished[], site: string | null): Promise<void> {
  const byQueue = new Map<
    string,
    { name: string; transport: string; scheduler: string; queue: string; reports: Finished[] }
  >();
  for (const f of done) {
    // A destination's own DO gets the reports the Transport DO says it needs (from its first
    // site failure on); a site's DO, shared by the site's queues for their window, gets all.
    if (!f.destination || (site === null && f.destination.feed === false && !f.siteFailure && !f.replyRule)) continue;
    const name =
      site === null ? destinationName(f.transport, f.destination.queue) : destinationName(f.transport, `site:${site}`);
    const key = `${f.transport}/${f.destination.queue}`;
    const d = byQueue.get(key) ?? {
      name,
      transport: f.transport,
      scheduler: f.scheduler,
      queue: f.destination.queue,
      reports: [],
    };
    d.reports.push(f);
    byQueue.set(key, d);
  }
  try {
    for (const d of byQueue.values()) {
      const verdict = await env.DESTINATION_QUEUE.getByName(d.name).reportMany(
        d.reports.map((f) => ({
          transport: f.transport,
          busy: f.destination!.busy,
          conc: f.destination!.conc,
          siteFailure: f.siteFailure,
          ...(site === null ? { window: f.destination!.window } : {}),
          ...(site === null && f.destination!.prior ? { prior: f.destination!.prior } : {}),
          ...(f.replyRule ? { replyRule: f.replyRule } : {}),
        })),
      );
      // The Transport DO ran the same feedback. A destination's own DO (nexthop grouping) gets
      // each delivery agent's reports in a batch of their own, so in another order than the
      // Transport DO applied them: its live window is no better than the Transport DO's, and
      // only death is sent on. A site's DO (shared by the site's queues) sends its window when it
      // differs, with the window it answers (basis) so that a stale one is ignored.
      const last = d.reports[d.reports.length - 1]!.destination!;
      if (verdict.deadUntil * 1000 <= Date.now() && (site === null || last.window === verdict.window)) continue;
      await env.TRANSPORT_QUEUE.getByName(d.scheduler).verdict(d.queue, { ...verdict, basis: last.window });
    }
  } catch (e) {
    console.error(
      JSON.stringify({
        error: "deliver: destination feedback failed",
        detail: e instanceof Error ? e.message : String(e),
      }),
    );
  }
}

/** Records, reports and feeds back the parts of one nexthop's entries, then indexes what changed. */
export async function finishParts(
  env: Env,
  items: FinishItem[],
  parts: SessionPart[],
  site: string | null,
): Promise<SyncState[]> {
  const { finished, changed } = await finishAll(env, items, parts);
  await feedDestinations(env, finished, site);
  return changed;
}

/** The latest state of each message among `states` (a message may be in several; each answer has its events). */
export function latestStates(states: SyncState[]): SyncState[] {
  const latest = new Map<string, SyncState>();
  for (const s of states) {
    const prev = latest.get(s.view.id);
    if (!prev || versionOf(s.view) >= versionOf(prev.view)) latest.set(s.view.id, prev ? mergeEvents(s, prev) : s);
  }
  return [...latest.values()];
}
