/**
 * Resend's email endpoints: send, batch, retrieve, list, reschedule, cancel.
 *
 * DESCRIPTION
 *   POST /emails              one message → 200 { id }; `template: {id, variables}` sends a stored
 *                             template's published version, rendered here (worker/templates);
 *                             `topic_id` makes it bulk mail of that topic (worker/topics).
 *   POST /emails/batch        1–100 messages (attachments allowed) → 200 { data: [{ id }] };
 *                             `x-batch-validation: permissive` stores the valid ones and adds
 *                             `errors: [{ index, message }]`; strict (default) stores none if any
 *                             is invalid. An Idempotency-Key covers the whole batch.
 *   GET /emails/:id           Resend's email object plus `recipients[]` (from the Outbox).
 *   GET /emails               { object: "list", has_more, data } from the D1 index (eventually
 *                             consistent: a message appears once the classify consumer indexed it).
 *   PATCH /emails/:id         { scheduled_at } for a scheduled message not yet due.
 *   POST /emails/:id/cancel   cancels a scheduled message not yet due.
 *
 * ERRORS
 *   Resend's error bodies: 400/422 for bad input, 404 not_found (also for another tenant's
 *   message), 405 method_not_allowed, 409 idempotency conflicts, 413 too large.
 */
import { Hono, type Context } from "hono";
import { affineShard, isMessageId, shardForKey, outboxOf } from "../../model/ids";
import { acceptGate } from "../http/accept-gate";
import { idempotencyOf, jsonResponse, storeAndQueue, type Idempotency } from "../../accept/accept";
import { parseInput, readJson, requestLimitBytes } from "../http/body";
import { explainWaiting } from "../http/blocked";
import { emailObject } from "../http/email-view";
import { iso } from "../../model/status";
import { ApiError, isApiError } from "../../model/errors";
import { limitsOf, parseScheduledAt } from "../../accept/limits";
import { prepareEmail, publicOrigin, sendAnswer, type PreparedMessage } from "../../accept/prepare";
import { ListQuerySchema, UpdateEmailSchema } from "../http/schemas";
import { BatchSchema, BatchValidationSchema, sendSchemaOf } from "../../accept/schemas";
import { TemplateSource } from "../../templates/templates";
import { TopicSource } from "../../topics/topics";
import { listMessages, type IndexedMessage } from "../../db/message-reads";
import { type AppEnv } from "../http/context";
import { SenderPolicy } from "../../domains/sender";
import { settingsOf } from "../../settings/settings";

const notFound = () => new ApiError(404, "not_found", "Email not found.");
const methodNotAllowed = () => {
  throw new ApiError(405, "method_not_allowed", "Method not allowed.");
};

/**
 * The shard for a request: the key's shard when idempotent (retries meet their record), else this
 * isolate's current shard (affineShard); locally, X-Relay-Dev-Isolate names an isolate to play.
 */
async function shardFor(
  c: Context<AppEnv>,
  idem: Idempotency | null,
  shards: number,
  messages: number,
): Promise<number> {
  if (idem) return shardForKey(c.get("tenant"), idem.claim.key, shards);
  return affineShard(
    shards,
    messages,
    Date.now(),
    settingsOf(c.env).local ? c.req.header("x-relay-dev-isolate") : undefined,
  );
}

/** The Outbox view of an email of this tenant, or 404. */
async function viewOr404(c: Context<AppEnv>, id: string) {
  if (!isMessageId(id)) throw notFound();
  const view = await outboxOf(c.env, id).view(id, c.get("tenant"));
  if (!view) throw notFound();
  return view;
}

function listItem(m: IndexedMessage) {
  const parse = (s: string | null) => (s === null ? null : (JSON.parse(s) as string[]));
  return {
    id: m.id,
    to: parse(m.to_json),
    from: m.from_addr,
    created_at: iso(m.created_at),
    subject: m.subject,
    bcc: parse(m.bcc_json),
    cc: parse(m.cc_json),
    reply_to: parse(m.reply_to_json),
    last_event: m.last_event,
    scheduled_at: iso(m.scheduled_at),
  };
}

/** Prepares every batch item; collects per-index errors instead of throwing. */
async function prepareBatch(c: Context<AppEnv>, items: unknown[], shard: number, sender: SenderPolicy) {
  const limits = limitsOf(c.env);
  const ok: PreparedMessage[] = [];
  const errors: { index: number; message: string; error: ApiError }[] = [];
  // A template or topic named by several items is read once for the batch.
  const templates = new TemplateSource(c.env.DB, sender.tenant);
  const topics = new TopicSource(c.env.DB, sender.tenant);
  for (const [index, item] of items.entries()) {
    try {
      const input = parseInput(sendSchemaOf(item), item);
      ok.push(
        await prepareEmail(c.env, input, {
          shard,
          nowMs: Date.now(),
          limits,
          sender,
          origin: publicOrigin(c.env, c.req.url),
          templates,
          topics,
        }),
      );
    } catch (e) {
      if (!isApiError(e)) throw e;
      errors.push({ index, message: e.message, error: e });
    }
  }
  return { ok, errors };
}

/** POST /emails and POST /emails/batch. */
function addSendRoutes(r: Hono<AppEnv>): void {
  r.post("/", acceptGate(), async (c) => {
    const limits = limitsOf(c.env);
    const { raw, value } = await readJson(c, requestLimitBytes(limits));
    const idem = await idempotencyOf(c, raw);
    const input = parseInput(sendSchemaOf(value), value);
    const tenant = c.get("tenant");
    const shard = await shardFor(c, idem, limits.shards, 1);
    const sender = new SenderPolicy(c.env, tenant, c.get("key"), c.get("prefetch"));
    const prepared = await prepareEmail(c.env, input, {
      shard,
      nowMs: Date.now(),
      limits,
      sender,
      origin: publicOrigin(c.env, c.req.url),
    });
    const res = await storeAndQueue(c.env, {
      tenant,
      leaveGate: c.get("leaveGate"),
      prefetch: c.get("prefetch"),
      shard,
      idempotency: idem,
      prepared: [prepared],
      response: { status: 200, body: JSON.stringify(sendAnswer(prepared)) },
    });
    return sender.withNotice(jsonResponse(res));
  });

  r.post("/batch", acceptGate(), async (c) => {
    const limits = limitsOf(c.env);
    const mode = parseInput(
      BatchValidationSchema,
      c.req.header("x-batch-validation") || undefined,
      "Header `x-batch-validation`:",
    );
    const { raw, value } = await readJson(c, requestLimitBytes(limits));
    const idem = await idempotencyOf(c, raw);
    const items = parseInput(BatchSchema, value, "Batch:");
    const tenant = c.get("tenant");
    const shard = await shardFor(c, idem, limits.shards, items.length);
    const sender = new SenderPolicy(c.env, tenant, c.get("key"), c.get("prefetch"));
    const { ok, errors } = await prepareBatch(c, items, shard, sender);
    const first = errors[0];
    if (first && mode === "strict")
      throw new ApiError(first.error.statusCode, first.error.errorName, `[${first.index}] ${first.message}`);
    const body = {
      data: ok.map(sendAnswer),
      ...(mode === "permissive" ? { errors: errors.map(({ index, message }) => ({ index, message })) } : {}),
    };
    if (ok.length === 0) return c.json(body, 200);
    const res = await storeAndQueue(c.env, {
      tenant,
      leaveGate: c.get("leaveGate"),
      prefetch: c.get("prefetch"),
      shard,
      idempotency: idem,
      prepared: ok,
      response: { status: 200, body: JSON.stringify(body) },
    });
    return sender.withNotice(jsonResponse(res));
  });
}

/** GET /emails, GET /emails/:id, PATCH /emails/:id and POST /emails/:id/cancel. */
function addStatusRoutes(r: Hono<AppEnv>): void {
  r.get("/", async (c) => {
    const q = parseInput(ListQuerySchema, c.req.query());
    const page = await listMessages(c.env.DB, c.get("tenant"), q);
    if (!page)
      throw new ApiError(
        422,
        "validation_error",
        `\`${q.after !== undefined ? "after" : "before"}\` is not the id of one of your emails.`,
      );
    return c.json({ object: "list", has_more: page.hasMore, data: page.data.map(listItem) });
  });

  r.get("/:id", async (c) => {
    const view = await viewOr404(c, c.req.param("id"));
    return c.json(emailObject(view, Date.now(), await explainWaiting(c.env, view)));
  });

  r.patch("/:id", async (c) => {
    const id = c.req.param("id");
    await viewOr404(c, id);
    const { value } = await readJson(c, 64 * 1024);
    const atMs = parseScheduledAt(parseInput(UpdateEmailSchema, value).scheduled_at, Date.now());
    const res = await outboxOf(c.env, id).reschedule(id, c.get("tenant"), atMs);
    if (res === "not_found") throw notFound();
    if (res === "not_scheduled")
      throw new ApiError(422, "validation_error", "Only a scheduled email that is not yet due can be rescheduled.");
    return c.json({ object: "email", id });
  });

  r.post("/:id/cancel", async (c) => {
    const id = c.req.param("id");
    await viewOr404(c, id);
    const res = await outboxOf(c.env, id).cancel(id, c.get("tenant"));
    if (res === "not_found") throw notFound();
    if (res === "not_scheduled")
      throw new ApiError(422, "validation_error", "Only a scheduled email that is not yet due can be canceled.");
    return c.json({ object: "email", id });
  });
}

/** The /emails routes (mounted behind the API key middleware). */
export function emailRoutes() {
  const r = new Hono<AppEnv>();
  addSendRoutes(r);
  // "batch" is no email id: GET /emails/batch is a method the batch endpoint does not take, not "Email not found".
  r.all("/batch", methodNotAllowed);
  addStatusRoutes(r);
  for (const path of ["/", "/:id", "/:id/cancel"]) r.all(path, methodNotAllowed);
  return r;
}
