/**
 * What the rest of the relay exchanges with a Transport DO, besides the delivery contract
 * (delivery.ts): admission requests and answers, why a recipient waits, and the operator's view.
 *
 * DESCRIPTION
 *   AdmitRequest / AdmitAnswer  a classified message handed to its transport, and the answer.
 *   WaitReason                  why a waiting recipient waits (blocked_by).
 *   TransportInspect            what GET /relay/queue and /relay/destinations show of a transport.
 *   InFlightTimes               dispatch-to-report times of the recent reports.
 */
import type {
  BlockedBy,
  DestinationView,
  Effect,
  MessageFields,
  PolicyRule,
  ResolvedRecipient,
  ShapeRow,
} from "../../durable-objects/core";

/** Why a recipient waits: the core's reason, or the incoming queue (the active queue is full). */
export type WaitReason = BlockedBy | { kind: "active_queue_full" };

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

/** Dispatch-to-report times of the recent reports (GET /relay/queue, bench:backlog). */
export interface InFlightTimes {
  reports: number;
  mean_ms: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
  /** The most entries leased at once when one of these reports came. */
  peak_in_flight: number;
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
  /** Dispatch-to-report times of the last reports (transport/leases.ts); null before the first, or absent. */
  inFlightTimes?: InFlightTimes | null;
}

/** What a Transport DO tells GET /metrics: its queues by state, and its busiest destinations (the rest summed). */
export interface TransportMetrics {
  transport: string;
  /** Recipients in core waiting to be selected, and entries in flight. */
  todo: number;
  inflight: number;
  /** Messages waiting for room in the active queue, and waiting for a retry (counted up to METRIC_COUNT_CAP). */
  incoming: number;
  deferred: number;
  destinations: { queue: string; state: string; window: number; busy: number; todo: number }[];
  other: { queues: number; busy: number; todo: number };
}

/** Where a Transport DO stops counting its incoming and deferred messages for GET /metrics (no full scan of a large backlog). */
export const METRIC_COUNT_CAP = 100_000;
