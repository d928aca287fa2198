/*
 * NAME
 *   model - the in-core objects of the queue manager (after Postfix qmgr.h)
 * DESCRIPTION
 *   The scheduler's working state is an object graph, mutated in place by the core's
 *   functions exactly as Postfix mutates its structures: messages, transports, queues
 *   (destinations), jobs (message × transport), peers (job × queue) and entries (delivery
 *   requests). Lists are intrusive and doubly linked so that every list operation the
 *   algorithm needs is O(1). snapshot.ts turns the graph into plain JSON data, restore.ts back.
 *
 *   The recipients the core reads, and the timers and effects it hands its shell, are ports.ts's.
 * INVARIANTS
 *   See each field. The jobs on a transport's schedList and timeList are exactly the linked
 *   jobs (stackLevel ≥ 0). An entry is on its peer's todo list iff it is todo. A peer exists
 *   iff it has entries (todo or busy). message.rcptLimit = minimum + Σ job.rcptLimit.
 */
import type { SchedulerConfig, TransportParams } from "./config";
import type { Feedback } from "./feedback";
import type { WindowState } from "./window-state";
import type { Effect, RecipientSource, ResolvedRecipient, Timer } from "./ports";

/** A message in the active queue (Postfix QMGR_MESSAGE). */
export interface Message {
  id: string;
  /** When it entered the active queue this time (job order, preemption score). */
  queuedTime: number;
  /** Arrival time, for back-off and expiry (null = unknown). */
  createTime: number | null;
  nullSender: boolean;
  /** One recipient per entry (VERP). */
  singleRcpt: boolean;
  /** Pickup-policy tenant key (spec §12.6), or null. */
  tenant: string | null;
  /** More pickup-policy fields of the message (policy.ts): its campaign (jobid) and whether it is bulk mail. */
  fields?: MessageFields;
  /** 1 = considered before 0 (spec §12.6). */
  priority: number;
  /** Next read offset in the source. */
  rcptOffset: number;
  /** Recipients remain unread in the source. */
  hasUnread: boolean;
  /** True once the first batch was read. */
  wasRead: boolean;
  /** Upper bound of unread recipients. */
  rcptUnread: number;
  /** Recipients in core. */
  rcptCount: number;
  /** Recipient slots the message may hold. */
  rcptLimit: number;
  /** Entries (todo + busy) referencing this message. */
  refcount: number;
  /** Time of the last read. */
  refillTime: number;
  /** Some recipient was deferred in this pass. */
  deferred: boolean;
  /**
   * Every deferral of this pass was a session refused at a learned ceiling (relay §12.7: a
   * probe or a server that just lowered its limit). Nothing about the message was learned, so
   * its next attempt is minimal_backoff_time away, not the back-off its age would give.
   */
  refusedOnly?: boolean;
  /** Taken out of the queue by an operator (hold, cancel, requeue): it finishes as done once its in-flight entries complete. */
  removed?: boolean;
  /** >0: time of the one delay warning; -1: sent; 0: none. */
  warnTime: number;
  /** Jobs of this message, at most one per transport. */
  jobs: Job[];
}

/** One transport: a delivery service with its own job lists (Postfix QMGR_TRANSPORT). */
export interface Transport {
  name: string;
  p: TransportParams;
  /** Delivery service unusable until deadUntil (transport_retry_time). */
  dead: boolean;
  deadUntil: number;
  /** Outstanding agent requests (Postfix keeps at most 2; the relay selects synchronously: 0). */
  pending: number;
  /** With a transport rate delay: no new allocation until the timer fires. */
  rateLockedUntil: number;
  queues: Map<string, Queue>;
  schedHead: Job | null;
  schedTail: Job | null;
  timeHead: Job | null;
  timeTail: Job | null;
  current: Job | null;
  nextUnread: Job | null;
  /** Free recipient slots; within [-extraRcptPool, rcptPool]. */
  rcptUnused: number;
  /** Odd, starts at 1, bumped by 2 to release every blocker at once. */
  blockerTag: number;
  /**
   * The same for jobs held back by pickup policies alone (every peer with entries suspended,
   * capped or rate-limited): released only by a policy event, not when a window opens, so a
   * policy-held backlog is not walked again after every delivery (relay addition; never set
   * without policies).
   */
  policyBlockerTag: number;
  candCache: Job | null;
  candCacheCurrent: Job | null;
  candCacheTime: number;
  /**
   * A second memo for the candidate search (not in Postfix, same results): bumped by every
   * event that could make a job newly eligible — linking, revival, blocker release, pops,
   * preemption, reads, todo disposal, selection past the current job.
   */
  candEpoch: number;
  /** At noCandEpoch, no job after noCandFrom (null: the head, so none at all) needed ≤ noCandSlots at priority ≥ noCandPrio. */
  noCandEpoch: number;
  noCandFrom: Job | null;
  noCandSlots: number;
  noCandPrio: number;
  /** Entries in flight on this transport (the process limit applies). */
  busyCount: number;
  /** Σ over ready queues of min(window - busy, todo): "is there enough work" (spec §4.1). */
  readyTotal: number;
  /** Jobs by message id, for lookups of retired jobs too. */
  jobsByMessage: Map<string, Job>;
}

/** A destination queue of a transport (Postfix QMGR_QUEUE). */
export interface Queue extends WindowState {
  name: string;
  nexthop: string;
  transport: Transport;
  /** Todo entries of this queue (they sit on their peers' lists). */
  todoCount: number;
  busyCount: number;
  /** This queue's current share of transport.readyTotal. */
  readyShare: number;
  /** Reason while dead. */
  dsn: string | null;
  /** Dead: revival time; suspended (rate delay): resume time; else 0. */
  timerAt: number;
  blockerTag: number;
  /** Time of the last delivery completion (0 = never). */
  lastDone: number;
  /** Idle (empty) since; kept for destination_idle_memory (spec §12.4); -1 = in use. */
  idleSince: number;
  /** Links on the idle list (oldest first). */
  idlePrev: Queue | null;
  idleNext: Queue | null;
  egress: string | null;
  site: string | null;
  /** The MX address the last delivery connected to (Halon's remoteip), from its report; absent until one told it. */
  remoteip?: string | null;
  /** A provider rule's bounds on this queue's window (site-shape.ts); absent or null: its transport's. */
  shape?: { initial?: number; limit?: number } | null;
}

/** A message's pickup-policy fields (Halon's jobid, and bulk mail for the complaint brake). */
export interface MessageFields {
  /** The sender's campaign (the `campaign` tag): key jobid:<tenant>/<jobid>. */
  jobid?: string;
  /** Bulk mail (sent with one-click unsubscribe): key bulk:<tenant>. */
  bulk?: boolean;
  /** The message's tags named in policy_tags (custom fields): key tag:<tenant>/<name>=<value> each. */
  tags?: Record<string, string>;
}

/** A message × transport pair (Postfix QMGR_JOB). */
export interface Job {
  message: Message;
  transport: Transport;
  peerHead: Peer | null;
  peerTail: Peer | null;
  /**
   * Peer lookup by queue, built only once a job gets recipients in a second batch: within
   * one batch recipients arrive sorted by queue, so the job's last peer is the only one a
   * recipient can join (saves a map entry per peer for the common single-batch job).
   */
  peerByQueue: Map<Queue, Peer> | null;
  /** The assignment batch that created this job's peers (see peerByQueue); -1 after a restore (not in snapshots). */
  peerBatch: number;
  readEntries: number;
  selectedEntries: number;
  slotsAvailable: number;
  slotsUsed: number;
  /** -1 unlinked (new or retired), 0 ordinary, n > 0 preempting n deep. */
  stackLevel: number;
  stackParent: Job | null;
  stackChildren: Job[];
  blockerTag: number;
  policyBlockerTag: number;
  rcptCount: number;
  rcptLimit: number;
  schedPrev: Job | null;
  schedNext: Job | null;
  timePrev: Job | null;
  timeNext: Job | null;
}

/** A job × queue pair: that message's todo entries for that destination, FIFO. */
export interface Peer {
  job: Job;
  queue: Queue;
  todoHead: Entry | null;
  todoTail: Entry | null;
  /** Entries (todo + busy) of this peer. */
  refcount: number;
  prev: Peer | null;
  next: Peer | null;
}

/** One delivery request: 1..recipient-limit recipients of one message for one queue. */
export interface Entry<R extends ResolvedRecipient = ResolvedRecipient> {
  id: number;
  peer: Peer;
  rcpts: R[];
  /** Peer todo list links. */
  pPrev: Entry | null;
  pNext: Entry | null;
  /** null while todo; while busy, the policy counters it holds (often the shared empty list). */
  flight: readonly PolicyCounter[] | null;
  /**
   * While busy: its destination's deliveries in flight when it was selected, itself included (the
   * sessions open when its own opens). The learned ceiling (§12.7) reads a refusal's and a probe's
   * concurrency from it, since reports reach the scheduler in batches, after later completions.
   */
  conc?: number;
}

/** A pickup-policy rule for one key (spec §12.6). */
export interface PolicyRule {
  /** At most this many entries in flight with this key. */
  concurrency?: number;
  /** At most `count` selections per `perSec` seconds (token bucket, burst = count). */
  rate?: { count: number; perSec: number };
  /** Nothing with this key is selected before this time (seconds). */
  suspendedUntil?: number;
  /** What set the suspension, when not an operator (e.g. "reply_rule:yahoo-tss04"); blocked_by shows it. */
  label?: string;
  /**
   * A lower rate a reply rule set, in force until `until` (seconds): while it is, the stricter of
   * it and `rate` applies, and a block by it shows `label`.
   */
  throttle?: { count: number; perSec: number; until: number; label: string };
  /** The provider rule that set the cap and rate (site-shape.ts), kept in step with it; absent when an operator did. */
  provider?: string;
  /** Halon's connectinterval: at least this many seconds between two selections with this key. */
  interval?: number;
  /** Fixed-window caps (UTC hours and days): at most this many selections per hour and per day (an IP warm-up's); `label` is what blocked_by shows. */
  caps?: { perHour?: number; perDay?: number; label?: string };
}

/** Live counters of one policy key. */
export interface PolicyCounter {
  key: string;
  rule: PolicyRule;
  inflight: number;
  tokens: number;
  tokensAt: number;
  /** Time of the pending wake-up timer for this key (0 = none). */
  wakeAt: number;
  /** When an entry with this key was last selected (for `interval`); absent = never. */
  lastAt?: number;
  /** Selections counted against `caps` in the current hour and day (window start, seconds). */
  hour?: { start: number; n: number };
  day?: { start: number; n: number };
}

/** The whole in-core state of the queue manager. */
export interface Qmgr<R extends ResolvedRecipient = ResolvedRecipient> {
  cfg: SchedulerConfig;
  source: RecipientSource<R>;
  /** Message ids in core, with the message. */
  messages: Map<string, Message>;
  transports: Map<string, Transport>;
  /** Transport round-robin order: new ones at the front, a chosen one rotated to the back. */
  transportOrder: Transport[];
  /** Recipients in core, all messages. */
  rcptCount: number;
  /** Queue objects in core, all transports. */
  queueCount: number;
  nextEntryId: number;
  /** Assignment batches so far (see Job.peerBatch). */
  batchSeq: number;
  /** Busy entries by id (reports arrive by id). */
  busy: Map<number, Entry<R>>;
  timers: Timer[];
  timerSeq: number;
  /** Idle queues of all transports, oldest first; one timer serves the head. */
  idleHead: Queue | null;
  idleTail: Queue | null;
  /** Time of the pending idle-list timer (0 = none). */
  idleTimerAt: number;
  policies: Map<string, PolicyCounter>;
  effects: Effect[];
  /** Use the no-candidate memo (default true; false gives Postfix's plain scan, for tests). */
  candidateShortcut: boolean;
  /** The last clock reading given to the core (whole seconds). */
  now: number;
}

/** Re-exported so callers need only this module for the state's vocabulary. */
export type { Feedback, ResolvedRecipient, Timer, TransportParams, WindowState };
