/**
 * Typed errors of the mail composer and the DKIM signer.
 *
 * DESCRIPTION
 *   MailInputError   a client-input problem found while composing a message (header injection,
 *                    malformed address, bad base64, refused custom header…). Carries HTTP status
 *                    422, the offending `field` as a JSON path (`to[1]`, `headers.X-Foo`,
 *                    `attachments[0].filename`) and a Resend error name the API can pass through.
 *   isMailInputError brand check that works across module realms and RPC (no `instanceof`).
 *   DkimError        a signing-configuration problem (bad PEM, unsupported algorithm, bad
 *                    domain/selector). It is an operator error, not a client one, so it has no status.
 *   isDkimError      brand check for DkimError.
 *
 * INVARIANTS
 *   MailInputError.status is always 422; its message always names the field.
 *
 * ERRORS
 *   None: this module only defines error values.
 */

/** Resend error names a mail input problem maps to (a subset of the API's ErrorName). */
export type MailErrorName = "validation_error" | "invalid_from_address" | "invalid_attachment" | "invalid_parameter";

/** A 422 validation error naming the request field that caused it. */
export class MailInputError extends Error {
  readonly isMailInputError = true;
  readonly status = 422 as const;
  override readonly name = "MailInputError";

  constructor(
    readonly field: string,
    readonly issue: string,
    readonly errorName: MailErrorName = "validation_error",
  ) {
    super(`\`${field}\` ${issue}`);
  }
}

/** True when `e` is a MailInputError, even one from another realm. */
export function isMailInputError(e: unknown): e is MailInputError {
  return typeof e === "object" && e !== null && (e as { isMailInputError?: unknown }).isMailInputError === true;
}

/** A DKIM signing configuration error (key, algorithm, domain or selector). */
export class DkimError extends Error {
  readonly isDkimError = true;
  override readonly name = "DkimError";
}

/** True when `e` is a DkimError, even one from another realm. */
export function isDkimError(e: unknown): e is DkimError {
  return typeof e === "object" && e !== null && (e as { isDkimError?: unknown }).isDkimError === true;
}
