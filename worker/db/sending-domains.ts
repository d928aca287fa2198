/**
 * What the send path reads of sending domains and their DKIM keys in D1 (migrations/0008): the
 * rest of the domains table's queries are domains.ts.
 *
 * DESCRIPTION
 *   sendingDomains(db, tenant, names)  of `names`, the tenant's verified domains with their
 *                                active key (sealed): what the accept path may sign with.
 *   keyAccess(db, hash, withDomains)  a live key's tenant, role, permission and domain restriction,
 *                                (with `withDomains` also the tenant's default `unsubscribe` and
 *                                the complaint-rate brake's bulk_paused_until),
 *                                and with `withDomains` (the send endpoints) the tenant's verified
 *                                domains with their active selector, in the same query.
 *   keyAccessStatement / keyAccessOf  the same as a statement to batch and its row's reading.
 *   sealedKey(db, domainId, selector)  the sealed private key of one domain key.
 */

/** A verified sending domain of the tenant with its active key. */
export interface SendingDomain {
  id: string;
  name: string;
  /** The return-path host's label (`send`: VERP senders at send.<name>). */
  return_path: string;
  selector: string;
  algorithm: string;
  private_sealed: string;
  /** DomainRow.dmarc. */
  dmarc: string | null;
}

export async function sendingDomains(
  db: D1Database,
  tenant: string,
  names: readonly string[],
): Promise<SendingDomain[]> {
  if (names.length === 0) return [];
  return (
    await db
      .prepare(
        `SELECT d.id, d.name, d.return_path, k.selector, k.algorithm, k.private_sealed, d.dmarc FROM domains d
      JOIN domain_keys k ON k.domain_id = d.id AND k.state = 'active'
      WHERE d.tenant_id = ? AND d.status = 'verified' AND d.name IN (SELECT value FROM json_each(?))`,
      )
      .bind(tenant, JSON.stringify(names))
      .all<SendingDomain>()
  ).results;
}

/** A verified domain of the key's tenant and its active DKIM selector. */
export interface VerifiedDomain {
  id: string;
  name: string;
  return_path: string;
  selector: string;
  algorithm: string;
  /** DomainRow.dmarc. */
  dmarc: string | null;
}

/** What a live key may do. */
export interface KeyAccess {
  id: string;
  tenant: string;
  role: "tenant" | "operator";
  permission: "full_access" | "sending_access";
  domainId: string | null;
  domainName: string | null;
  /** The tenant's verified domains (send endpoints only; null when not asked for). */
  verified: VerifiedDomain[] | null;
  /** The tenant's default `unsubscribe` (tenant_settings; send endpoints only, else null). */
  unsubscribe: true | { topic?: string } | null;
  /** Until when the complaint-rate brake holds the tenant's bulk mail (epoch ms; send endpoints only). */
  bulkPausedUntil: number | null;
  /** The tenant's compliance setting (tenant_settings; send endpoints only): "strict" refuses what the compliance check warns of. */
  compliance?: "warn" | "strict";
}

/** The row keyAccessStatement reads. */
export type KeyRow = {
  id: string;
  tenant_id: string;
  role: "tenant" | "operator";
  permission: "full_access" | "sending_access";
  domain_id: string | null;
  domain_name: string | null;
  verified: string | null;
  settings: string | null;
};

/** keyAccess's one statement (bound to the key's hash), for a caller that batches it with others. */
export function keyAccessStatement(db: D1Database, keyHash: string, withDomains = false): D1PreparedStatement {
  const domains = withDomains
    ? `(SELECT json_group_array(json_array(vd.id, vd.name, vk.selector, vk.algorithm, vd.return_path, vd.dmarc)) FROM domains vd
         JOIN domain_keys vk ON vk.domain_id = vd.id AND vk.state = 'active' WHERE vd.tenant_id = k.tenant_id AND vd.status = 'verified')`
    : "NULL";
  const settings = withDomains
    ? "(SELECT json_array(unsubscribe, bulk_paused_until, compliance) FROM tenant_settings WHERE tenant_id = k.tenant_id)"
    : "NULL";
  return db
    .prepare(
      `SELECT k.id, k.tenant_id, k.role, k.permission, k.domain_id, d.name AS domain_name, ${domains} AS verified, ${settings} AS settings FROM api_keys k
      LEFT JOIN domains d ON d.id = k.domain_id WHERE k.key_hash = ? AND k.revoked_at IS NULL`,
    )
    .bind(keyHash);
}

/** What keyAccessStatement's row (or its absence) says of the key. */
export function keyAccessOf(row: KeyRow | null | undefined): KeyAccess | null {
  if (!row) return null;
  const verified =
    row.verified === null
      ? null
      : (JSON.parse(row.verified) as [string, string, string, string, string, string | null][]).map(
          ([id, name, selector, algorithm, rp, dmarc]) => ({ id, name, selector, algorithm, return_path: rp, dmarc }),
        );
  const [unsub, pausedUntil, compliance] =
    row.settings === null
      ? [null, null, null]
      : (JSON.parse(row.settings) as [string | null, number | null, string | null]);
  const unsubscribe = unsub === null ? null : (JSON.parse(unsub) as true | { topic?: string });
  return {
    id: row.id,
    tenant: row.tenant_id,
    role: row.role,
    permission: row.permission,
    domainId: row.domain_id,
    domainName: row.domain_name,
    verified,
    unsubscribe,
    bulkPausedUntil: pausedUntil,
    compliance: compliance === "strict" ? "strict" : "warn",
  };
}

export async function keyAccess(db: D1Database, keyHash: string, withDomains = false): Promise<KeyAccess | null> {
  return keyAccessOf(await keyAccessStatement(db, keyHash, withDomains).first<KeyRow>());
}

/** The sealed private key of one domain key, or null. */
export async function sealedKey(db: D1Database, domainId: string, selector: string): Promise<string | null> {
  return db
    .prepare("SELECT private_sealed FROM domain_keys WHERE domain_id = ? AND selector = ?")
    .bind(domainId, selector)
    .first<string>("private_sealed");
}
