/**
 * API errors in Resend's wire shape: `{ statusCode, name, message }`.
 * This is the only place that builds an error response body, so every route answers alike
 * and nothing internal (stack traces, credentials) can leak into a response.
 */
export type ErrorName =
  | "validation_error"
  | "missing_required_field"
  | "invalid_parameter"
  | "invalid_from_address"
  | "invalid_attachment"
  | "invalid_idempotency_key"
  | "invalid_idempotent_request"
  | "concurrent_idempotent_requests"
  | "missing_api_key"
  | "invalid_api_key"
  | "restricted_api_key"
  | "not_found"
  | "method_not_allowed"
  | "rate_limit_exceeded"
  /** The relay's: the complaint-rate brake holds the tenant's bulk mail (api/complaint-brake.ts). */
  | "complaint_rate_exceeded"
  /** The relay's: the compliance check at send time refused the message (the tenant's compliance: "strict"; worker/compliance/). */
  | "compliance_error"
  | "security_error"
  | "application_error"
  | "internal_server_error";

/** A client-visible error with an HTTP status and a stable Resend error name. */
export class ApiError extends Error {
  readonly isApiError = true;
  constructor(
    readonly statusCode: number,
    readonly errorName: ErrorName,
    message: string,
  ) {
    super(message);
  }
}

/** Brand check that also works across module realms. */
export function isApiError(e: unknown): e is ApiError {
  return typeof e === "object" && e !== null && (e as { isApiError?: unknown }).isApiError === true;
}

/** The JSON body for an error response. */
export function toErrorBody(statusCode: number, name: ErrorName, message: string) {
  return { statusCode, name, message };
}
