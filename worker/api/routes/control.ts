/**
 * Operator control of messages (Postfix's postsuper, over HTTP):
 *
 * DESCRIPTION
 *   POST /relay/messages/:id/hold      takes the message out of delivery until released; its
 *                                      waiting recipients show blocked_by "held".
 *   POST /relay/messages/:id/release   admits its open recipients again (a new attempt).
 *   POST /relay/messages/:id/requeue   routes its open recipients again and admits them.
 *   POST /relay/messages/:id/cancel    cancels its open recipients, scheduled or not (Resend's
 *                                      POST /emails/:id/cancel only cancels scheduled mail).
 *   POST /relay/messages/cancel        cancels by filter: recipients at `domain`, messages with
 *                                      tag `tag`, of `tenant` (operator keys) — at least one.
 *                                      Found through the D1 index, so mail accepted in the
 *                                      last moments may not be indexed yet; repeat to catch it.
 *   POST /relay/messages/:id/complaint a feedback-loop complaint (ARF) about a delivered
 *                                      recipient: one email.complained event, and the address
 *                                      is suppressed for the tenant until removed; once per
 *                                      recipient (a repeat answers duplicate: true).
 *   Every cancelled recipient gets an email.canceled event. A tenant key acts on its own
 *   tenant's mail; an operator key on every tenant's.
 *
 * ERRORS
 *   404 not_found (unknown, or another tenant's), 422 validation_error for bad input and for a
 *   state that does not allow it (done, not held, already held, nothing to cancel, a complaint
 *   about someone who is not a recipient or was not delivered to), as Resend
 *   answers a cancel of mail that is not scheduled; 403 restricted_api_key for a tenant key
 *   naming another tenant.
 */
import { Hono, type Context } from "hono";
import type { z } from "zod";
import { CancelFilterSchema, CancelOneSchema, ComplaintSchema } from "../http/control-schemas";
import { isMessageId, outboxOf } from "../../model/ids";
import type { ControlResult } from "../../model/message";
import { OPEN_SQL } from "../../db/admin";
import { parseInput, readJson, readOptionalJson } from "../http/body";
import { recordComplaint } from "../../policy/complaint-brake";
import { ApiError } from "../../model/errors";
import { type AppEnv } from "../http/context";
import { RoleCache, scopeOf } from "../http/operator";

/** Largest request body these routes read. */
const BODY_LIMIT = 16 * 1024;

const MESSAGES = {
  not_open: "The email is already done.",
  not_held: "The email is not held.",
  already_held: "The email is already held.",
  no_match: "The email has no recipient left to cancel.",
} as const;

function answer(c: Context<AppEnv>, id: string, action: string, r: ControlResult) {
  if (r.result === "not_found") throw new ApiError(404, "not_found", "Email not found.");
  if (r.result !== "ok") throw new ApiError(422, "validation_error", MESSAGES[r.result]);
  return c.json({ object: "email", id, action, recipients: r.recipients });
}

/** Finds open messages matching a filter in the D1 index. */
async function matching(
  db: D1Database,
  f: z.infer<typeof CancelFilterSchema>,
  tenant: string | null,
): Promise<{ id: string; tenant: string }[]> {
  // Open recipients, through their partial indexes (recipients_open_all, migration 0039).
  const where = [`r.status IN (${OPEN_SQL})`];
  const args: unknown[] = [];
  let join = "";
  if (f.tag) {
    join = "JOIN message_tags t ON t.message_id = r.message_id AND t.name = ? AND t.value = ?";
    args.push(f.tag.name, f.tag.value);
  }
  const t = tenant ?? f.tenant ?? null;
  if (t !== null) {
    where.push("r.tenant_id = ?");
    args.push(t);
  }
  // An exact suffix compare, not LIKE: D1 refuses LIKE patterns over 50 bytes, and `_` or `%` in
  // a name must not match other characters.
  if (f.domain) {
    where.push("substr(lower(r.address), -length(?)) = ?");
    args.push(`@${f.domain}`, `@${f.domain}`);
  }
  args.push(f.limit + 1);
  const rows = await db
    .prepare(
      `SELECT DISTINCT r.message_id AS id, r.tenant_id AS tenant FROM recipients_open_all r ${join} WHERE ${where.join(" AND ")} LIMIT ?`,
    )
    .bind(...args)
    .all<{ id: string; tenant: string }>();
  return rows.results;
}

/** The message control routes, mounted at /relay/messages. */
export function controlRoutes() {
  const r = new Hono<AppEnv>();
  const roles = new RoleCache();
  const idOf = (c: Context<AppEnv>) => {
    const id = c.req.param("id") ?? "";
    if (!isMessageId(id)) throw new ApiError(404, "not_found", "Email not found.");
    return id;
  };
  r.post("/cancel", async (c) => {
    const f = parseInput(CancelFilterSchema, (await readJson(c, BODY_LIMIT)).value);
    const tenant = await scopeOf(c, roles);
    if (tenant !== null && f.tenant !== undefined && f.tenant !== tenant)
      throw new ApiError(403, "restricted_api_key", "A tenant key can only cancel its own tenant's mail.");
    const found = await matching(c.env.DB, f, tenant);
    const page = found.slice(0, f.limit);
    let recipients = 0;
    let messages = 0;
    for (const m of page) {
      const res = await outboxOf(c.env, m.id).cancelRecipients(m.id, m.tenant, f.domain ?? null);
      if (res.result === "ok") {
        messages++;
        recipients += res.recipients;
      }
    }
    return c.json({ object: "cancellation", messages, recipients, has_more: found.length > f.limit });
  });
  r.post("/:id/hold", async (c) => {
    const id = idOf(c);
    return answer(c, id, "hold", await outboxOf(c.env, id).holdMessage(id, await scopeOf(c, roles)));
  });
  r.post("/:id/release", async (c) => {
    const id = idOf(c);
    return answer(c, id, "release", await outboxOf(c.env, id).releaseMessage(id, await scopeOf(c, roles)));
  });
  r.post("/:id/requeue", async (c) => {
    const id = idOf(c);
    return answer(c, id, "requeue", await outboxOf(c.env, id).requeueMessage(id, await scopeOf(c, roles)));
  });
  r.post("/:id/cancel", async (c) => {
    const id = idOf(c);
    // The body decides what is cancelled, so it is read whatever its framing (chunked included);
    // only a body that is truly empty means "every recipient".
    const sent = await readOptionalJson(c, BODY_LIMIT);
    const body = sent === undefined ? {} : parseInput(CancelOneSchema, sent);
    return answer(
      c,
      id,
      "cancel",
      await outboxOf(c.env, id).cancelRecipients(id, await scopeOf(c, roles), body.domain ?? null),
    );
  });
  r.post("/:id/complaint", async (c) => {
    const id = idOf(c);
    const body = parseInput(ComplaintSchema, (await readJson(c, BODY_LIMIT)).value);
    const res = await recordComplaint(c.env, id, await scopeOf(c, roles), body.recipient, body.feedback_type);
    if (res.result === "not_found") throw new ApiError(404, "not_found", "Email not found.");
    if (res.result === "no_recipient")
      throw new ApiError(422, "validation_error", "The address is not a recipient of this email.");
    if (res.result === "not_delivered")
      throw new ApiError(422, "validation_error", "The email was not delivered to this recipient.");
    return c.json({
      object: "complaint",
      email_id: id,
      recipient: body.recipient,
      feedback_type: body.feedback_type,
      duplicate: res.result === "duplicate",
    });
  });
  return r;
}
