/*
 * NAME
 *   index - public surface of the pure SMTP client core
 *
 * SUMMARY
 *   Re-exports what shells (socket.ts, the delivery consumer, tests) need.
 *
 * DESCRIPTION
 *   Session: startSession, advanceSession, isSessionDone (session.ts).
 *   Settings: createSessionConfig, DEFAULT_TIMEOUTS, selectTimeout (config.ts).
 *   Replies: createReplyParser, feedReplyParser, parseEnhancedCode,
 *   classifyReply (reply.ts). Body: createDotStuffer, stuffChunk,
 *   finishDotStuffing (dot-stuff.ts). Failures: createNetworkFailure,
 *   createProtocolFailure, createLocalFailure, InvariantError (errors.ts).
 *
 * INVARIANTS
 *   Nothing here does I/O or reads a clock.
 *
 * ERRORS
 *   See the modules.
 */

export * from "./config";
export * from "./dot-stuff";
export * from "./ehlo";
export * from "./errors";
export * from "./reply";
export * from "./session";
export * from "./types";
export type { SessionState, SessionStep } from "./state";
