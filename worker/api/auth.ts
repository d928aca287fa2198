/**
 * API key authentication: `Authorization: Bearer <key>` → the key's tenant.
 *
 * DESCRIPTION
 *   KeyCache        remembers key hash → tenant for `ttlMs` (default 30 s) in this isolate, so the
 *                   accept path does not read D1 for every request. A revoked key stops working
 *                   within that time.
 *   requireApiKey   Hono middleware that sets `tenant` or answers Resend's 401/403.
 *
 * INVARIANTS
 *   Only key hashes are kept in memory or compared; a key is never logged or returned.
 *
 * ERRORS
 *   401 missing_api_key (no or malformed header), 403 invalid_api_key (unknown or revoked key).
 */
import type { MiddlewareHandler } from "hono";
import { hashApiKey, tenantForKey } from "../db/api-keys";
import { ApiError } from "./errors";
import { TtlCache } from "../lib/ttl-cache";

/** Key hash → tenant (see TtlCache). */
export class KeyCache extends TtlCache<string> {}

/** Authenticates the request and sets the `tenant` variable. */
export function requireApiKey(cache: KeyCache): MiddlewareHandler<{ Bindings: Env; Variables: { tenant: string } }> {
  return async (c, next) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header("authorization") ?? "");
    if (!m) {
      throw new ApiError(401, "missing_api_key", "Missing API key in the authorization header. Include the following header in the request: Authorization: Bearer YOUR_API_KEY");
    }
    const hash = await hashApiKey(m[1]!);
    const now = Date.now();
    let tenant = cache.get(hash, now);
    if (tenant === undefined) {
      tenant = (await tenantForKey(c.env.DB, hash)) ?? undefined;
      if (tenant === undefined) throw new ApiError(403, "invalid_api_key", "API key is invalid.");
      cache.set(hash, tenant, now);
    }
    c.set("tenant", tenant);
    await next();
  };
}
