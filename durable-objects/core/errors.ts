/*
 * NAME
 *   errors - the core's one exception type
 * DESCRIPTION
 *   The core never throws for expected outcomes; those come back as values. It throws
 *   InvariantError only when its own bookkeeping is broken (Postfix's msg_panic), which is
 *   always a bug in the core or in a shell that fed it impossible input.
 * INVARIANTS
 *   isInvariantError() works across module realms (brand property, not instanceof).
 */

/** A broken internal invariant: a bug, never an expected outcome. */
export class InvariantError extends Error {
  readonly isInvariantError = true;
  constructor(where: string, what: string) {
    super(`${where}: ${what}`);
    this.name = "InvariantError";
  }
}

/** Brand check for InvariantError. */
export function isInvariantError(e: unknown): e is InvariantError {
  return typeof e === "object" && e !== null && (e as { isInvariantError?: unknown }).isInvariantError === true;
}

/** Throws an InvariantError unless `cond` holds. */
export function invariant(cond: unknown, where: string, what: string): asserts cond {
  if (!cond) throw new InvariantError(where, what);
}
