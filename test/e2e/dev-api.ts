/**
 * Calling a wrangler dev relay over its API in the e2e tests: an operator's JSON calls that must
 * succeed, and polling with a deadline.
 */
import { expect } from "vitest";
import { devFetch, type DevServer } from "../../scripts/lib/dev-server";

/** A JSON call with the server's key; fails the test on a status of 300 or more. */
export function apiOf(server: () => DevServer) {
  return async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
    const s = server();
    const res = await devFetch(`${s.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${s.key}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    expect(res.status, `${method} ${path}`).toBeLessThan(300);
    return (await res.json()) as T;
  };
}

/** Polls `probe` every 250 ms until it gives a value; throws naming `what` after `timeoutMs`. */
export async function until<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
