/**
 * The OpenAPI rows (document.ts ROUTES) of Resend's topics and of contacts' subscriptions to
 * them (an opt-out is the suppression of scope bulk:<topic>).
 */
import { z } from "zod";
import type { Operation } from "./types";
import { deleted, list, Page } from "./shapes";
import { ContactTopicsSchema, CreateTopicSchema, UpdateTopicSchema } from "../http/template-schemas";

const Topic = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().optional(),
  default_subscription: z.enum(["opt_in", "opt_out"]),
  created_at: z.string(),
});
const ContactTopic = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  subscription: z.enum(["opt_in", "opt_out"]),
});

/** Topics, and a contact's subscriptions. */
export const TOPIC_ROUTES: Operation[] = [
  {
    method: "post",
    path: "/topics",
    operationId: "createTopic",
    auth: true,
    summary: "Create a topic with its default subscription",
    body: CreateTopicSchema,
    ok: { status: 201, schema: z.object({ id: z.string() }) },
    errors: [400, 401, 422],
  },
  {
    method: "get",
    path: "/topics",
    summary: "List topics",
    operationId: "listTopics",
    auth: true,
    ok: { status: 200, schema: list(Topic) },
    errors: [401],
  },
  {
    method: "get",
    path: "/topics/{id}",
    operationId: "getTopic",
    auth: true,
    summary: "A topic",
    ok: { status: 200, schema: Topic.extend({ object: z.literal("topic") }) },
    errors: [401, 404],
  },
  {
    method: "patch",
    path: "/topics/{id}",
    operationId: "updateTopic",
    auth: true,
    summary: "Rename or describe a topic (its default cannot change)",
    body: UpdateTopicSchema,
    ok: { status: 200, schema: z.object({ id: z.string() }) },
    errors: [400, 401, 404, 422],
  },
  {
    method: "delete",
    path: "/topics/{id}",
    operationId: "removeTopic",
    auth: true,
    summary: "Delete a topic with its opt-ins and opt-outs",
    ok: { status: 200, schema: deleted("topic") },
    errors: [401, 404],
  },
  {
    method: "get",
    path: "/contacts/{contact}/topics",
    operationId: "listContactTopics",
    auth: true,
    summary: "A contact's (by email) subscription to every topic",
    query: Page,
    ok: { status: 200, schema: list(ContactTopic) },
    errors: [401, 404, 422],
  },
  {
    method: "patch",
    path: "/contacts/{contact}/topics",
    operationId: "updateContactTopics",
    auth: true,
    summary: "Opt a contact (by email) in or out of topics (an opt-out is the suppression of scope bulk:<topic>)",
    body: ContactTopicsSchema,
    ok: { status: 200, schema: z.object({ id: z.string() }) },
    errors: [400, 401, 404, 422],
  },
];
