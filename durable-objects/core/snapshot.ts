/*
 * NAME
 *   snapshot - the scheduler state as plain JSON data, and back
 * DESCRIPTION
 *   snapshotQmgr() turns the in-core object graph into a versioned, JSON-serialisable value
 *   that a Durable Object can store in its SQLite; restoreQmgr() rebuilds an identical graph
 *   from it. "Identical" is tested as: every future selection, report and timer gives the
 *   same results on the restored state as on the original.
 *
 *   Object identity is carried by keys: a job by (transport, message id), a queue by
 *   (transport, name), an entry by its id. Every list order that selection can observe is
 *   kept: both job lists, each job's peer order, each peer's and queue's todo order, queue
 *   creation order, a message's job order and the timer heap's array.
 * INVARIANTS
 *   restoreQmgr(snapshotQmgr(q)) is observationally equal to q; snapshots are version 1.
 * ERRORS
 *   InvariantError if a snapshot refers to something it does not contain, or has a version
 *   this code does not read.
 */
import { obtainTransport } from "./assign";
import type { SchedulerConfig } from "./config";
import { invariant } from "./errors";
import type {
  Entry,
  Job,
  Message,
  PolicyCounter,
  Qmgr,
  Queue,
  RecipientSource,
  ResolvedRecipient,
  Timer,
  Transport,
} from "./model";
import { NO_CHARGES, findPeer, updateReady } from "./queue";

type MessageSnap = Omit<Message, "jobs"> & { jobs: string[] };
type QueueSnap = Omit<Queue, "transport" | "readyShare" | "idlePrev" | "idleNext">;
interface PeerSnap {
  queue: string;
  todo: number[];
  refcount: number;
}
type JobSnap = Omit<
  Job,
  | "message"
  | "transport"
  | "peerHead"
  | "peerTail"
  | "peerByQueue"
  | "peerBatch"
  | "stackParent"
  | "stackChildren"
  | "schedPrev"
  | "schedNext"
  | "timePrev"
  | "timeNext"
> & {
  message: string;
  stackParent: string | null;
  stackChildren: string[];
  peers: PeerSnap[];
};
interface TransportSnap {
  name: string;
  pending: number;
  dead: boolean;
  deadUntil: number;
  rateLockedUntil: number;
  rcptUnused: number;
  blockerTag: number;
  candCache: string | null;
  candCacheCurrent: string | null;
  candCacheTime: number;
  current: string | null;
  nextUnread: string | null;
  sched: string[];
  time: string[];
  queues: QueueSnap[];
  jobs: JobSnap[];
}
interface EntrySnap<R> {
  id: number;
  transport: string;
  message: string;
  queue: string;
  rcpts: R[];
  busy: boolean;
  charged: string[] | null;
  conc?: number;
}

/** The scheduler state as plain data (version 1). */
export interface QmgrSnapshot<R extends ResolvedRecipient = ResolvedRecipient> {
  v: 1;
  now: number;
  nextEntryId: number;
  batchSeq: number;
  timerSeq: number;
  rcptCount: number;
  messages: MessageSnap[];
  transports: TransportSnap[];
  transportOrder: string[];
  entries: EntrySnap<R>[];
  timers: Timer[];
  policies: Omit<PolicyCounter, never>[];
  /** The idle list, oldest first, as [transport, queue] names; and its pending timer. */
  idle: [string, string][];
  idleTimerAt: number;
}

const mid = (j: Job | null): string | null => (j ? j.message.id : null);

function listIds(head: Job | null, next: (j: Job) => Job | null): string[] {
  const out: string[] = [];
  for (let j = head; j; j = next(j)) out.push(j.message.id);
  return out;
}

function snapEntry<R extends ResolvedRecipient>(e: Entry): EntrySnap<R> {
  const queue = e.peer.queue;
  const busy = e.flight !== null;
  return {
    id: e.id,
    transport: queue.transport.name,
    message: e.peer.job.message.id,
    queue: queue.name,
    rcpts: e.rcpts as R[],
    busy,
    charged: busy && e.flight!.length > 0 ? e.flight!.map((c) => c.key) : null,
    ...(busy && e.conc !== undefined ? { conc: e.conc } : {}),
  };
}

function snapTransport(t: Transport, entries: EntrySnap<ResolvedRecipient>[]): TransportSnap {
  const queues: QueueSnap[] = [];
  for (const queue of t.queues.values()) {
    const { transport: _t, readyShare: _r, idlePrev: _p, idleNext: _n, ...rest } = queue;
    queues.push(rest);
  }
  const jobs: JobSnap[] = [];
  for (const j of t.jobsByMessage.values()) {
    const peers: PeerSnap[] = [];
    for (let p = j.peerHead; p; p = p.next) {
      const todo: number[] = [];
      for (let e = p.todoHead; e; e = e.pNext) {
        todo.push(e.id);
        entries.push(snapEntry(e));
      }
      peers.push({ queue: p.queue.name, todo, refcount: p.refcount });
    }
    // peerBatch and peerByQueue only speed up obtainPeer (queue.ts); neither is state to keep.
    const {
      message,
      transport: _t,
      peerHead: _ph,
      peerTail: _pt,
      peerByQueue: _pb,
      peerBatch: _pn,
      stackParent,
      stackChildren,
      schedPrev: _a,
      schedNext: _b,
      timePrev: _c,
      timeNext: _d,
      ...rest
    } = j;
    jobs.push({
      ...rest,
      message: message.id,
      stackParent: mid(stackParent),
      stackChildren: stackChildren.map((c) => c.message.id),
      peers,
    });
  }
  return {
    name: t.name,
    pending: t.pending,
    dead: t.dead,
    deadUntil: t.deadUntil,
    rateLockedUntil: t.rateLockedUntil,
    rcptUnused: t.rcptUnused,
    blockerTag: t.blockerTag,
    candCache: mid(t.candCache),
    candCacheCurrent: mid(t.candCacheCurrent),
    candCacheTime: t.candCacheTime,
    current: mid(t.current),
    nextUnread: mid(t.nextUnread),
    sched: listIds(t.schedHead, (j) => j.schedNext),
    time: listIds(t.timeHead, (j) => j.timeNext),
    queues,
    jobs,
  };
}

/** Turns the state into plain data. */
export function snapshotQmgr<R extends ResolvedRecipient>(q: Qmgr<R>): QmgrSnapshot<R> {
  const entries: EntrySnap<ResolvedRecipient>[] = [];
  const transports = [...q.transports.values()].map((t) => snapTransport(t, entries));
  for (const e of q.busy.values()) entries.push(snapEntry(e));
  const messages = [...q.messages.values()].map((m) => ({ ...m, jobs: m.jobs.map((j) => j.transport.name) }));
  const policies = [...q.policies.values()].map((c) => ({ ...c, rule: structuredCloneRule(c.rule) }));
  const transportOrder = q.transportOrder.map((t) => t.name);
  const idle: [string, string][] = [];
  for (let queue = q.idleHead; queue; queue = queue.idleNext) idle.push([queue.transport.name, queue.name]);
  return {
    v: 1,
    now: q.now,
    nextEntryId: q.nextEntryId,
    batchSeq: q.batchSeq,
    timerSeq: q.timerSeq,
    rcptCount: q.rcptCount,
    messages,
    transports,
    transportOrder,
    entries: entries as EntrySnap<R>[],
    timers: q.timers.map((t) => ({ ...t })),
    policies,
    idle,
    idleTimerAt: q.idleTimerAt,
  };
}

function structuredCloneRule(r: PolicyCounter["rule"]): PolicyCounter["rule"] {
  return { ...r, ...(r.rate ? { rate: { ...r.rate } } : {}), ...(r.throttle ? { throttle: { ...r.throttle } } : {}) };
}

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
    t.queues.set(qs.name, { ...qs, transport: t, readyShare: 0, idlePrev: null, idleNext: null });
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
