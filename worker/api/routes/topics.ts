/**
 * Resend's topics and a contact's topic subscriptions (worker/topics/topics.ts says what they
 * mean: an opt-out is the suppression of scope 'bulk:<topic id>').
 *
 * DESCRIPTION
 *   POST   /topics          { name, description?, default_subscription } → 201 { id }.
 *   GET    /topics          { object: "list", has_more: false, data: [topic] }, oldest first.
 *   GET    /topics/:id      the topic { id, name, description, default_subscription, created_at }.
 *   PATCH  /topics/:id      { name?, description? } → { id } (the default cannot change).
 *   DELETE /topics/:id      → { object: "topic", id, deleted: true }; its opt-ins and opt-outs go.
 *   GET    /contacts/:id_or_email/topics   { object: "list", has_more: false, data: [{ id, name,
 *                           description, subscription }] }: every topic, with the contact's
 *                           subscription (opt_out when suppressed for it; else the default or
 *                           the contact's opt-in).
 *   PATCH  /contacts/:id_or_email/topics   [{ id, subscription }] → { id: <email> }.
 *   A contact is named by its email address: Cohort keeps no contact records.
 *
 * ERRORS
 *   422 validation_error for a bad field or a topic that is not the tenant's; 404 not_found for
 *   an unknown topic, or a contact named by an id.
 */
import { Hono, type Context } from "hono";
import { deleteTopic, getTopic, insertTopic, listTopics, updateTopic, type TopicRow } from "../../db/topics";
import { contactAddress, contactTopics, topicObject, updateContactTopics } from "../../topics/topics";
import { type AppEnv } from "../http/context";
import { parseInput, readJson } from "../http/body";
import { ApiError } from "../../model/errors";
import { ContactTopicsSchema, CreateTopicSchema, PageQuerySchema, UpdateTopicSchema } from "../http/template-schemas";

async function mine(c: Context<AppEnv>): Promise<TopicRow> {
  const t = await getTopic(c.env.DB, c.get("tenant"), c.req.param("id") ?? "");
  if (!t) throw new ApiError(404, "not_found", "Topic not found.");
  return t;
}

/** The /topics routes (mounted behind the API key middleware). */
export function topicRoutes() {
  const r = new Hono<AppEnv>();
  r.post("/", async (c) => {
    const input = parseInput(CreateTopicSchema, (await readJson(c, 16 * 1024)).value);
    const row: TopicRow = {
      tenant_id: c.get("tenant"),
      id: crypto.randomUUID(),
      name: input.name,
      description: input.description ?? null,
      default_subscription: input.default_subscription,
      created_at: Date.now(),
    };
    await insertTopic(c.env.DB, row);
    return c.json({ id: row.id }, 201);
  });
  r.get("/", async (c) =>
    c.json({ object: "list", has_more: false, data: (await listTopics(c.env.DB, c.get("tenant"))).map(topicObject) }),
  );
  r.get("/:id", async (c) => c.json({ object: "topic", ...topicObject(await mine(c)) }));
  r.patch("/:id", async (c) => {
    const t = await mine(c);
    const input = parseInput(UpdateTopicSchema, (await readJson(c, 16 * 1024)).value);
    await updateTopic(c.env.DB, t.tenant_id, t.id, input);
    return c.json({ id: t.id });
  });
  r.delete("/:id", async (c) => {
    const t = await mine(c);
    await deleteTopic(c.env.DB, t.tenant_id, t.id);
    return c.json({ object: "topic", id: t.id, deleted: true });
  });
  return r;
}

/** The /contacts/:id_or_email/topics routes (mounted behind the API key middleware). */
export function contactTopicRoutes() {
  const r = new Hono<AppEnv>();
  r.get("/:contact/topics", async (c) => {
    parseInput(PageQuerySchema, c.req.query());
    const address = contactAddress(c.req.param("contact"));
    return c.json({
      object: "list",
      has_more: false,
      data: await contactTopics(c.env.DB, c.get("tenant"), address, Date.now()),
    });
  });
  r.patch("/:contact/topics", async (c) => {
    const address = contactAddress(c.req.param("contact"));
    const subs = parseInput(ContactTopicsSchema, (await readJson(c, 64 * 1024)).value);
    await updateContactTopics(c.env.DB, c.get("tenant"), address, subs, Date.now());
    return c.json({ id: address });
  });
  return r;
}
