/*
 * NAME
 *   restore - the scheduler state rebuilt from its snapshot (snapshot.ts)
 * DESCRIPTION
 *   restoreQmgr() rebuilds the in-core object graph from a QmgrSnapshot, with the given
 *   configuration and recipient source: transports, queues, jobs, peers and todo entries, then
 *   the busy entries, the transport order, the idle list and each message's job order. Every
 *   list order that selection can observe is linked back in the order the snapshot kept.
 * INVARIANTS
 *   restoreQmgr(snapshotQmgr(q)) is observationally equal to q; derived counts (a transport's
 *   busy entries, each queue's ready share) are recomputed, not read.
 * ERRORS
 *   InvariantError if the snapshot refers to something it does not contain, or has a version
 *   this code does not read.
 */
import { obtainTransport } from "./assign";
import type { SchedulerConfig } from "./config";
import { invariant } from "./errors";
import type { Entry, Job, PolicyCounter, Qmgr } from "./model";
import type { RecipientSource, ResolvedRecipient } from "./ports";
import { NO_CHARGES, newQueue, updateReady } from "./queue";
import { findPeer } from "./peer";
import { structuredCloneRule, type EntrySnap, type PeerSnap, type QmgrSnapshot, type TransportSnap } from "./snapshot";

/** Rebuilds the state from a snapshot, with the given configuration and recipient source. */
export function restoreQmgr<R extends ResolvedRecipient>(
  s: QmgrSnapshot<R>,
  cfg: SchedulerConfig,
  source: RecipientSource<R>,
): Qmgr<R> {
  invariant(s.v === 1, "restoreQmgr", `unknown snapshot version ${String(s.v)}`);
  const q: Qmgr<R> = {
    cfg,
    source,
    messages: new Map(),
    transports: new Map(),
    transportOrder: [],
    rcptCount: s.rcptCount,
    queueCount: 0,
    nextEntryId: s.nextEntryId,
    batchSeq: s.batchSeq,
    busy: new Map(),
    timers: s.timers.map((t) => ({ ...t })),
    timerSeq: s.timerSeq,
    idleHead: null,
    idleTail: null,
    idleTimerAt: s.idleTimerAt,
    policies: new Map(),
    effects: [],
    candidateShortcut: true,
    now: s.now,
  };
  for (const ms of s.messages) q.messages.set(ms.id, { ...ms, jobs: [] });
  for (const c of s.policies) q.policies.set(c.key, { ...c, rule: structuredCloneRule(c.rule) });
  const entryById = new Map(s.entries.map((e) => [e.id, e]));
  for (const ts of s.transports) restoreTransport(q, ts, entryById);
  for (const es of s.entries) if (es.busy) restoreBusy(q, es);
  q.transportOrder = s.transportOrder.map((n) => must(q.transports.get(n), `transport ${n}`));
  for (const [tn, qn] of s.idle) {
    const queue = must(q.transports.get(tn)?.queues.get(qn), `idle queue ${tn}/${qn}`);
    queue.idlePrev = q.idleTail;
    if (q.idleTail) q.idleTail.idleNext = queue;
    else q.idleHead = queue;
    q.idleTail = queue;
  }
  for (const ms of s.messages) {
    const m = q.messages.get(ms.id)!;
    for (const tn of ms.jobs) m.jobs.push(must(q.transports.get(tn)?.jobsByMessage.get(m.id), `job ${m.id}/${tn}`));
  }
  return q;
}

function must<T>(v: T | undefined | null, what: string): T {
  invariant(v !== undefined && v !== null, "restoreQmgr", `missing ${what}`);
  return v;
}

function restoreTransport<R extends ResolvedRecipient>(
  q: Qmgr<R>,
  ts: TransportSnap,
  entryById: Map<number, EntrySnap<R>>,
): void {
  const t = obtainTransport(q, ts.name);
  const todoById = new Map<number, Entry>();
  Object.assign(t, {
    pending: ts.pending,
    dead: ts.dead,
    deadUntil: ts.deadUntil,
    rateLockedUntil: ts.rateLockedUntil,
    rcptUnused: ts.rcptUnused,
    blockerTag: ts.blockerTag,
    candCacheTime: ts.candCacheTime,
  });
  for (const qs of ts.queues) {
    // A new queue's fields, in their order, overwritten by the snapshot's (which leaves out those
    // at their defaults, and the nexthop when it is the name); fields a queue gained later follow.
    t.queues.set(qs.name, Object.assign(newQueue(t, qs.name, qs.name, null, null), qs));
    q.queueCount += 1;
  }
  for (const js of ts.jobs) {
    const { message, stackParent: _p, stackChildren: _c, peers: _peers, ...rest } = js;
    const m = must(q.messages.get(message), `message ${message}`);
    // peerBatch -1: no batch made these peers, so the next one to add a peer builds peerByQueue (snapshots before 2026-11-27 carry a peerBatch; it is dropped).
    const job: Job = {
      ...rest,
      peerBatch: -1,
      message: m,
      transport: t,
      peerHead: null,
      peerTail: null,
      peerByQueue: null,
      stackParent: null,
      stackChildren: [],
      schedPrev: null,
      schedNext: null,
      timePrev: null,
      timeNext: null,
    };
    t.jobsByMessage.set(message, job);
  }
  const job = (id: string | null): Job | null => (id === null ? null : must(t.jobsByMessage.get(id), `job ${id}`));
  for (const js of ts.jobs) {
    const j = job(js.message)!;
    j.stackParent = job(js.stackParent);
    j.stackChildren = js.stackChildren.map((c) => job(c)!);
    for (const ps of js.peers) restorePeer(j, ps, entryById, todoById);
  }
  linkList(
    ts.sched.map((id) => job(id)!),
    (a, b) => ((a.schedNext = b), b && (b.schedPrev = a)),
    (h, tl) => ((t.schedHead = h), (t.schedTail = tl)),
  );
  linkList(
    ts.time.map((id) => job(id)!),
    (a, b) => ((a.timeNext = b), b && (b.timePrev = a)),
    (h, tl) => ((t.timeHead = h), (t.timeTail = tl)),
  );
  for (const queue of t.queues.values()) updateReady(queue);
  t.current = job(ts.current);
  t.nextUnread = job(ts.nextUnread);
  t.candCache = job(ts.candCache);
  t.candCacheCurrent = job(ts.candCacheCurrent);
}

function linkList(
  jobs: Job[],
  link: (a: Job, b: Job | null) => unknown,
  ends: (h: Job | null, t: Job | null) => unknown,
): void {
  for (let i = 0; i < jobs.length; i++) link(jobs[i]!, jobs[i + 1] ?? null);
  ends(jobs[0] ?? null, jobs[jobs.length - 1] ?? null);
}

function restorePeer<R extends ResolvedRecipient>(
  j: Job,
  ps: PeerSnap,
  entryById: Map<number, EntrySnap<R>>,
  todoById: Map<number, Entry>,
): void {
  const t = j.transport;
  const queue = must(t.queues.get(ps.queue), `queue ${ps.queue}`);
  const peer = {
    job: j,
    queue,
    todoHead: null as Entry | null,
    todoTail: null as Entry | null,
    refcount: ps.refcount,
    prev: j.peerTail,
    next: null,
  };
  if (j.peerTail) j.peerTail.next = peer;
  else j.peerHead = peer;
  j.peerTail = peer;
  for (const id of ps.todo) {
    const es = must(entryById.get(id), `entry ${id}`);
    const e: Entry = { id, peer, rcpts: es.rcpts, pPrev: peer.todoTail, pNext: null, flight: null };
    if (peer.todoTail) peer.todoTail.pNext = e;
    else peer.todoHead = e;
    peer.todoTail = e;
    todoById.set(id, e);
  }
}

function restoreBusy<R extends ResolvedRecipient>(q: Qmgr<R>, es: EntrySnap<R>): void {
  const j = must(q.transports.get(es.transport)?.jobsByMessage.get(es.message), `job ${es.message}/${es.transport}`);
  const queue = must(j.transport.queues.get(es.queue), `queue ${es.queue}`);
  const peer = must(findPeer(j, queue), `peer ${es.message}/${es.queue}`);
  const charged = es.charged
    ? es.charged.map((k) => q.policies.get(k)).filter((c): c is PolicyCounter => c !== undefined)
    : [];
  q.busy.set(es.id, {
    id: es.id,
    peer,
    rcpts: es.rcpts,
    pPrev: null,
    pNext: null,
    flight: charged.length > 0 ? charged : NO_CHARGES,
    ...(es.conc !== undefined ? { conc: es.conc } : {}),
  });
  j.transport.busyCount += 1; // derived: the transport's busy entries
}
