/**
 * The delivery contract: the one thing the queue manager (the Transport DO,
 * durable-objects/transport/) and its delivery agents (worker/delivery/: the DeliveryAgent objects,
 * or the `deliver` queue consumer with DELIVERY=queue) share, as Postfix's deliver_request.h is the
 * only thing qmgr and smtp share. The scheduler imports nothing of the agents', and the agents
 * nothing of the scheduler's, but this module and the pure core's value types.
 *
 * DESCRIPTION
 *   DeliverJob        one selected entry handed to an agent (a `deliver` queue body, or an item of
 *                     DeliveryAgent.deliver), with its lease.
 *   EntryReport       what an agent reports of one entry: the core's DeliveryReport and the
 *                     recipients that reached a final state.
 *   ReportAnswer      the queue manager's answer to one report; TakeAnswer, to reportAndTake: the
 *                     answers and the next jobs for the reporting agent.
 *   AGENT_SESSIONS    SMTP sessions one DeliveryAgent runs at once; the queue manager gives an
 *                     agent no more entries than that.
 *   SESSION_IDLE_MS   how long a finished session's connection waits for the next entry
 *                     (Postfix's smtp_connection_cache_time_limit).
 *   agentPool(processLimit)  DeliveryAgents a Transport DO uses: enough for process_limit sessions.
 *   agentName(scheduler, nexthop, slot, pool)  the DeliveryAgent for a destination's slot: the
 *                     Transport DO's pool, entered at the destination's hash, slot k the k-th
 *                     agent after it. Agents are shared by destinations, as Postfix's smtp(8)
 *                     processes are: a new domain needs no object of its own.
 *   schedulerName(t, nexthop, shards)  the Transport DO that schedules a destination of a
 *                     transport run on `shards` objects (TRANSPORT_SHARDS): sharded by
 *                     destination, as Postfix scales by running instances; shard 0 keeps the
 *                     transport's own name (one shard is the transport as it always was), shard k
 *                     is `<t>~<k>`. schedulerNames(t, shards): all of them; transportOfScheduler
 *                     back.
 *   destinationName(t, queue)   a Destination DO's object name.
 *   coreIdOf / parseCoreId      an attempt's id in the queue manager (`<id>` for the first
 *                     attempt, `<id>#<n>` after) and back.
 *
 * INVARIANTS
 *   parseCoreId(coreIdOf(id, n)) = {messageId: id, attempt: max(n, 1)}.
 */
import type { DeliveryReport, Effect } from "../../durable-objects/core";

/** SMTP sessions one DeliveryAgent runs at once, and connections it keeps open (idle ones included). */
export const AGENT_SESSIONS = 4;

/** How long a finished session's connection waits idle for the next entry, ms (Postfix: 2 s). */
export const SESSION_IDLE_MS = 2_000;

/** The body of a `deliver` queue message, or one job of DeliveryAgent.deliver: one entry with its lease. */
export interface DeliverJob {
  entryId: number;
  /** The Outbox message id. */
  messageId: string;
  /** Delivery attempt of the message (1 for the first). */
  attempt: number;
  transport: string;
  nexthop: string;
  /** Recipients with their backlog index (reported back as final). */
  rcpts: { idx: number; address: string }[];
  /** Epoch seconds after which the transport treats the entry as crashed. */
  leaseUntil: number;
  /** The DeliveryAgent it was handed to (DELIVERY = "agents"), which reports with reportAndTake. */
  agent?: string;
  /** The Transport DO that handed it over (schedulerName), which takes its report; absent: the transport's own. */
  scheduler?: string;
}

/** What an agent reports of one entry. */
export interface EntryReport {
  entryId: number;
  report: DeliveryReport;
  /** Backlog indexes of the entry's recipients that reached a final state. */
  finalIdx: number[];
}

/** The answer to a delivery report: whether it applied, and what the core decided. */
export interface ReportAnswer {
  applied: boolean;
  effects: Effect[];
  /**
   * The entry's destination queue and its deliveries in flight counting this one, for the
   * Destination DO; `window` is the queue's window after this report (the delivery agent skips
   * sending the Destination DO's verdict back when it says the same). `feed`: whether the
   * destination's own DO needs this report (durable-objects/transport/feedback-gate.ts; a site's
   * DO, DESTINATION_GROUPING "site", gets every report); absent means it does. `prior`: the
   * queue's window and failed cohorts before this report, which the destination's own DO takes
   * before applying it.
   */
  destination: {
    queue: string;
    busy: number;
    conc: number;
    window: number;
    prior?: { window: number; failCohorts: number };
    feed?: boolean;
  } | null;
}

/** The answer to reportAndTake: one answer per report, and the reporting agent's next jobs. */
export interface TakeAnswer {
  answers: ReportAnswer[];
  jobs: DeliverJob[];
}

/** FNV-1a (32 bits) of a nexthop, lower case. */
function nexthopHash(nexthop: string): number {
  let h = 0x811c9dc5;
  for (const c of nexthop.toLowerCase()) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0;
  return h;
}

/**
 * How many DeliveryAgents one Transport DO uses: a transport has at most process_limit entries in
 * flight, AGENT_SESSIONS to an agent, so the pool always has an agent with room.
 */
export function agentPool(processLimit: number): number {
  return Math.max(1, Math.ceil(processLimit / AGENT_SESSIONS));
}

/**
 * A DeliveryAgent's object name: agent `(hash(nexthop) + slot) mod pool` of the scheduler's pool
 * (see the header). A destination's slots are distinct agents (slot < pool), and a destination
 * with one session in flight always uses the same agent, whose cache holds its idle connection.
 */
export function agentName(scheduler: string, nexthop: string, slot: number, pool: number): string {
  // Hashed apart from schedulerName's, which a shard's destinations share modulo the shard count.
  return `${scheduler}@${(nexthopHash(`@${nexthop}`) + slot) % Math.max(1, pool)}`;
}

/** The Transport DO scheduling `nexthop` of `transport` on `shards` objects (see the header). */
export function schedulerName(transport: string, nexthop: string, shards: number): string {
  if (shards <= 1) return transport;
  // A destination stays on one shard.
  const k = nexthopHash(nexthop) % shards;
  return k === 0 ? transport : `${transport}~${k}`;
}

/** Every Transport DO of a transport run on `shards` objects. */
export function schedulerNames(transport: string, shards: number): string[] {
  return Array.from({ length: Math.max(1, shards) }, (_, k) => (k === 0 ? transport : `${transport}~${k}`));
}

/** The transport a Transport DO's name belongs to. */
export function transportOfScheduler(name: string): string {
  const i = name.lastIndexOf("~");
  return i > 0 && /^\d+$/.test(name.slice(i + 1)) ? name.slice(0, i) : name;
}

/** Where a job's report goes: the Transport DO that handed it over. */
export function schedulerOf(job: DeliverJob, shards: number): string {
  return job.scheduler ?? schedulerName(job.transport, job.nexthop, shards);
}

/** The Destination DO's name for one destination queue of a transport. */
export function destinationName(transport: string, queue: string): string {
  return `${transport}/${queue}`;
}

/** An attempt of a message, as the queue manager names it. */
export interface AttemptRef {
  messageId: string;
  attempt: number;
}

/** The queue manager's id of an attempt. */
export function coreIdOf(messageId: string, attempt: number): string {
  return attempt <= 1 ? messageId : `${messageId}#${attempt}`;
}

/** Splits the queue manager's id of an attempt into the Outbox id and the attempt. */
export function parseCoreId(coreId: string): AttemptRef {
  const hash = coreId.lastIndexOf("#");
  if (hash < 0) return { messageId: coreId, attempt: 1 };
  return { messageId: coreId.slice(0, hash), attempt: Number(coreId.slice(hash + 1)) || 1 };
}
