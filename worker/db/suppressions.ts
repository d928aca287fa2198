/**
 * Suppressions in D1 (migrations/0002, scopes 0014): addresses a tenant (or every tenant, '*')
 * does not send to, until `expires_at` or until removed; each entry holds back all of the
 * tenant's mail (scope ''), its bulk mail ('bulk') or its bulk mail of one topic ('bulk:<topic>').
 *
 * DESCRIPTION
 *   listSuppressions   the tenant's live entries in (address, scope) order, a page of whole
 *                      addresses (every entry of an address on the same page), cursor after an
 *                      address.
 *   addSuppression     insert or replace one entry (address and scope).
 *   removeSuppression  delete the tenant's entries for an address (one scope's, or all); how many.
 *   listSuppressionEntries  Resend's page of entries (cursor after or before an entry, origin filter).
 *   suppressionEntries the live entries of one address.
 *   addSuppressions    many entries in one statement (batch add).
 */

/** A stored suppression. */
export interface SuppressionRow {
  tenant_id: string;
  address: string;
  /** '' (all mail), 'bulk' or 'bulk:<topic>'. */
  scope: string;
  reason: string;
  created_at: number;
  expires_at: number | null;
}

/**
 * A page of the tenant's live suppressions: entries of at most `limit` addresses (an address has
 * at most one entry per scope), so a cursor after the last address never splits one.
 */
export async function listSuppressions(
  db: D1Database,
  tenant: string,
  q: { limit: number; after?: string; address?: string },
  nowMs: number,
): Promise<{ rows: SuppressionRow[]; hasMore: boolean }> {
  let where = "tenant_id = ? AND (expires_at IS NULL OR expires_at > ?)";
  const args: (string | number)[] = [tenant, nowMs];
  if (q.address) {
    where += " AND address = ?";
    args.push(q.address);
  }
  if (q.after) {
    where += " AND address > ?";
    args.push(q.after);
  }
  // The addresses of the page (one more, to know whether there is another), then their live entries.
  const { results } = await db
    .prepare(
      `WITH page AS (SELECT DISTINCT address FROM suppressions WHERE ${where} ORDER BY address LIMIT ?)
     SELECT s.* FROM suppressions s JOIN page USING (address)
     WHERE s.tenant_id = ? AND (s.expires_at IS NULL OR s.expires_at > ?) ORDER BY s.address, s.scope`,
    )
    .bind(...args, q.limit + 1, tenant, nowMs)
    .all<SuppressionRow>();
  const addresses = [...new Set(results.map((r) => r.address))];
  const hasMore = addresses.length > q.limit;
  const last = hasMore ? addresses[q.limit] : undefined;
  return { rows: last === undefined ? results : results.filter((r) => r.address < last), hasMore };
}

/** Adds (or replaces) a suppression of one address and scope. */
export async function addSuppression(db: D1Database, row: SuppressionRow): Promise<void> {
  await db
    .prepare(
      "INSERT OR REPLACE INTO suppressions (tenant_id, address, scope, reason, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(row.tenant_id, row.address, row.scope, row.reason, row.created_at, row.expires_at)
    .run();
}

/** Removes the tenant's suppressions of an address (only `scope`'s when given); how many there were. */
export async function removeSuppression(
  db: D1Database,
  tenant: string,
  address: string,
  scope?: string,
): Promise<number> {
  const res =
    scope === undefined
      ? await db.prepare("DELETE FROM suppressions WHERE tenant_id = ? AND address = ?").bind(tenant, address).run()
      : await db
          .prepare("DELETE FROM suppressions WHERE tenant_id = ? AND address = ? AND scope = ?")
          .bind(tenant, address, scope)
          .run();
  return res.meta.changes;
}

/** Which entries a Resend `origin` filter keeps (their reason): bounce:*, complaint, or the rest. */
export type SuppressionOriginFilter = "bounce" | "complaint" | "manual";

const ORIGIN_SQL: Record<SuppressionOriginFilter, string> = {
  bounce: "reason LIKE 'bounce:%'",
  complaint: "reason = 'complaint'",
  manual: "reason NOT LIKE 'bounce:%' AND reason != 'complaint'",
};

/**
 * A page of the tenant's live entries in (address, scope) order, after or before an entry
 * (Resend's cursors), optionally of one origin; the primary key serves the order and the cursor.
 */
export async function listSuppressionEntries(
  db: D1Database,
  tenant: string,
  q: { limit: number; after?: [string, string]; before?: [string, string]; origin?: SuppressionOriginFilter },
  nowMs: number,
): Promise<{ rows: SuppressionRow[]; hasMore: boolean }> {
  let where = "tenant_id = ? AND (expires_at IS NULL OR expires_at > ?)";
  const args: (string | number)[] = [tenant, nowMs];
  if (q.origin) where += ` AND ${ORIGIN_SQL[q.origin]}`;
  if (q.after) {
    where += " AND (address, scope) > (?, ?)";
    args.push(...q.after);
  }
  if (q.before) {
    where += " AND (address, scope) < (?, ?)";
    args.push(...q.before);
  }
  const order = q.before ? "DESC" : "ASC";
  const rows = (
    await db
      .prepare(`SELECT * FROM suppressions WHERE ${where} ORDER BY address ${order}, scope ${order} LIMIT ?`)
      .bind(...args, q.limit + 1)
      .all<SuppressionRow>()
  ).results;
  const hasMore = rows.length > q.limit;
  const page = rows.slice(0, q.limit);
  return { rows: q.before ? page.reverse() : page, hasMore };
}

/** The tenant's live entries of one address ('' scope first). */
export async function suppressionEntries(
  db: D1Database,
  tenant: string,
  address: string,
  nowMs: number,
): Promise<SuppressionRow[]> {
  return (
    await db
      .prepare(
        "SELECT * FROM suppressions WHERE tenant_id = ? AND address = ? AND (expires_at IS NULL OR expires_at > ?) ORDER BY scope",
      )
      .bind(tenant, address, nowMs)
      .all<SuppressionRow>()
  ).results;
}

/** Adds (or replaces) many entries in one statement. */
export async function addSuppressions(db: D1Database, rows: readonly SuppressionRow[]): Promise<void> {
  if (rows.length === 0) return;
  await db
    .prepare(
      `INSERT OR REPLACE INTO suppressions (tenant_id, address, scope, reason, created_at, expires_at)
      SELECT json_extract(j.value, '$.tenant_id'), json_extract(j.value, '$.address'), json_extract(j.value, '$.scope'),
        json_extract(j.value, '$.reason'), json_extract(j.value, '$.created_at'), json_extract(j.value, '$.expires_at') FROM json_each(?) j`,
    )
    .bind(JSON.stringify(rows))
    .run();
}
