/*
 * NAME
 *   index - the pure core of delivery-status callbacks
 *
 * DESCRIPTION
 *   Re-exports envelope (event envelopes), events (transitions), event-id, classify (bounce
 *   categories), retry (webhook retry decisions), endpoint-health (per-endpoint
 *   window and dead periods), publication (internal rows to pushed envelopes), suppression-policy
 *   (bounce to suppression) and webhook-config (the vars).
 *
 * INVARIANTS
 *   Nothing here reads the clock, draws randomness or does I/O.
 *
 * ERRORS
 *   See each module.
 */

export * from "./classify";
export * from "./endpoint-health";
export * from "./envelope";
export * from "./event-id";
export * from "./events";
export * from "./retry";
export * from "./publication";
export * from "./suppression-policy";
export * from "./webhook-config";
