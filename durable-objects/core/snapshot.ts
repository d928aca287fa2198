/*
 * NAME
 *   snapshot - the scheduler state as plain JSON data, and back
 * DESCRIPTION
 *   snapshotQmgr() turns the in-core object graph into a versioned, JSON-serialisable value
 *   that a Durable Object can store in its SQLite; restoreQmgr() (restore.ts) rebuilds an
 *   identical graph from it. "Identical" is tested as: every future selection, report and
 *   timer gives the same results on the restored state as on the original.
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
import type { Entry, Job, Message, PolicyCounter, Qmgr, Queue, Transport } from "./model";
import type { ResolvedRecipient, Timer } from "./ports";
import { QUEUE_DEFAULTS } from "./queue";

type MessageSnap = Omit<Message, "jobs"> & { jobs: string[] };

/** A queue without its links; the fields at QUEUE_DEFAULTS, and `nexthop` when it is the name, may be left out. */
type QueueSnap = Omit<
  Queue,
  "transport" | "readyShare" | "idlePrev" | "idleNext" | keyof typeof QUEUE_DEFAULTS | "nexthop"
> &
  Partial<Pick<Queue, keyof typeof QUEUE_DEFAULTS | "nexthop">>;

export interface PeerSnap {
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

export interface TransportSnap {
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

export interface EntrySnap<R> {
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

const DEFAULT_OF = QUEUE_DEFAULTS as Readonly<Record<string, unknown>>;

/**
 * A queue's state: every own field but its four links (transport, readyShare, idlePrev,
 * idleNext) and those at their QUEUE_DEFAULTS (queue.ts; `nexthop` when it is the name), copied
 * in a loop rather than by a rest copy (`{ transport, ...rest } = queue`), which is slower, since
 * a tiny core is snapshotted at every flush (transport/journal.ts); the core remembers an idle
 * destination for destination_idle_memory, so with mail to many domains most of a snapshot is
 * idle queues, and their defaults were most of each. The loop keeps a field added to Queue later
 * without a change here.
 */
function snapQueue(queue: Queue): QueueSnap {
  const from = queue as unknown as Record<string, unknown>;
  const s: Record<string, unknown> = {};
  for (const k in from) {
    if (k === "transport" || k === "readyShare" || k === "idlePrev" || k === "idleNext") continue;
    const v = from[k];
    if (k in DEFAULT_OF ? v === DEFAULT_OF[k] : k === "nexthop" && v === queue.name) continue;
    s[k] = v;
  }
  return s as unknown as QueueSnap;
}

function snapTransport(t: Transport, entries: EntrySnap<ResolvedRecipient>[]): TransportSnap {
  const queues: QueueSnap[] = [];
  for (const queue of t.queues.values()) queues.push(snapQueue(queue));
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
    // Field by field (JobSnap's type names each of Job's, none optional, so a field added to Job
    // fails to compile here). peerBatch and peerByQueue only speed up obtainPeer (peer.ts);
    // neither is state to keep.
    jobs.push({
      readEntries: j.readEntries,
      selectedEntries: j.selectedEntries,
      slotsAvailable: j.slotsAvailable,
      slotsUsed: j.slotsUsed,
      stackLevel: j.stackLevel,
      blockerTag: j.blockerTag,
      policyBlockerTag: j.policyBlockerTag,
      rcptCount: j.rcptCount,
      rcptLimit: j.rcptLimit,
      message: j.message.id,
      stackParent: mid(j.stackParent),
      stackChildren: j.stackChildren.map((c) => c.message.id),
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

/** A copy of a policy rule that shares no object with the original (its rate and throttle). */
export function structuredCloneRule(r: PolicyCounter["rule"]): PolicyCounter["rule"] {
  return { ...r, ...(r.rate ? { rate: { ...r.rate } } : {}), ...(r.throttle ? { throttle: { ...r.throttle } } : {}) };
}
