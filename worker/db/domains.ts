/**
 * Sending domains and their DKIM keys in D1 (migrations/0008).
 *
 * DESCRIPTION
 *   insertDomain(db, d, key)     a new claim on a domain with its first (active) key; "taken" when
 *                                this tenant already claims the name (other tenants' unverified
 *                                claims coexist: migrations/0018).
 *   listDomains / getDomain      a tenant's domains; another tenant's id is not found.
 *   updateDomain(db, t, id, f)   tracking and TLS settings, and the receiving capability.
 *   deleteDomain(db, t, id)      the domain and its keys.
 *   saveVerification(db, id, records, status, nowMs)  per-record and domain status after a check.
 *   domainKeys / addKey / setKeyStates  the keys of a domain, for rotation.
 *   sendingDomains(db, tenant, names)  of `names`, the tenant's verified domains with their
 *                                active key (sealed): what the accept path may sign with.
 *   keyAccess(db, hash, withDomains)  a live key's tenant, role, permission and domain restriction,
 *                                (with `withDomains` also the tenant's default `unsubscribe` and
 *                                the complaint-rate brake's bulk_paused_until),
 *                                and with `withDomains` (the send endpoints) the tenant's verified
 *                                domains with their active selector, in the same query.
 *   sealedKey(db, domainId, selector)  the sealed private key of one domain key.
 *   verifiedOwners(db, names)    of `names`, those a tenant verified, with that tenant (name →
 *                                tenant; through domains_owner).
 *   claimOwnership(db, d, records, nowMs)  `d` becomes verified and its tenant the name's owner, and
 *                                the other tenants' unverified claims on the name lapse, in one
 *                                batch; "taken" when another tenant verified the name meanwhile.
 *   deleteLapsedClaims(db, cutoffMs)  the unverified claims made before cutoffMs go, with their keys.
 */
import type { DomainRecord, DomainStatus } from "../model/domain";

export interface DomainRow {
  id: string;
  tenant_id: string;
  name: string;
  status: DomainStatus;
  region: string;
  return_path: string;
  open_tracking: number;
  click_tracking: number;
  tls: string;
  records: string;
  created_at: number;
  verified_at: number | null;
  /** Receiving enabled (1) or not (0; migrations/0022). */
  receiving?: number;
  /** DMARC facts found at the last verification (compliance/core/dmarc.ts DmarcFacts, JSON), or null. */
  dmarc?: string | null;
}

export interface KeyRow {
  domain_id: string;
  selector: string;
  algorithm: string;
  public_key: string;
  private_sealed: string;
  state: "active" | "next" | "retired";
  created_at: number;
}

/** Inserts a domain and its first key; "taken" when the name is already claimed. */
export async function insertDomain(db: D1Database, d: DomainRow, key: KeyRow): Promise<"ok" | "taken"> {
  try {
    await db.batch([
      db
        .prepare(
          "INSERT INTO domains (id, tenant_id, name, status, region, return_path, open_tracking, click_tracking, tls, records, created_at) " +
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(
          d.id,
          d.tenant_id,
          d.name,
          d.status,
          d.region,
          d.return_path,
          d.open_tracking,
          d.click_tracking,
          d.tls,
          d.records,
          d.created_at,
        ),
      db
        .prepare(
          "INSERT INTO domain_keys (domain_id, selector, algorithm, public_key, private_sealed, state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(
          key.domain_id,
          key.selector,
          key.algorithm,
          key.public_key,
          key.private_sealed,
          key.state,
          key.created_at,
        ),
    ]);
    return "ok";
  } catch (e) {
    if (/UNIQUE constraint failed: domains\./i.test(String(e instanceof Error ? e.message : e))) return "taken";
    throw e;
  }
}

export async function listDomains(db: D1Database, tenant: string): Promise<DomainRow[]> {
  return (
    await db
      .prepare("SELECT * FROM domains WHERE tenant_id = ? ORDER BY created_at DESC, id DESC")
      .bind(tenant)
      .all<DomainRow>()
  ).results;
}

export async function getDomain(db: D1Database, tenant: string, id: string): Promise<DomainRow | null> {
  return db.prepare("SELECT * FROM domains WHERE id = ? AND tenant_id = ?").bind(id, tenant).first<DomainRow>();
}

export async function updateDomain(
  db: D1Database,
  tenant: string,
  id: string,
  f: { open_tracking?: boolean; click_tracking?: boolean; tls?: string; receiving?: boolean },
): Promise<boolean> {
  const flag = (b: boolean | undefined) => (b === undefined ? null : Number(b));
  const r = await db
    .prepare(
      `UPDATE domains SET open_tracking = COALESCE(?, open_tracking), click_tracking = COALESCE(?, click_tracking),
    tls = COALESCE(?, tls), receiving = COALESCE(?, receiving) WHERE id = ? AND tenant_id = ?`,
    )
    .bind(flag(f.open_tracking), flag(f.click_tracking), f.tls ?? null, flag(f.receiving), id, tenant)
    .run();
  return (r.meta.changes ?? 0) > 0;
}

export async function deleteDomain(db: D1Database, tenant: string, id: string): Promise<boolean> {
  const [gone] = await db.batch([
    db.prepare("DELETE FROM domains WHERE id = ? AND tenant_id = ?").bind(id, tenant),
    db
      .prepare("DELETE FROM domain_keys WHERE domain_id = ? AND NOT EXISTS (SELECT 1 FROM domains WHERE id = ?)")
      .bind(id, id),
  ]);
  return (gone!.meta.changes ?? 0) > 0;
}

export async function saveVerification(
  db: D1Database,
  id: string,
  records: DomainRecord[],
  status: DomainStatus,
  nowMs: number,
  dmarc?: object | null,
): Promise<void> {
  await db
    .prepare(
      `UPDATE domains SET records = ?, status = ?, verified_at = CASE WHEN ? = 'verified' THEN COALESCE(verified_at, ?) ELSE verified_at END,
      dmarc = COALESCE(?, dmarc) WHERE id = ?`,
    )
    .bind(JSON.stringify(records), status, status, nowMs, dmarc ? JSON.stringify(dmarc) : null, id)
    .run();
}

export async function domainKeys(db: D1Database, domainId: string): Promise<KeyRow[]> {
  return (
    await db.prepare("SELECT * FROM domain_keys WHERE domain_id = ? ORDER BY created_at").bind(domainId).all<KeyRow>()
  ).results;
}

export async function addKey(db: D1Database, key: KeyRow): Promise<void> {
  await db
    .prepare(
      "INSERT INTO domain_keys (domain_id, selector, algorithm, public_key, private_sealed, state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(key.domain_id, key.selector, key.algorithm, key.public_key, key.private_sealed, key.state, key.created_at)
    .run();
}

/** Promotes `next` to active and retires the former active key, in one batch. */
export async function promoteKey(db: D1Database, domainId: string, selector: string): Promise<void> {
  await db.batch([
    db.prepare("UPDATE domain_keys SET state = 'retired' WHERE domain_id = ? AND state = 'active'").bind(domainId),
    db.prepare("UPDATE domain_keys SET state = 'active' WHERE domain_id = ? AND selector = ?").bind(domainId, selector),
  ]);
}

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

export async function keyAccess(db: D1Database, keyHash: string, withDomains = false): Promise<KeyAccess | null> {
  const domains = withDomains
    ? `(SELECT json_group_array(json_array(vd.id, vd.name, vk.selector, vk.algorithm, vd.return_path, vd.dmarc)) FROM domains vd
         JOIN domain_keys vk ON vk.domain_id = vd.id AND vk.state = 'active' WHERE vd.tenant_id = k.tenant_id AND vd.status = 'verified')`
    : "NULL";
  const settings = withDomains
    ? "(SELECT json_array(unsubscribe, bulk_paused_until, compliance) FROM tenant_settings WHERE tenant_id = k.tenant_id)"
    : "NULL";
  const row = await db
    .prepare(
      `SELECT k.id, k.tenant_id, k.role, k.permission, k.domain_id, d.name AS domain_name, ${domains} AS verified, ${settings} AS settings FROM api_keys k
      LEFT JOIN domains d ON d.id = k.domain_id WHERE k.key_hash = ? AND k.revoked_at IS NULL`,
    )
    .bind(keyHash)
    .first<{
      id: string;
      tenant_id: string;
      role: "tenant" | "operator";
      permission: "full_access" | "sending_access";
      domain_id: string | null;
      domain_name: string | null;
      verified: string | null;
      settings: string | null;
    }>();
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

/** The sealed private key of one domain key, or null. */
export async function sealedKey(db: D1Database, domainId: string, selector: string): Promise<string | null> {
  return db
    .prepare("SELECT private_sealed FROM domain_keys WHERE domain_id = ? AND selector = ?")
    .bind(domainId, selector)
    .first<string>("private_sealed");
}

/** See the header. */
export async function verifiedOwners(db: D1Database, names: readonly string[]): Promise<Map<string, string>> {
  if (names.length === 0) return new Map();
  const rows = (
    await db
      .prepare(
        "SELECT name, tenant_id FROM domains WHERE verified_at IS NOT NULL AND name IN (SELECT value FROM json_each(?))",
      )
      .bind(JSON.stringify(names))
      .all<{ name: string; tenant_id: string }>()
  ).results;
  return new Map(rows.map((r) => [r.name, r.tenant_id]));
}

/** See the header. */
export async function claimOwnership(
  db: D1Database,
  d: DomainRow,
  records: DomainRecord[],
  nowMs: number,
  dmarc?: object | null,
): Promise<"ok" | "taken"> {
  const others = "FROM domains WHERE name = ?1 AND id != ?2 AND verified_at IS NULL";
  try {
    await db.batch([
      db
        .prepare(
          "UPDATE domains SET records = ?, status = 'verified', verified_at = COALESCE(verified_at, ?), dmarc = COALESCE(?, dmarc) WHERE id = ?",
        )
        .bind(JSON.stringify(records), nowMs, dmarc ? JSON.stringify(dmarc) : null, d.id),
      db.prepare(`DELETE FROM domain_keys WHERE domain_id IN (SELECT id ${others})`).bind(d.name, d.id),
      db.prepare(`DELETE ${others}`).bind(d.name, d.id),
    ]);
    return "ok";
  } catch (e) {
    if (/UNIQUE constraint failed: domains\.name/i.test(String(e instanceof Error ? e.message : e))) return "taken";
    throw e;
  }
}

/** See the header. */
export async function deleteLapsedClaims(db: D1Database, cutoffMs: number): Promise<number> {
  const lapsed = "FROM domains WHERE verified_at IS NULL AND created_at < ?";
  const [, gone] = await db.batch([
    db.prepare(`DELETE FROM domain_keys WHERE domain_id IN (SELECT id ${lapsed})`).bind(cutoffMs),
    db.prepare(`DELETE ${lapsed}`).bind(cutoffMs),
  ]);
  return gone!.meta.changes ?? 0;
}
