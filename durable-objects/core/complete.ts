/*
 * NAME
 *   complete - delivery completion, feedback and dead destinations (after Postfix nqmgr
 *   qmgr_deliver.c, qmgr_queue.c; spec §4.5, §6); disposing of entries and finishing
 *   messages is entry-done.ts, its timers are timers.ts
 * DESCRIPTION
 *   reportDelivery() applies one delivery agent's answer for a busy entry: status "ok",
 *   "defer" or "crash", with an optional site failure (the destination status of §6.1).
 *   A site failure gives negative feedback and may kill the destination, whose todo entries
 *   are then deferred at once; a non-crash answer without site failure gives positive
 *   feedback (and revives a dead destination). Reports are idempotent: an unknown or
 *   already-finished entry id is ignored and reported as such.
 *
 *   queueDied(), deferAllTodo() and transportAlive() are the steps that timers.ts
 *   (runTimers, failTransport, flush) shares with the reports.
 * INVARIANTS
 *   Feedback is applied only to live destinations; dead ones ignore in-flight failures.
 * ERRORS
 *   None for expected input; InvariantError on corrupt state.
 */
import { isConcurrencyRefusal, learnCeiling, refusalOnly } from "./ceiling";
import { onNegativeFeedback, onPositiveFeedback } from "./destination-window";
import { entryDone, queueRevived } from "./entry-done";
import { isBlocker } from "./job-list";
import type { Entry, Qmgr, Queue, Transport } from "./model";
import { countLate, setPolicy } from "./policy";
import { peerPolicyKeys } from "./select";
import { applySiteShape, boundWindow, windowParamsOf, type SiteShape } from "./site-shape";
import {
  matchReplyRule,
  replyOf,
  replyRuleKey,
  replyRulePolicy,
  type ReplyInfo,
  type ReplyRuleAction,
} from "./reply-rules";
import { addTimer, todoEntriesOf, updateReady } from "./queue";

/** A destination-level failure reported by the delivery agent (spec §6.1). */
export interface SiteFailure {
  dsnStatus: string;
  reason: string;
}

/** A delivery agent's answer for one entry. */
export interface DeliveryReport {
  status: "ok" | "defer" | "crash";
  siteFailure?: SiteFailure | null;
  /** The reply that deferred recipients of the entry when it was not a site failure (a 421 to MAIL FROM), for reply rules. */
  reply?: ReplyInfo | null;
  /** The provider rule the destination's MX hosts matched (site-shape.ts). */
  site?: SiteShape | null;
  /** The egress the delivery went out through (its pickup-policy field; warm-up caps are per egress). */
  egress?: string | null;
  /** The MX address the delivery connected to (the remoteip pickup-policy field). */
  remoteip?: string | null;
}

/** Result of applying a report. */
export type ReportResult = { kind: "applied" } | { kind: "unknown-entry" };

/** Applies a delivery report for a busy entry (spec §4.5). */
export function reportDelivery(q: Qmgr, entryId: number, report: DeliveryReport, now: number): ReportResult {
  q.now = now;
  const e = q.busy.get(entryId);
  if (!e) return { kind: "unknown-entry" };
  const queue = e.peer.queue;
  const t = queue.transport;
  const m = e.peer.job.message;
  const known = `${queue.egress}\n${queue.site}\n${queue.remoteip ?? null}`;
  if (report.site) applySiteShape(q, queue, report.site, now);
  if (report.egress) queue.egress = report.egress;
  if (report.remoteip) queue.remoteip = report.remoteip;
  // The entry was selected before its destination's provider and egress were known: it counts
  // against their caps and rates now (an IP warm-up's), as it would have at selection.
  if (`${queue.egress}\n${queue.site}\n${queue.remoteip ?? null}` !== known && q.policies.size > 0)
    countLate(
      q,
      peerPolicyKeys(q, e.peer).filter((k) => !(e.flight ?? []).some((c) => c.key === k)),
      now,
    );
  const p = windowParamsOf(queue);
  const site = report.siteFailure ?? null;
  // The deliveries in flight when this one started (reports come in batches, after later
  // completions), and its start order for a refusal cohort (§12.7); neither known after a restore
  // from a snapshot without them.
  const conc = e.conc ?? queue.busyCount;
  const seq = e.conc !== undefined ? e.id : undefined;
  if (report.status !== "ok") {
    // A refusal at a learned ceiling says nothing about the message (see Message.refusedOnly).
    const refused = site !== null && (t.p.ceilingMemory ?? 0) > 0 && isConcurrencyRefusal(site.reason);
    m.refusedOnly = refused && (!m.deferred || m.refusedOnly === true);
    m.deferred = true;
    const reply = site ? replyOf(site) : (report.reply ?? null);
    const acted = reply
      ? applyReplyRules(
          q,
          e,
          reply,
          site?.reason ?? [reply.code, reply.enhanced, reply.text].filter((x) => x !== null && x !== "").join(" "),
          now,
        )
      : null;
    // A ceiling rule takes the reply for a concurrency refusal, whatever its wording.
    const refusal = acted === "ceiling" || (site !== null && isConcurrencyRefusal(site.reason));
    if (site && queue.window > 0) {
      if (refusalOnly(refusal, conc, p)) learnCeiling(queue, conc, now, p, seq);
      else if (onNegativeFeedback(queue, p) === "died") queueDied(q, queue, site.reason, now);
      else if (refusal) learnCeiling(queue, conc, now, p, seq);
      updateReady(queue);
    } else if (refusal && queue.window > 0) {
      learnCeiling(queue, conc, now, p, seq);
      updateReady(queue);
    }
  }
  if (report.status !== "crash") {
    transportAlive(q, t);
    if (!site && queue.window >= 0) {
      const wasDead = queue.window === 0;
      onPositiveFeedback(queue, queue.busyCount, p, now, conc);
      if (wasDead) queueRevived(q, queue);
      updateReady(queue);
    }
  }
  if (queue.shape) {
    boundWindow(queue);
    updateReady(queue);
  }
  entryDone(q, e, now);
  return { kind: "applied" };
}

/**
 * A deferring reply (a site failure's, or a transaction's) that a reply rule matches acts on the
 * rule's key or on the destination (reply-rules.ts): a suspension or a throttle, a learned
 * ceiling, or nothing more for a defer rule (the delivery stage already made the 5xx a deferral).
 * The effect tells the delivery stage, which records relay.destination.throttled with the outcome.
 */
function applyReplyRules(
  q: Qmgr,
  e: Entry,
  reply: ReplyInfo,
  text: string,
  now: number,
): ReplyRuleAction["kind"] | null {
  const rule = matchReplyRule(q.cfg.global.replyRules ?? [], reply);
  if (!rule || rule.action.kind === "bounce") return null;
  const queue = e.peer.queue;
  const dest = { transport: queue.transport.name, queue: queue.name, egress: queue.egress, site: queue.site };
  const base = {
    kind: "reply-rule" as const,
    entryId: e.id,
    messageId: e.peer.job.message.id,
    transport: dest.transport,
    queue: dest.queue,
    rule: rule.name,
    action: rule.action.kind,
    reply: text,
  };
  const a = rule.action;
  const next = replyRulePolicy(rule, dest, q.policies.get(replyRuleKey(rule, dest))?.rule, now);
  if (next) {
    setPolicy(q, next.key, next.rule, now);
    q.effects.push({ ...base, key: next.key, until: next.until, ...(a.kind === "rate" ? { rate: a.rate } : {}) });
  } else {
    q.effects.push({ ...base, key: `dest:${dest.transport}/${dest.queue}`, until: now });
  }
  return a.kind;
}

/** A destination just died: remember why, arm revival (by default after minimal_backoff_time), defer its todo entries (§6.4). */
export function queueDied(
  q: Qmgr,
  queue: Queue,
  reason: string,
  now: number,
  until = now + q.cfg.global.minimalBackoffTime,
): void {
  const t = queue.transport;
  queue.dsn = reason;
  queue.timerAt = until;
  addTimer(q, queue.timerAt, "queue", t.name, queue.name);
  q.effects.push({
    kind: "destination",
    transport: t.name,
    queue: queue.name,
    event: "dead",
    until: queue.timerAt,
    reason,
  });
  deferAllTodo(q, queue, reason, now);
}

/** Defers every todo entry of a queue without an attempt. */
export function deferAllTodo(q: Qmgr, queue: Queue, reason: string, now: number): void {
  const t = queue.transport;
  for (const e of todoEntriesOf(queue)) {
    const m = e.peer.job.message;
    m.deferred = true;
    m.refusedOnly = false;
    q.effects.push({
      kind: "deferred",
      messageId: m.id,
      rcpts: e.rcpts,
      reason,
      transport: t.name,
      nexthop: queue.nexthop,
    });
    entryDone(q, e, now);
  }
}

/** A dead transport is alive again: clears its death and says so (an effect). */
export function transportAlive(q: Qmgr, t: Transport): void {
  if (!t.dead) return;
  t.dead = false;
  t.deadUntil = 0;
  q.effects.push({ kind: "transport", transport: t.name, event: "revived" });
}

/** Re-exported for the facade. */
export { isBlocker };
