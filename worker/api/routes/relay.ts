/**
 * Relay-specific endpoints (under /relay/, so Resend SDKs never trip on them).
 *
 * DESCRIPTION
 *   POST /relay/messages/raw  an already composed RFC 5322 message with its SMTP envelope:
 *                             { mail_from, rcpt_to: string | string[], message, encoding?:
 *                             "utf8" | "base64", tags?, scheduled_at? } → 200 { id }. The message
 *                             is parsed and validated (see ../raw.ts) and then takes the same
 *                             path as POST /emails, Idempotency-Key included.
 *
 *   GET /relay/dev/mailbox    development and test only (COHORT_ENV): what the local SMTP
 *                             catcher of `npm start` received, oldest first: { object: "list",
 *                             data: [{ mail_from, rcpt_to, received_at, message }] }, read from
 *                             the catcher's listing at DEV_MAILBOX_URL.
 *
 * ERRORS
 *   As POST /emails. GET /relay/dev/mailbox: 404 outside development/test or without a
 *   catcher configured, 403 restricted_api_key for a tenant key (the catcher holds every
 *   tenant's mail), 502 application_error when the catcher does not answer.
 */
import { Hono } from "hono";
import { affineShard, shardForKey } from "../../model/ids";
import { acceptGate } from "../http/accept-gate";
import { idempotencyOf, jsonResponse, storeAndQueue } from "../../accept/accept";
import { type AppEnv } from "../http/context";
import { parseInput, readJson, requestLimitBytes } from "../http/body";
import { ApiError } from "../../model/errors";
import { limitsOf } from "../../accept/limits";
import { prepareRaw } from "../../accept/raw";
import { publicOrigin, sendAnswer } from "../../accept/prepare";
import { RawMessageSchema } from "../../accept/schemas";
import { RoleCache, roleOf } from "../http/operator";
import { SenderPolicy } from "../../domains/sender";
import { settingsOf } from "../../settings/settings";

/** The /relay routes (mounted behind the API key middleware). */
export function relayRoutes() {
  const r = new Hono<AppEnv>();
  const roles = new RoleCache();

  r.post("/messages/raw", acceptGate(), async (c) => {
    const limits = limitsOf(c.env);
    const { raw, value } = await readJson(c, requestLimitBytes(limits));
    const idem = await idempotencyOf(c, raw);
    const input = parseInput(RawMessageSchema, value);
    const tenant = c.get("tenant");
    const shard = idem ? await shardForKey(tenant, idem.claim.key, limits.shards) : affineShard(limits.shards);
    const sender = new SenderPolicy(c.env, tenant, c.get("key"));
    const prepared = await prepareRaw(c.env, input, {
      shard,
      nowMs: Date.now(),
      limits,
      sender,
      origin: publicOrigin(c.env, c.req.url),
    });
    const res = await storeAndQueue(c.env, {
      tenant,
      leaveGate: c.get("leaveGate"),
      shard,
      idempotency: idem,
      prepared: [prepared],
      response: { status: 200, body: JSON.stringify(sendAnswer(prepared)) },
    });
    return sender.withNotice(jsonResponse(res));
  });

  r.get("/dev/mailbox", async (c) => {
    const url = settingsOf(c.env).devMailboxUrl;
    if (!settingsOf(c.env).local || !url) throw new ApiError(404, "not_found", "The requested endpoint was not found.");
    // The catcher holds every tenant's mail: only an operator may read it.
    if ((await roleOf(c, roles)) !== "operator")
      throw new ApiError(403, "restricted_api_key", "This endpoint needs an operator key.");
    const res = await fetch(url).catch(() => null);
    if (!res || !res.ok) throw new ApiError(502, "application_error", "The local SMTP catcher did not answer.");
    const caught = await res.json<{ mailFrom: string; rcptTo: string[]; body: string; receivedAt: number }[]>();
    const data = caught.map((m) => ({
      mail_from: m.mailFrom,
      rcpt_to: m.rcptTo,
      received_at: new Date(m.receivedAt).toISOString(),
      message: new TextDecoder().decode(Uint8Array.from(atob(m.body), (ch) => ch.charCodeAt(0))),
    }));
    return c.json({ object: "list", data });
  });

  r.all("/messages/raw", () => {
    throw new ApiError(405, "method_not_allowed", "Method not allowed.");
  });
  return r;
}
