/**
 * Message search and detail for operators and tenants (any key; a tenant key sees only its own
 * tenant's mail, an operator key every tenant's).
 *
 * DESCRIPTION
 *   GET /relay/messages?id=&address=&tag=&state=&tenant=&limit=&after=
 *                             matching messages, newest first, with their recipients' states:
 *                             { object: "list", has_more, data }. `tag` is `name` or
 *                             `name:value`; `tenant` narrows an operator's search.
 *   GET /relay/messages/:id   GET /emails/:id's body (recipients with attempts, last SMTP
 *                             response, blocked_by) plus `tenant` and `events`: the message's
 *                             timeline from the D1 event log.
 *   GET /relay/messages/:id/events?limit=   the timeline alone: { object: "list", data }.
 *
 * ERRORS
 *   422 validation_error for bad parameters (a tenant key passing `tenant` of another tenant
 *   included); 404 not_found for an unknown (or another tenant's) message or cursor.
 */
import { Hono, type Context } from "hono";
import { isMessageId, outboxOf } from "../../../model/ids";
import { messageEvents, searchMessages, tenantOfMessage, type MessageEvent } from "../../../db/admin";
import { type AppEnv } from "../../http/context";
import { parseInput } from "../../http/body";
import { emailObject } from "../../http/email-view";
import { ApiError } from "../../../model/errors";
import { scopeOf, type RoleCache } from "../../http/operator";
import { EventsQuerySchema, SearchQuerySchema } from "./schemas";

const notFound = () => new ApiError(404, "not_found", "Email not found.");

/** The tenant whose mail the request may see: its own, or null (all) for an operator. */
/** The tenant of a message the caller may see, or a 404. */
async function visibleTenant(c: Context<AppEnv>, cache: RoleCache, id: string): Promise<string> {
  if (!isMessageId(id)) throw notFound();
  const scope = await scopeOf(c, cache);
  if (scope !== null) return scope;
  const tenant = await tenantOfMessage(c.env.DB, id);
  if (tenant === null) throw notFound();
  return tenant;
}

/** An event as the API shows it. */
function eventView(e: MessageEvent) {
  let data: unknown = {};
  try {
    data = JSON.parse(e.data);
  } catch {
    /* stored by this relay as JSON; keep {} */
  }
  return {
    object: "event",
    seq: e.seq,
    type: e.type,
    recipient: e.recipient,
    created_at: new Date(e.created_at).toISOString(),
    data,
  };
}

/** The /relay/messages search and detail routes. */
export function messageRoutes(cache: RoleCache) {
  const r = new Hono<AppEnv>();

  r.get("/messages", async (c) => {
    const q = parseInput(SearchQuerySchema, c.req.query());
    let scope = await scopeOf(c, cache);
    if (q.tenant !== undefined) {
      if (scope !== null && q.tenant !== scope)
        throw new ApiError(422, "validation_error", "Invalid `tenant`: a tenant key can only search its own tenant.");
      scope = q.tenant;
    }
    const [name, value] = q.tag?.split(":") ?? [];
    const page = await searchMessages(c.env.DB, {
      tenant: scope,
      id: q.id,
      address: q.address?.trim(),
      state: q.state,
      limit: q.limit,
      after: q.after,
      tag: name === undefined ? undefined : { name, value: value ?? null },
    });
    if (!page) throw new ApiError(404, "not_found", "The `after` cursor is not a known email id.");
    const data = page.data.map((m) => ({
      object: "email",
      id: m.id,
      tenant: m.tenant_id,
      from: m.from_addr,
      subject: m.subject,
      created_at: new Date(m.created_at).toISOString(),
      last_event: m.last_event,
      recipients: m.recipients.map((x) => ({
        email: x.address,
        status: x.status,
        attempts: x.attempts,
        transport: x.transport,
        nexthop: x.nexthop,
      })),
    }));
    return c.json({ object: "list", has_more: page.hasMore, data });
  });

  r.get("/messages/:id", async (c) => {
    const id = c.req.param("id");
    const tenant = await visibleTenant(c, cache, id);
    const view = await outboxOf(c.env, id).view(id, tenant);
    if (!view) throw notFound();
    const events = await messageEvents(c.env.DB, id, tenant);
    return c.json({ ...emailObject(view, Date.now()), tenant, events: events.map(eventView) });
  });

  r.get("/messages/:id/events", async (c) => {
    const id = c.req.param("id");
    const q = parseInput(EventsQuerySchema, c.req.query());
    const tenant = await visibleTenant(c, cache, id);
    const events = await messageEvents(c.env.DB, id, tenant, q.limit);
    if (events.length === 0 && (await tenantOfMessage(c.env.DB, id)) !== tenant) throw notFound();
    return c.json({ object: "list", data: events.map(eventView) });
  });

  return r;
}
