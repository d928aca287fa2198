/**
 * Suppressions in D1 (migrations/0002): addresses a tenant (or every tenant, '*') does not
 * send to, until `expires_at` or until removed.
 *
 * DESCRIPTION
 *   listSuppressions   the tenant's live entries, by address, cursor after an address.
 *   addSuppression     insert or replace one entry.
 *   removeSuppression  delete the tenant's entry for an address; false if none.
 */

/** A stored suppression. */
export interface SuppressionRow {
  tenant_id: string;
  address: string;
  reason: string;
  created_at: number;
  expires_at: number | null;
}

/** A page of the tenant's live suppressions, in address order. */
export async function listSuppressions(db: D1Database, tenant: string, q: { limit: number; after?: string; address?: string }, nowMs: number): Promise<{ rows: SuppressionRow[]; hasMore: boolean }> {
  let sql = "SELECT * FROM suppressions WHERE tenant_id = ? AND (expires_at IS NULL OR expires_at > ?)";
  const args: (string | number)[] = [tenant, nowMs];
  if (q.address) {
    sql += " AND address = ?";
    args.push(q.address);
  }
  if (q.after) {
    sql += " AND address > ?";
    args.push(q.after);
  }
  sql += " ORDER BY address LIMIT ?";
  args.push(q.limit + 1);
  const { results } = await db.prepare(sql).bind(...args).all<SuppressionRow>();
  return { rows: results.slice(0, q.limit), hasMore: results.length > q.limit };
}

/** Adds (or replaces) a suppression. */
export async function addSuppression(db: D1Database, row: SuppressionRow): Promise<void> {
  await db
    .prepare("INSERT OR REPLACE INTO suppressions (tenant_id, address, reason, created_at, expires_at) VALUES (?, ?, ?, ?, ?)")
    .bind(row.tenant_id, row.address, row.reason, row.created_at, row.expires_at)
    .run();
}

/** Removes the tenant's suppression of an address; false if there was none. */
export async function removeSuppression(db: D1Database, tenant: string, address: string): Promise<boolean> {
  const res = await db.prepare("DELETE FROM suppressions WHERE tenant_id = ? AND address = ?").bind(tenant, address).run();
  return res.meta.changes > 0;
}
