/**
 * Topics as Resend means them: what a send with `topic_id` is, and a contact's subscriptions.
 * There is one mechanism behind both: the suppression scope 'bulk:<topic id>'
 * (webhooks/core/suppression-policy.ts). A topic's email is bulk mail of the topic, so the
 * classify stage holds it back for an address with that entry (an opt-out, made through the
 * contacts topics call, a one-click unsubscribe from the topic's email, or POST
 * /relay/suppressions), and for an address that did not opt in when the topic's default is
 * opt_out (db/routing.ts).
 *
 * DESCRIPTION
 *   TopicSource            the tenant's topics by id, each read at most once per request.
 *   topicOf(id, source)    the topic a send names; 422 when it is not one of the tenant's.
 *   topicObject(row)       Resend's topic object.
 *   contactAddress(ident)  the address a contacts call names (`/contacts/:id_or_email/...`):
 *                          Cohort keeps no contact records, so a contact is its email address.
 *   contactTopics / updateContactTopics  GET and PATCH /contacts/:id_or_email/topics.
 *
 * ERRORS
 *   ApiError 422 validation_error for an unknown topic id; 404 not_found for a contact
 *   identifier that is not an email address (a contact id).
 */
import { ApiError } from "../model/errors";
import { getTopic, listTopics, setSubscriptions, subscriptionsOf, type TopicRow } from "../db/topics";

const iso = (ms: number) => new Date(ms).toISOString();

/** The tenant's topics, each read at most once per request. */
export class TopicSource {
  private readonly seen = new Map<string, Promise<TopicRow | null>>();
  constructor(
    private readonly db: D1Database,
    private readonly tenant: string,
  ) {}
  get(id: string): Promise<TopicRow | null> {
    let p = this.seen.get(id);
    if (!p) {
      p = getTopic(this.db, this.tenant, id);
      this.seen.set(id, p);
    }
    return p;
  }
}

/** The topic a send names (see the header). */
export async function topicOf(id: string, source: TopicSource): Promise<TopicRow> {
  const t = await source.get(id);
  if (!t)
    throw new ApiError(
      422,
      "validation_error",
      `Invalid \`topic_id\`: no topic ${JSON.stringify(id)} of yours (POST /topics).`,
    );
  return t;
}

/** Resend's topic object. */
export function topicObject(t: TopicRow) {
  return {
    id: t.id,
    name: t.name,
    description: t.description ?? undefined,
    default_subscription: t.default_subscription,
    created_at: iso(t.created_at),
  };
}

/** The address a contacts call names (see the header). */
export function contactAddress(ident: string): string {
  const a = ident.trim().toLowerCase();
  if (a.length > 320 || !/^[^@\s]+@[^@\s]+$/.test(a)) {
    throw new ApiError(
      404,
      "not_found",
      "Contact not found: this relay keeps no contact records; name the contact by its email address.",
    );
  }
  return a;
}

/** GET /contacts/:id_or_email/topics: every topic with the contact's subscription. */
export async function contactTopics(db: D1Database, tenant: string, address: string, nowMs: number) {
  return (await subscriptionsOf(db, tenant, address, nowMs)).map(({ topic, subscription }) => ({
    id: topic.id,
    name: topic.name,
    description: topic.description,
    subscription,
  }));
}

/** PATCH /contacts/:id_or_email/topics: sets the subscriptions given; 422 for a topic that is not the tenant's. */
export async function updateContactTopics(
  db: D1Database,
  tenant: string,
  address: string,
  subs: readonly { id: string; subscription: "opt_in" | "opt_out" }[],
  nowMs: number,
): Promise<void> {
  const topics = new Map((await listTopics(db, tenant)).map((t) => [t.id, t]));
  const resolved = subs.map((s, i) => {
    const topic = topics.get(s.id);
    if (!topic)
      throw new ApiError(422, "validation_error", `Invalid \`[${i}].id\`: no topic ${JSON.stringify(s.id)} of yours.`);
    return { topic, subscription: s.subscription };
  });
  await setSubscriptions(db, tenant, address, resolved, nowMs);
}
