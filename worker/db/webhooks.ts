/**
 * Webhook endpoints in D1 (migrations/0003): one row per endpoint, per tenant.
 *
 * DESCRIPTION
 *   insertEndpoint, getEndpoint, listEndpoints (cursor pagination, newest first),
 *   updateEndpoint, deleteEndpoint, rotateEndpointSecret. Every query is scoped to the tenant,
 *   so one tenant never reads or changes another's endpoints.
 */

/** A stored endpoint. */
export interface EndpointRow {
  id: string;
  tenant_id: string;
  endpoint: string;
  events: string | null;
  status: "enabled" | "disabled";
  disabled_reason: string | null;
  secret_enc: string;
  previous_secret_enc: string | null;
  previous_valid_until: number | null;
  created_at: number;
  updated_at: number;
}

/** Inserts an endpoint. */
export async function insertEndpoint(
  db: D1Database,
  row: Omit<EndpointRow, "disabled_reason" | "previous_secret_enc" | "previous_valid_until" | "updated_at">,
): Promise<void> {
  await db
    .prepare(
      "INSERT INTO webhook_endpoints (id, tenant_id, endpoint, events, status, secret_enc, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(row.id, row.tenant_id, row.endpoint, row.events, row.status, row.secret_enc, row.created_at, row.created_at)
    .run();
}

/** One endpoint of the tenant, or null. */
export function getEndpoint(db: D1Database, tenant: string, id: string): Promise<EndpointRow | null> {
  return db
    .prepare("SELECT * FROM webhook_endpoints WHERE tenant_id = ? AND id = ?")
    .bind(tenant, id)
    .first<EndpointRow>();
}

/** A page of the tenant's endpoints, newest first; `after`/`before` are endpoint ids. */
export async function listEndpoints(
  db: D1Database,
  tenant: string,
  q: { limit: number; after?: string; before?: string },
): Promise<{ rows: EndpointRow[]; hasMore: boolean }> {
  const cursorId = q.after ?? q.before;
  const cursor = cursorId ? await getEndpoint(db, tenant, cursorId) : null;
  let sql = "SELECT * FROM webhook_endpoints WHERE tenant_id = ?";
  const args: (string | number)[] = [tenant];
  if (cursor && q.after) {
    sql += " AND (created_at < ? OR (created_at = ? AND id < ?))";
    args.push(cursor.created_at, cursor.created_at, cursor.id);
  } else if (cursor && q.before) {
    sql += " AND (created_at > ? OR (created_at = ? AND id > ?))";
    args.push(cursor.created_at, cursor.created_at, cursor.id);
  }
  const asc = Boolean(cursor && q.before);
  sql += asc ? " ORDER BY created_at ASC, id ASC LIMIT ?" : " ORDER BY created_at DESC, id DESC LIMIT ?";
  args.push(q.limit + 1);
  const { results } = await db
    .prepare(sql)
    .bind(...args)
    .all<EndpointRow>();
  const rows = results.slice(0, q.limit);
  return { rows: asc ? rows.reverse() : rows, hasMore: results.length > q.limit };
}

/** Changes endpoint, events or status; false if there is no such endpoint. */
export async function updateEndpoint(
  db: D1Database,
  tenant: string,
  id: string,
  patch: { endpoint?: string; events?: string | null; status?: "enabled" | "disabled" },
  nowMs: number,
): Promise<boolean> {
  const res = await db
    .prepare(
      "UPDATE webhook_endpoints SET endpoint = COALESCE(?, endpoint), events = CASE WHEN ? THEN ? ELSE events END, " +
        "status = COALESCE(?, status), disabled_reason = CASE WHEN ? = 'enabled' THEN NULL ELSE disabled_reason END, " +
        "updated_at = ? WHERE tenant_id = ? AND id = ?",
    )
    .bind(
      patch.endpoint ?? null,
      patch.events !== undefined ? 1 : 0,
      patch.events ?? null,
      patch.status ?? null,
      patch.status ?? null,
      nowMs,
      tenant,
      id,
    )
    .run();
  return res.meta.changes > 0;
}

/** Deletes an endpoint; false if there was none. */
export async function deleteEndpoint(db: D1Database, tenant: string, id: string): Promise<boolean> {
  const res = await db.prepare("DELETE FROM webhook_endpoints WHERE tenant_id = ? AND id = ?").bind(tenant, id).run();
  return res.meta.changes > 0;
}

/** Installs a new secret; the old one keeps signing until `previousValidUntil`. */
export async function rotateEndpointSecret(
  db: D1Database,
  tenant: string,
  id: string,
  secretEnc: string,
  previousValidUntil: number,
  nowMs: number,
): Promise<boolean> {
  const res = await db
    .prepare(
      "UPDATE webhook_endpoints SET previous_secret_enc = secret_enc, previous_valid_until = ?, secret_enc = ?, updated_at = ? WHERE tenant_id = ? AND id = ?",
    )
    .bind(previousValidUntil, secretEnc, nowMs, tenant, id)
    .run();
  return res.meta.changes > 0;
}
