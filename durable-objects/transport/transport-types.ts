/**
 * What the Transport DO exchanges with the rest of the relay: admission requests, dispatched
 * entries and the `deliver` queue's job body, report answers, the operator's view, and the
 * Destination DO naming. Re-exported by transport-queue.ts.
 */
import type { BlockedBy, DestinationView, Effect, Entry, MessageFields, PolicyRule, ResolvedRecipient, ShapeRow } from "../core";

/** Why a recipient waits: the core's reason, or the incoming queue (the active queue is full). */
export type WaitReason = BlockedBy | { kind: "active_queue_full" };
import { parseCoreId } from "./delivery-state";
import type { StoredRecipient } from "./sqlite-source";
import type { InFlightTimes } from "./leases";

/** A message handed to the transport: its id, arrival time and resolved recipients. */
export interface AdmitRequest {
  id: string;
  createTime: number;
  tenant?: string | null;
  /** More pickup-policy fields: campaign (jobid) and bulk mail (core/policy.ts). */
  fields?: MessageFields;
  priority?: number;
  rcpts: ResolvedRecipient[];
}

/**
 * What admit answers: the message is durably taken; `active`: it went into the active queue of a
 * transport that dispatches by itself, so the delivery stage will report on it soon.
 */
export interface AdmitAnswer {
  admitted: boolean;
  effects: Effect[];
  active: boolean;
}

/** A selected delivery request, as handed to the delivery stage. */
export interface DispatchedEntry {
  entryId: number;
  messageId: string;
  transport: string;
  nexthop: string;
  rcpts: StoredRecipient[];
}

/** The body of a `deliver` queue message: one dispatched entry with its lease. */
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
}

/** The answer to a delivery report: whether it applied, and what the core decided. */
export interface ReportAnswer {
  applied: boolean;
  effects: Effect[];
  /**
   * The entry's destination queue and its deliveries in flight counting this one, for the
   * Destination DO; `window` is the queue's window after this report (the delivery agent skips
   * sending the Destination DO's verdict back when it says the same).
   */
  destination: { queue: string; busy: number; conc: number; window: number } | null;
}

/** What an operator sees of a transport (GET /relay/queue, /relay/destinations). */
export interface TransportInspect {
  transport: string;
  /** Unix seconds. */
  now: number;
  inflight: number;
  /** Messages admitted and waiting for room in the active queue (qmgr_message_active_limit). */
  incoming: number;
  /** In-core recipients by destination and age (first row TOTAL); deferred ones wait outside the core, see `deferred`. */
  qshape: ShapeRow[];
  /** Recipients waiting for their next attempt, by destination and age, in the same shape. */
  deferred: ShapeRow[];
  destinations: DestinationView[];
  policies: { key: string; rule: PolicyRule }[];
  /** Dispatch-to-report times of the last reports (storage/leases.ts); null before the first, or absent. */
  inFlightTimes?: InFlightTimes | null;
}

/** The Destination DO's name for one destination queue of a transport. */
export function destinationName(transport: string, queue: string): string {
  return `${transport}/${queue}`;
}

/** A core entry as handed to the delivery stage. */
export function toDispatched(e: Entry<StoredRecipient>): DispatchedEntry {
  return { entryId: e.id, messageId: e.peer.job.message.id, transport: e.peer.queue.transport.name, nexthop: e.peer.queue.nexthop, rcpts: e.rcpts };
}

/** The `deliver` queue body of a dispatched entry. */
export function toJob(e: DispatchedEntry, leaseUntil: number): DeliverJob {
  const { messageId, attempt } = parseCoreId(e.messageId);
  return { entryId: e.entryId, messageId, attempt, transport: e.transport, nexthop: e.nexthop, rcpts: e.rcpts.map((r) => ({ idx: r.idx, address: r.address })), leaseUntil };
}

