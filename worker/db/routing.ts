/**
 * Routing configuration from D1: routes (domain pattern → transport) and transports, and
 * suppressed recipients.
 *
 * DESCRIPTION
 *   loadRouting(db)                       every route and transport (small tables), read once
 *                                         per classify batch.
 *   suppressedAmong(db, tenant, addrs, nowMs)  the addresses (lower-cased) suppressed for the
 *                                         tenant or for every tenant (`'*'`) and not expired.
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
    transports: new Map(((transports?.results ?? []) as { name: string; nexthop: string | null }[]).map((t) => [t.name, t.nexthop])),
  };
}

/** The subset of `addresses` suppressed for `tenant` at `nowMs` (lower-cased). */
export async function suppressedAmong(db: D1Database, tenant: string, addresses: string[], nowMs: number): Promise<Set<string>> {
  const lower = [...new Set(addresses.map((a) => a.toLowerCase()))];
  const out = new Set<string>();
  for (let i = 0; i < lower.length; i += 90) {
    const chunk = lower.slice(i, i + 90);
    const r = await db.prepare(
      `SELECT address FROM suppressions WHERE tenant_id IN (?, '*') AND (expires_at IS NULL OR expires_at > ?) AND address IN (${chunk.map(() => "?").join(", ")})`,
    ).bind(tenant, nowMs, ...chunk).all<{ address: string }>();
    for (const row of r.results) out.add(row.address);
  }
  return out;
}
