/**
 * Topics and their opt-ins in D1 (migrations/0021); an opt-out is the suppression of scope
 * 'bulk:<topic id>' (db/suppressions.ts), not a row here.
 *
 * DESCRIPTION
 *   TopicRow                       a topic.
 *   getTopic / listTopics          a tenant's topic(s), oldest first.
 *   insertTopic / updateTopic / deleteTopic   deleting a topic takes its opt-ins and its
 *                                  suppressions with it, in one batch.
 *   subscriptionsOf(db, t, addr)   every topic of the tenant with the address's subscription:
 *                                  opt_out when suppressed for the topic (or for all bulk
 *                                  mail), else opt_in when the default is opt_in or it opted in.
 *   setSubscriptions(db, t, addr, subs, nowMs)  one batch: an opt_out adds the suppression and
 *                                  drops the opt-in; an opt_in removes the suppression and, for a
 *                                  topic whose default is opt_out, records the opt-in.
 */

export interface TopicRow {
  tenant_id: string;
  id: string;
  name: string;
  description: string | null;
  default_subscription: "opt_in" | "opt_out";
  created_at: number;
}

export async function getTopic(db: D1Database, tenant: string, id: string): Promise<TopicRow | null> {
  return db.prepare("SELECT * FROM topics WHERE tenant_id = ? AND id = ?").bind(tenant, id).first<TopicRow>();
}

export async function listTopics(db: D1Database, tenant: string): Promise<TopicRow[]> {
  return (
    await db.prepare("SELECT * FROM topics WHERE tenant_id = ? ORDER BY created_at, id").bind(tenant).all<TopicRow>()
  ).results;
}

export async function insertTopic(db: D1Database, t: TopicRow): Promise<void> {
  await db
    .prepare(
      "INSERT INTO topics (tenant_id, id, name, description, default_subscription, created_at) VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(t.tenant_id, t.id, t.name, t.description, t.default_subscription, t.created_at)
    .run();
}

export async function updateTopic(
  db: D1Database,
  tenant: string,
  id: string,
  f: { name?: string | undefined; description?: string | undefined },
): Promise<void> {
  await db
    .prepare(
      "UPDATE topics SET name = COALESCE(?, name), description = COALESCE(?, description) WHERE tenant_id = ? AND id = ?",
    )
    .bind(f.name ?? null, f.description ?? null, tenant, id)
    .run();
}

export async function deleteTopic(db: D1Database, tenant: string, id: string): Promise<boolean> {
  const [gone] = await db.batch([
    db.prepare("DELETE FROM topics WHERE tenant_id = ? AND id = ?").bind(tenant, id),
    db.prepare("DELETE FROM topic_opt_ins WHERE tenant_id = ? AND topic_id = ?").bind(tenant, id),
    db.prepare("DELETE FROM suppressions WHERE tenant_id = ? AND scope = ?").bind(tenant, `bulk:${id}`),
  ]);
  return (gone!.meta.changes ?? 0) > 0;
}

/** A topic with an address's subscription. */
export interface Subscription {
  topic: TopicRow;
  subscription: "opt_in" | "opt_out";
}

export async function subscriptionsOf(
  db: D1Database,
  tenant: string,
  address: string,
  nowMs: number,
): Promise<Subscription[]> {
  const rows = (
    await db
      .prepare(
        `SELECT t.*,
      EXISTS (SELECT 1 FROM suppressions s WHERE s.tenant_id = t.tenant_id AND s.address = ?2 AND s.scope IN ('bulk', 'bulk:' || t.id)
        AND (s.expires_at IS NULL OR s.expires_at > ?3)) AS out,
      EXISTS (SELECT 1 FROM topic_opt_ins o WHERE o.tenant_id = t.tenant_id AND o.topic_id = t.id AND o.address = ?2) AS opted
    FROM topics t WHERE t.tenant_id = ?1 ORDER BY t.created_at, t.id`,
      )
      .bind(tenant, address, nowMs)
      .all<TopicRow & { out: number; opted: number }>()
  ).results;
  return rows.map(({ out, opted, ...topic }) => ({
    topic,
    subscription: out ? "opt_out" : topic.default_subscription === "opt_in" || opted ? "opt_in" : "opt_out",
  }));
}

export async function setSubscriptions(
  db: D1Database,
  tenant: string,
  address: string,
  subs: readonly { topic: TopicRow; subscription: "opt_in" | "opt_out" }[],
  nowMs: number,
): Promise<void> {
  const stmts = subs.flatMap(({ topic, subscription }) => {
    const scope = `bulk:${topic.id}`;
    return subscription === "opt_out"
      ? [
          db
            .prepare(
              "INSERT OR REPLACE INTO suppressions (tenant_id, address, scope, reason, created_at, expires_at) VALUES (?, ?, ?, ?, ?, NULL)",
            )
            .bind(tenant, address, scope, `unsubscribe:${topic.id}`, nowMs),
          db
            .prepare("DELETE FROM topic_opt_ins WHERE tenant_id = ? AND topic_id = ? AND address = ?")
            .bind(tenant, topic.id, address),
        ]
      : [
          db
            .prepare("DELETE FROM suppressions WHERE tenant_id = ? AND address = ? AND scope = ?")
            .bind(tenant, address, scope),
          ...(topic.default_subscription === "opt_out"
            ? [
                db
                  .prepare(
                    "INSERT OR IGNORE INTO topic_opt_ins (tenant_id, topic_id, address, created_at) VALUES (?, ?, ?, ?)",
                  )
                  .bind(tenant, topic.id, address, nowMs),
              ]
            : []),
        ];
  });
  if (stmts.length > 0) await db.batch(stmts);
}
