/*
 * NAME
 *   complete - delivery completion, feedback, dead destinations and message finishing
 *   (after Postfix nqmgr qmgr_deliver.c, qmgr_entry.c, qmgr_queue.c, qmgr_active.c;
 *   spec §4.5, §6, §8); its timers are timers.ts
 * DESCRIPTION
 *   reportDelivery() applies one delivery agent's answer for a busy entry: status "ok",
 *   "defer" or "crash", with an optional site failure (the destination status of §6.1).
 *   A site failure gives negative feedback and may kill the destination, whose todo entries
 *   are then deferred at once; a non-crash answer without site failure gives positive
 *   feedback (and revives a dead destination). Reports are idempotent: an unknown or
 *   already-finished entry id is ignored and reported as such.
 *
 *   entryDone() disposes of an entry (busy or todo): counters, slot hand-back (§7.2), the
 *   rate-delay suspension (§6.6), blocker release, peer and queue clean-up, and finishing the
 *   message when its last entry is gone (§8): read more, or decide expiry / warning /
 *   back-off, or done.
 *
 *   queueDied(), queueRevived(), deferAllTodo() and transportAlive() are the steps that
 *   timers.ts (runTimers, failTransport, flush) shares with the reports.
 * INVARIANTS
 *   Feedback is applied only to live destinations; dead ones ignore in-flight failures.
 *   A message leaves the core exactly once, with exactly one of the effects message-done,
 *   message-deferred or message-expired.
 * ERRORS
 *   None for expected input; InvariantError on corrupt state.
 */
import { refillMessage } from "./assign";
import {
  isConcurrencyRefusal,
  learnCeiling,
  onNegativeFeedback,
  onPositiveFeedback,
  refusalOnly,
  reviveWindow,
} from "./destination-window";
import { bumpCandidates, freeJob, isBlocker, moveLimits, releaseBlockers } from "./job-list";
import type { Entry, Message, Qmgr, Queue, Transport } from "./model";
import { countLate, releasePolicies, setPolicy } from "./policy";
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
import { addTimer, blockerUpdate, freePeer, queueIdle, todoEntriesOf, unlinkTodo, updateReady } from "./queue";
import { decideAfterAttempt } from "./retry-policy";

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

export function queueRevived(q: Qmgr, queue: Queue): void {
  queue.timerAt = 0;
  queue.dsn = null;
  q.effects.push({ kind: "destination", transport: queue.transport.name, queue: queue.name, event: "revived" });
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

/** Disposes of an entry, busy or todo, and of whatever it leaves empty. */
export function entryDone(q: Qmgr, e: Entry, now: number): void {
  const peer = e.peer;
  const job = peer.job;
  const queue = peer.queue;
  const t = queue.transport;
  const m = job.message;
  const charged = e.flight;
  const wasBusy = charged !== null;
  if (wasBusy) {
    e.flight = null;
    queue.busyCount -= 1;
    t.busyCount -= 1;
    q.busy.delete(e.id);
    queue.lastDone = now;
    if (charged.length > 0 && releasePolicies(charged))
      for (const other of q.transports.values()) releaseBlockers(other);
  } else {
    unlinkTodo(e);
    job.selectedEntries += 1; // disposed of while todo: counts as handed out
    bumpCandidates(t);
  }
  const n = e.rcpts.length;
  job.rcptCount -= n;
  m.rcptCount -= n;
  q.rcptCount -= n;
  returnSlots(job, m);
  if (wasBusy && t.p.destinationRateDelay > 0) suspendQueue(q, queue, now);
  if (queue.window !== -1) blockerUpdate(queue);
  updateReady(queue);
  peer.refcount -= 1;
  if (peer.refcount === 0) freePeer(peer);
  if (queue.todoCount === 0 && queue.busyCount === 0) queueEmpty(q, queue, now);
  m.refcount -= 1;
  if (m.refcount === 0) finishMessage(q, m, now);
}

/** Slot hand-back from entryDone (spec §7.2). */
function returnSlots(job: Entry["peer"]["job"], m: Message): void {
  for (const other of m.jobs) {
    if (other === job || other.rcptCount >= other.rcptLimit) continue;
    if (other.stackLevel < 0 || !m.hasUnread) moveLimits(other);
  }
  if (!m.hasUnread) moveLimits(job);
}

/** Rate delay: after each delivery the destination pauses (window -1) for the delay (§6.6). */
function suspendQueue(q: Qmgr, queue: Queue, now: number): void {
  const t = queue.transport;
  if (queue.window === 0) {
    reviveWindow(queue, queue.busyCount, windowParamsOf(queue));
    boundWindow(queue);
    queueRevived(q, queue);
  }
  queue.window = -1;
  queue.timerAt = now + t.p.destinationRateDelay;
  addTimer(q, queue.timerAt, "queue", t.name, queue.name);
}

/** An empty queue: kept while dead (unless memory is short), else idle or forgotten. */
function queueEmpty(q: Qmgr, queue: Queue, now: number): void {
  if (queue.window === 0 && q.queueCount > 2 * q.cfg.global.messageRecipientLimit) {
    reviveWindow(queue, 0, windowParamsOf(queue));
    boundWindow(queue);
    queueRevived(q, queue);
  }
  if (queue.window > 0) queueIdle(q, queue, now);
}

/** The message's last in-core entry is gone: read more, or leave the active queue (§8). */
export function finishMessage(q: Qmgr, m: Message, now: number): void {
  while (m.hasUnread && m.refcount === 0) refillMessage(q, m, now);
  if (m.refcount > 0) return;
  for (const j of [...m.jobs]) freeJob(j);
  m.jobs = [];
  q.messages.delete(m.id);
  if (!m.deferred || m.removed) {
    q.effects.push({ kind: "message-done", messageId: m.id });
    return;
  }
  const d = decideAfterAttempt(m, now, q.cfg.global, m.refusedOnly === true);
  if (d.kind === "expired") q.effects.push({ kind: "message-expired", messageId: m.id });
  else
    q.effects.push({
      kind: "message-deferred",
      messageId: m.id,
      nextAttemptAt: d.nextAttemptAt,
      warn: d.warn,
      warnTime: d.warnTime,
    });
}

/** Re-exported for the facade. */
export { isBlocker };
