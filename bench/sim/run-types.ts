/*
 * NAME
 *   run-types - the vocabulary of a simulation run: setup, attempts, traces, result
 * DESCRIPTION
 *   SimSetup is what runSimulation() (engine.ts) needs: scheduler configuration, message
 *   arrivals, a server model per nexthop, a seed. SimResult is what it returns: every
 *   delivery attempt (AttemptRecord), the mail store with each recipient's delivery time,
 *   per-destination traces (DestinationTrace), the servers and the audit.
 * INVARIANTS
 *   Times are simulated seconds (fractional); an attempt's endAt ≥ startAt.
 * ERRORS
 *   None (types only).
 */
import type { SchedulerConfigInput } from "../../durable-objects/core";
import type { Audit } from "./audit";
import type { AttemptOutcome, DestinationServer, DestinationSpec } from "./destination";
import type { MailStore } from "./mail-store";
import type { StepSeries } from "./stats";

/** A message to inject: recipients (address, nexthop) arriving at `arriveAt` seconds. */
export interface SimMessage {
  id: string;
  arriveAt: number;
  rcpts: readonly { address: string; nexthop: string }[];
}

/** Everything a run needs. */
export interface SimSetup {
  /** Scheduler configuration (Postfix parameter names). */
  config: SchedulerConfigInput;
  messages: readonly SimMessage[];
  /** The server model of a nexthop. */
  destinationFor: (nexthop: string) => DestinationSpec;
  /** Seed of the service-time / failure draws. */
  seed: number;
  /** Nexthops whose in-flight count and window are traced over time. */
  traceNexthops?: readonly string[];
  /** Give up (as a violation) past this simulated time; default 30 days. */
  maxSimTimeSec?: number;
}

/** One delivery attempt (one entry handed to a delivery agent). */
export interface AttemptRecord {
  nexthop: string;
  messageId: string;
  /** The message's pass through the active queue (1 = first). */
  pass: number;
  rcpts: number;
  startAt: number;
  endAt: number;
  outcome: AttemptOutcome;
}

/** Time series of one destination. */
export interface DestinationTrace {
  /** Entries in flight (client side: sessions plus attempts still being rejected). */
  inflight: StepSeries;
  /** The core's window for the destination. */
  window: StepSeries;
}

/** What a run produced. */
export interface SimResult {
  store: MailStore;
  attempts: AttemptRecord[];
  traces: Map<string, DestinationTrace>;
  servers: Map<string, DestinationServer>;
  audit: Audit;
  endAt: number;
  events: number;
}
