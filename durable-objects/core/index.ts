/*
 * NAME
 *   core - the relay's pure scheduling core (Postfix nqmgr + Postfix 2.5 feedback + pickup
 *   policies)
 * DESCRIPTION
 *   The single import point for shells. Nothing under this directory uses a Workers API,
 *   reads a clock, does I/O or uses randomness: time is always an argument, whole seconds.
 */
export * from "./config";
export { parseDurationSec, type SchedulerConfigInput } from "./config-schema";
export * from "./feedback";
export * from "./window-state";
export * from "./destination-window";
export {
  PROBE_GAP_MIN,
  PROBE_GAP_MAX,
  PROBE_SETTLE_SEC,
  COHORT_MEMORY,
  isConcurrencyRefusal,
  refusalOnly,
  learnCeiling,
} from "./ceiling";
export * from "./destination";
export * from "./retry-policy";
export * from "./policy";
export * from "./site-shape";
export * from "./warmup";
export * from "./flow";
export * from "./errors";
export type * from "./model";
export type * from "./ports";
export { obtainTransport, readBatchLimit, hasActiveRoom, READ_CAP, type MessageIntake } from "./assign";
export { selectEntry, selectTransport, dispatch, transportReady } from "./select";
export { reportDelivery, type DeliveryReport, type SiteFailure, type ReportResult } from "./complete";
export { failTransport, flush } from "./timers";
export { findCandidate, tryPreempt, maxCandidateSlots, preemptAffordable, extraGrant } from "./preempt";
export { hasEntries, maxEntries, isBlocker, obtainJob, popJob } from "./job-list";
export { enqueueMessage, refillMessage } from "./assign";
export { snapshotQmgr, type QmgrSnapshot } from "./snapshot";
export { restoreQmgr } from "./restore";
export * from "./scheduler";
export { runCommand, runJournaled, type Command, type CommandResult } from "./commands";
export * from "./inspect";
export { applyDestinationState, removeMessage, type DestinationVerdict } from "./control";
