/**
 * API key authentication: `Authorization: Bearer <key>` → the key's tenant and what it may do.
 *
 * DESCRIPTION
 *   requireApiKey()  Hono middleware that looks the key's hash up in D1 on every request (one
 *                    row read, by its unique index), so a revoked key is refused on its very next
 *                    request in every isolate, and sets `tenant` and `key` (role, Resend
 *                    permission, domain restriction). A `sending_access` key may only send:
 *                    POST /emails, POST /emails/batch and POST /relay/messages/raw. On a send
 *                    request with a small body the look-up is one statement of a batch that also
 *                    reads what the request will ask next (send-reads.ts), set as `prefetch`.
 *
 * INVARIANTS
 *   Only key hashes are compared or stored; a key is never logged or returned.
 *
 * ERRORS
 *   401 missing_api_key (no or malformed header), 403 invalid_api_key (unknown or revoked key),
 *   401 restricted_api_key (a sending_access key anywhere but the send endpoints), as Resend.
 */
import type { MiddlewareHandler } from "hono";
import { hashApiKey } from "../../db/api-keys";
import { keyAccess, type KeyAccess } from "../../db/sending-domains";
import { ApiError } from "../../model/errors";
import type { AppEnv } from "./context";
import { sendReads } from "./send-reads";

/** The endpoints a sending_access key may call. */
const SEND_ONLY = new Set(["POST /emails", "POST /emails/batch", "POST /relay/messages/raw"]);

/** Authenticates the request and sets the `tenant` and `key` variables. */
export function requireApiKey(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header("authorization") ?? "");
    if (!m) {
      throw new ApiError(
        401,
        "missing_api_key",
        "Missing API key in the authorization header. Include the following header in the request: Authorization: Bearer YOUR_API_KEY",
      );
    }
    const route = `${c.req.method} ${new URL(c.req.url).pathname.replace(/\/+$/, "")}`;
    const sending = SEND_ONLY.has(route);
    // On the send endpoints the same query brings the tenant's verified domains (domains/sender.ts).
    const hash = await hashApiKey(m[1]!);
    const read = sending ? await sendReads(c, hash, route) : null;
    const access: KeyAccess | null = read ? read.access : await keyAccess(c.env.DB, hash, sending);
    if (read && read.access) c.set("prefetch", read.prefetch);
    if (access === null) throw new ApiError(403, "invalid_api_key", "API key is invalid.");
    if (access.permission === "sending_access" && !sending) {
      throw new ApiError(401, "restricted_api_key", "This API key is restricted to only send emails.");
    }
    c.set("tenant", access.tenant);
    c.set("key", access);
    await next();
  };
}
