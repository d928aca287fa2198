// @ts-check
/**
 * cohort's client for the relay's API and the errors that set its exit status: every command
 * calls the relay through client(url, key), which turns an HTTP error answer (the API's
 * {name, message}) or an unreachable relay into ApiError; bad usage is UsageError.
 *
 * EXIT STATUS
 *   cohort.mjs maps UsageError to 2 and ApiError to 1.
 */

/** Bad usage: exit status 2. */
export class UsageError extends Error {}

/** The relay answered an error or could not be reached: exit status 1. */
export class ApiError extends Error {
  /** @param {number} status @param {string} name @param {string} message */
  constructor(status, name, message) {
    super(message);
    this.status = status;
    this.code = name;
  }
}

/** A client for one relay and key. */
export function client(url, key) {
  return async function call(method, path, body) {
    let res;
    try {
      res = await fetch(new URL(path, url), {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      throw new ApiError(
        0,
        "unreachable",
        `cannot reach ${url}: ${e instanceof Error ? (e.cause instanceof Error ? e.cause.message : e.message) : String(e)}`,
      );
    }
    const text = await res.text();
    let json;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    if (!res.ok) throw new ApiError(res.status, json?.name ?? "http_error", json?.message ?? `HTTP ${res.status}`);
    return json;
  };
}
