/**
 * The operator role: which keys may use the admin routes.
 *
 * DESCRIPTION
 *   RoleCache        key hash → role for `ttlMs` (30 s) in this isolate, like auth.ts's KeyCache.
 *   roleOf(c, cache) the role of the request's key ('tenant' | 'operator').
 *   scopeOf(c, cache) the tenant the key acts on, null for an operator key (every tenant).
 *   requireOperator(cache)  Hono middleware: runs after requireApiKey (the key is known to be live)
 *                    and answers 403 restricted_api_key for a tenant key.
 *
 * INVARIANTS
 *   Only the key's hash is kept or compared; the key is never logged.
 */
import type { Context, MiddlewareHandler } from "hono";
import { hashApiKey } from "../../db/api-keys";
import { roleForKey, type KeyRole } from "../../db/admin";
import { type AppEnv } from "./context";
import { ApiError } from "../../model/errors";
import { TtlCache } from "../../lib/ttl-cache";

/** Key hash → role (see TtlCache). */
export class RoleCache extends TtlCache<KeyRole> {}

/** The role of the request's (already authenticated) key. */
export async function roleOf(c: Context<AppEnv>, cache: RoleCache): Promise<KeyRole> {
  const key = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header("authorization") ?? "")?.[1];
  if (!key) return "tenant";
  const hash = await hashApiKey(key);
  const now = Date.now();
  let role = cache.get(hash, now);
  if (role === undefined) {
    role = (await roleForKey(c.env.DB, hash)) ?? "tenant";
    cache.set(hash, role, now);
  }
  return role;
}

/** The tenant whose mail the request's key acts on: null (every tenant) for an operator key. */
export async function scopeOf(c: Context<AppEnv>, cache: RoleCache): Promise<string | null> {
  return (await roleOf(c, cache)) === "operator" ? null : c.get("tenant");
}

/** 403 unless the key is an operator key. */
export function requireOperator(cache: RoleCache): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if ((await roleOf(c, cache)) !== "operator") {
      throw new ApiError(
        403,
        "restricted_api_key",
        "This API key is restricted to its tenant's mail; the admin API needs an operator key (npm run key:create -- --operator).",
      );
    }
    await next();
  };
}
