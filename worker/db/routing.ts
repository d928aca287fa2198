/**
 * Routing configuration from D1: routes (domain pattern → transport) and transports, and
 * suppressed recipients.
 *
 * DESCRIPTION
 *   loadRouting(db)                       every route and transport (small tables), read once
 *                                         per classify batch.
 *   suppressedAmong(db, tenant, addrs, nowMs, scopes)  the addresses (lower-cased) suppressed
 *                                         for the tenant or for every tenant (`'*'`), not
 *                                         expired, by an entry of one of `scopes` (see
 *                                         suppressionScopes), each with that entry's scope ("" first);
 *                                         for bulk mail of a topic whose default is opt_out, also
 *                                         every address without an opt-in (scope 'bulk:<topic>').
 *   suppressionRowsStatement(db, keyHash, addrs, nowMs)  every unexpired entry, of any scope, for
 *                                         the tenant of the live key `keyHash` or for every
 *                                         tenant, of the (lower-cased) `addrs`: what a send
 *                                         request reads with its key (api/http/send-reads.ts).
 *   suppressedIn(rows, addrs, nowMs, scopes)  suppressedAmong's answer from such rows, for scopes
 *                                         without a topic's opt-out (`bulk:<topic>`), whose
 *                                         opt-ins only suppressedAmong reads.
 *
 * INVARIANTS
 *   Suppression addresses are stored lower-case; lookups lower-case their input.
 */

/** A route row. */
export interface RouteRow {
  tenant_id: string | null;
  pattern: string;
  transport: string;
  nexthop: string | null;
}

/** Routes and transports (name → fixed nexthop or null). */
export interface Routing {
  routes: RouteRow[];
  transports: Map<string, string | null>;
}

/** Loads every route and transport. */
export async function loadRouting(db: D1Database): Promise<Routing> {
  const [routes, transports] = await db.batch([
    db.prepare("SELECT tenant_id, pattern, transport, nexthop FROM routes"),
    db.prepare("SELECT name, nexthop FROM transports"),
  ]);
  return {
    routes: (routes?.results ?? []) as RouteRow[],
    transports: new Map(
      ((transports?.results ?? []) as { name: string; nexthop: string | null }[]).map((t) => [t.name, t.nexthop]),
    ),
  };
}

/** The addresses among `addresses` suppressed for `tenant` at `nowMs` under one of `scopes`, lower-cased, → the entry's scope. */
export async function suppressedAmong(
  db: D1Database,
  tenant: string,
  addresses: string[],
  nowMs: number,
  scopes: readonly string[] = [""],
): Promise<Map<string, string>> {
  const lower = [...new Set(addresses.map((a) => a.toLowerCase()))];
  const out = new Map<string, string>();
  // Bulk mail of a topic whose default is opt_out is also held back for every address that did
  // not opt in (migrations/0021), in the same statement; other mail's query is unchanged.
  const topic = scopes.find((s) => s.startsWith("bulk:"))?.slice("bulk:".length);
  const optIn =
    topic === undefined
      ? ""
      : `UNION ALL SELECT j.value AS address, 'bulk:' || t.id AS scope FROM topics t, json_each(?) j
      WHERE t.tenant_id = ? AND t.id = ? AND t.default_subscription = 'opt_out'
      AND NOT EXISTS (SELECT 1 FROM topic_opt_ins o WHERE o.tenant_id = t.tenant_id AND o.topic_id = t.id AND o.address = j.value)`;
  const step = 90 - scopes.length - (topic === undefined ? 0 : 3);
  for (let i = 0; i < lower.length; i += step) {
    const chunk = lower.slice(i, i + step);
    const r = await db
      .prepare(
        `SELECT address, scope FROM suppressions WHERE tenant_id IN (?, '*') AND (expires_at IS NULL OR expires_at > ?) ` +
          `AND scope IN (${scopes.map(() => "?").join(", ")}) ` +
          `AND address IN (${chunk.map(() => "?").join(", ")}) ${optIn}`,
      )
      .bind(tenant, nowMs, ...scopes, ...chunk, ...(topic === undefined ? [] : [JSON.stringify(chunk), tenant, topic]))
      .all<{ address: string; scope: string }>();
    for (const row of r.results) if (!out.has(row.address) || row.scope === "") out.set(row.address, row.scope);
  }
  return out;
}

/** An entry as suppressionRowsStatement reads it. */
export type SuppressionRow = { address: string; scope: string; expires_at: number | null };

/** See the header. */
export function suppressionRowsStatement(
  db: D1Database,
  keyHash: string,
  addresses: readonly string[],
  nowMs: number,
): D1PreparedStatement {
  return db
    .prepare(
      `SELECT address, scope, expires_at FROM suppressions WHERE tenant_id IN ((SELECT tenant_id FROM api_keys WHERE key_hash = ?1 AND revoked_at IS NULL), '*')
       AND address IN (SELECT value FROM json_each(?2)) AND (expires_at IS NULL OR expires_at > ?3)`,
    )
    .bind(keyHash, JSON.stringify(addresses), nowMs);
}

/** See the header: the same answer suppressedAmong gives for the same entries, or null for a topic's scopes. */
export function suppressedIn(
  rows: readonly SuppressionRow[],
  addresses: readonly string[],
  nowMs: number,
  scopes: readonly string[] = [""],
): Map<string, string> | null {
  if (scopes.some((s) => s.startsWith("bulk:"))) return null;
  const asked = new Set(addresses.map((a) => a.toLowerCase()));
  const out = new Map<string, string>();
  for (const row of rows) {
    if (!asked.has(row.address) || !scopes.includes(row.scope)) continue;
    if (row.expires_at !== null && row.expires_at <= nowMs) continue;
    if (!out.has(row.address) || row.scope === "") out.set(row.address, row.scope);
  }
  return out;
}
