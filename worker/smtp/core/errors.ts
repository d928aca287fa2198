/*
 * NAME
 *   errors - failure values the SMTP adapter hands to the core, and bugs
 *
 * SUMMARY
 *   A socket, TLS or parser failure reaches the core only as an SmtpFailure
 *   value, shaped like a Postfix DSN: {class, code, enhanced, text}.
 *
 * DESCRIPTION
 *   createNetworkFailure(text, enhanced?) describes a refused, reset or lost
 *   connection, or a failed TLS handshake (default status 4.4.2).
 *
 *   createProtocolFailure(text) describes a reply stream that cannot be parsed or
 *   a server that broke the protocol (status 4.5.0).
 *
 *   createLocalFailure(text, permanent?) describes a fault on our side that is
 *   not the remote site's, such as an unreadable message body (4.3.0, or
 *   5.3.0 when permanent).
 *
 *   InvariantError is thrown only for bugs (Postfix's msg_panic); it carries
 *   a brand so it can be recognised across realms with isInvariantError().
 *
 * INVARIANTS
 *   code and enhanced agree in class: 4xx with 4.x.x, 5xx with 5.x.x.
 *
 * ERRORS
 *   None.
 */

/**
 * transient/permanent: a local fault, not the site's; network: connect, lost
 * connection, TLS; protocol: the server's byte stream broke the protocol.
 */
export type FailureClass = "transient" | "permanent" | "network" | "protocol";

/** A failure as the core sees it. */
export interface SmtpFailure {
  class: FailureClass;
  /** SMTP-style code used in recipient results (synthesised: no server sent it). */
  code: number;
  /** RFC 3463 status. */
  enhanced: string;
  /** Diagnostic text, without credentials. */
  text: string;
}

/** Builds a failure for a refused, reset or lost connection or a TLS failure. */
export function createNetworkFailure(text: string, enhanced = "4.4.2"): SmtpFailure {
  return { class: "network", code: 421, enhanced, text };
}

/** Builds a failure for an unparseable or out-of-protocol server stream. */
export function createProtocolFailure(text: string): SmtpFailure {
  return { class: "protocol", code: 421, enhanced: "4.5.0", text };
}

/** Builds a failure on our side of the connection (not a site failure). */
export function createLocalFailure(text: string, permanent = false): SmtpFailure {
  return permanent
    ? { class: "permanent", code: 554, enhanced: "5.3.0", text }
    : { class: "transient", code: 451, enhanced: "4.3.0", text };
}

const INVARIANT_BRAND = "cohort.smtp.InvariantError";

/** Thrown only when the core detects a bug (a broken invariant). */
export class InvariantError extends Error {
  readonly brand = INVARIANT_BRAND;
  constructor(message: string) {
    super(message);
    this.name = "InvariantError";
  }
}

/** Brand check for InvariantError that works across realms. */
export function isInvariantError(e: unknown): e is InvariantError {
  return typeof e === "object" && e !== null && (e as { brand?: unknown }).brand === INVARIANT_BRAND;
}
