/*
 * NAME
 *   assign - message intake, recipient reads and assignment to jobs, peers and entries
 *   (after Postfix nqmgr qmgr_message.c: qmgr_message_read, _resolve, _assign; spec §3)
 * DESCRIPTION
 *   enqueueMessage() brings a message into the active queue and reads its first batch.
 *   refillMessage() reads the next batch. readBatchLimit() is the §3.2 limit: on the first
 *   read, the global budget qmgr_message_recipient_limit less what is in core, at least
 *   the message's minimum; on refills, the message's free slots; never more than 5000.
 *   Each batch is sorted by (transport, queue, domain, address) and assigned: recipients are
 *   appended to the last todo entry of their (job, queue) peer until the destination
 *   recipient limit is reached. Recipients for a dead transport or destination, or a
 *   transport in defer_transports, are deferred at once without an attempt (§3.3) and come
 *   out as "deferred" effects.
 * INVARIANTS
 *   Every recipient read is either in exactly one entry or reported deferred. A message's
 *   rcptCount equals the recipients of its entries.
 * ERRORS
 *   InvariantError if a read limit is not positive.
 */
import type { TransportParams } from "./config";
import { transportParams } from "./config";
import { invariant } from "./errors";
import { bumpCandidates, invalidateCandidateCache, isBlocker, moveLimits, obtainJob } from "./job-list";
import type { Message, MessageFields, Qmgr, Transport } from "./model";
import type { Effect, ResolvedRecipient } from "./ports";
import { finishMessage } from "./entry-done";
import { createEntry, obtainQueue, queueName } from "./queue";
import { obtainPeer } from "./peer";
import { initialWarnTime } from "./retry-policy";

/** Hard cap on recipients per read (Postfix's latency cap). */
export const READ_CAP = 5000;

/** What the shell knows about a message when it enters the active queue. */
export interface MessageIntake {
  id: string;
  /** Arrival time, seconds (null if unknown). */
  createTime: number | null;
  nullSender?: boolean;
  /** One recipient per entry (VERP). */
  singleRcpt?: boolean;
  tenant?: string | null;
  /** More pickup-policy fields (campaign, bulk); none by default. */
  fields?: MessageFields;
  /** 1 = high priority (spec §12.6). Default 0. */
  priority?: number;
  /** Warn time carried over from earlier attempts; default computed from createTime. */
  warnTime?: number;
  /** Offset of the first unread recipient in the source. Default 0. */
  rcptOffset?: number;
  /** Upper bound of recipients to read. */
  rcptTotal: number;
}

/** Finds or creates a transport's in-core object. */
export function obtainTransport(q: Qmgr, name: string): Transport {
  let t = q.transports.get(name);
  if (t) return t;
  const p: TransportParams = transportParams(q.cfg, name);
  t = {
    name,
    p,
    dead: false,
    deadUntil: 0,
    pending: 0,
    rateLockedUntil: 0,
    queues: new Map(),
    schedHead: null,
    schedTail: null,
    timeHead: null,
    timeTail: null,
    current: null,
    nextUnread: null,
    rcptUnused: p.rcptPool,
    blockerTag: 1,
    policyBlockerTag: 1,
    candCache: null,
    candCacheCurrent: null,
    candCacheTime: 0,
    candEpoch: 0,
    noCandEpoch: -1,
    noCandFrom: null,
    noCandSlots: 0,
    noCandPrio: 0,
    busyCount: 0,
    readyTotal: 0,
    jobsByMessage: new Map(),
  };
  q.transports.set(name, t);
  q.transportOrder.unshift(t);
  return t;
}

/** The §3.2 read limit for a message's next batch. */
export function readBatchLimit(q: Qmgr, m: Message): number {
  const limit = m.wasRead
    ? m.rcptLimit - m.rcptCount
    : Math.max(q.cfg.global.messageRecipientLimit - q.rcptCount, m.rcptLimit);
  return Math.min(limit, READ_CAP);
}

/** True if another message fits in the active queue. */
export function hasActiveRoom(q: Qmgr): boolean {
  return q.messages.size < q.cfg.global.messageActiveLimit;
}

/** Brings a message into the active queue and reads its first batch. */
export function enqueueMessage(q: Qmgr, intake: MessageIntake, now: number): Message {
  invariant(!q.messages.has(intake.id), "enqueueMessage", `message ${intake.id} already active`);
  const nullSender = intake.nullSender ?? false;
  const m: Message = {
    id: intake.id,
    queuedTime: now,
    createTime: intake.createTime,
    nullSender,
    singleRcpt: intake.singleRcpt ?? false,
    tenant: intake.tenant ?? null,
    ...(intake.fields && (intake.fields.jobid !== undefined || intake.fields.bulk || intake.fields.tags)
      ? { fields: intake.fields }
      : {}),
    priority: intake.priority ?? 0,
    rcptOffset: intake.rcptOffset ?? 0,
    hasUnread: intake.rcptTotal > 0,
    wasRead: false,
    rcptUnread: intake.rcptTotal,
    rcptCount: 0,
    rcptLimit: q.cfg.global.messageRecipientMinimum,
    refcount: 0,
    refillTime: now,
    deferred: false,
    warnTime:
      intake.warnTime ??
      (intake.createTime === null ? 0 : initialWarnTime(intake.createTime, nullSender, q.cfg.global)),
    jobs: [],
  };
  q.messages.set(m.id, m);
  if (m.hasUnread) refillMessage(q, m, now);
  // Everything deferred at resolve time (dead destinations), or nothing to read: the message
  // leaves the active queue at once, as Postfix's qmgr_active_done does after allocation.
  if (m.refcount === 0) finishMessage(q, m, now);
  return m;
}

/** Reads and assigns the message's next batch of recipients. */
export function refillMessage(q: Qmgr, m: Message, now: number): void {
  const limit = readBatchLimit(q, m);
  invariant(limit > 0, "refillMessage", `read limit ${limit} for ${m.id}`);
  const batch = q.source.read(m.id, m.rcptOffset, limit);
  m.rcptOffset = batch.nextOffset;
  m.rcptUnread = batch.unread;
  m.hasUnread = batch.unread > 0;
  m.wasRead = true;
  m.refillTime = now;
  assignRecipients(q, m, batch.rcpts, now);
  for (const j of m.jobs) {
    bumpCandidates(j.transport); // fewer unread recipients: a job's remaining need may shrink
    if (j.stackLevel >= 0 && j.selectedEntries < j.readEntries && !isBlocker(j)) invalidateCandidateCache(j.transport);
  }
  if (!m.hasUnread) for (const j of m.jobs) moveLimits(j);
}

interface Keyed<R> {
  r: R;
  t: Transport;
  queue: string;
  domain: string;
}

/** Sorts a batch by (transport, queue, domain case-insensitively, address) — spec §2.3. */
function sortBatch<R extends ResolvedRecipient>(q: Qmgr, rcpts: R[]): Keyed<R>[] {
  const keyed = rcpts.map((r) => {
    const t = obtainTransport(q, r.transport);
    const at = r.address.lastIndexOf("@");
    return {
      r,
      t,
      queue: queueName(t, r, q.cfg.global.recipientDelimiter),
      domain: r.address.slice(at + 1).toLowerCase(),
    };
  });
  if (keyed.length > 1) keyed.sort(compareKeyed);
  return keyed;
}

function compareKeyed(a: Keyed<ResolvedRecipient>, b: Keyed<ResolvedRecipient>): number {
  return cmp(a.t.name, b.t.name) || cmp(a.queue, b.queue) || cmp(a.domain, b.domain) || cmp(a.r.address, b.r.address);
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Assigns recipients to entries (spec §3.4), deferring those that cannot go now. */
export function assignRecipients<R extends ResolvedRecipient>(q: Qmgr, m: Message, rcpts: R[], now: number): void {
  const batch = ++q.batchSeq;
  for (const { r, t, queue: qname } of sortBatch(q, rcpts)) {
    if (t.dead || q.cfg.global.deferTransports.includes(t.name)) {
      deferAtResolve(q, m, r, t.name, r.nexthop, t.dead ? "transport unavailable" : "transport is in defer_transports");
      continue;
    }
    const queue = obtainQueue(q, t, qname, r, now);
    if (queue.window === 0) {
      deferAtResolve(q, m, r, t.name, r.nexthop, queue.dsn ?? "destination is dead");
      continue;
    }
    const job = obtainJob(m, t);
    const peer = obtainPeer(job, queue, batch);
    const limit = t.p.recipientLimit;
    const e = peer.todoTail;
    if (m.singleRcpt || e === null || (limit !== 0 && e.rcpts.length >= limit)) createEntry(q, peer, r);
    else e.rcpts.push(r);
    job.rcptCount += 1;
    m.rcptCount += 1;
    q.rcptCount += 1;
  }
}

/** Defers one recipient without an attempt, merging with the previous effect if alike. */
function deferAtResolve(
  q: Qmgr,
  m: Message,
  r: ResolvedRecipient,
  transport: string,
  nexthop: string,
  reason: string,
): void {
  m.deferred = true;
  m.refusedOnly = false;
  const last: Effect | undefined = q.effects[q.effects.length - 1];
  if (
    last &&
    last.kind === "deferred" &&
    last.messageId === m.id &&
    last.transport === transport &&
    last.nexthop === nexthop &&
    last.reason === reason
  ) {
    last.rcpts.push(r);
    return;
  }
  q.effects.push({ kind: "deferred", messageId: m.id, rcpts: [r], reason, transport, nexthop });
}
