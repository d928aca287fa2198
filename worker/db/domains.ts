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
 *   sendingDomains / keyAccess / sealedKey  (sending-domains.ts) what the send path reads.
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

/** See the header. */
export async function verifiedOwners(db: D1Database, names: readonly string[]): Promise<Map<string, string>> {
  if (names.length === 0) return new Map();
  return ownersOf((await verifiedOwnersStatement(db, names).all<OwnerRow>()).results);
}

/** A row of verifiedOwnersStatement. */
export type OwnerRow = { name: string; tenant_id: string };

/** verifiedOwners' one statement, for a caller that batches it with others (`names` not empty). */
export function verifiedOwnersStatement(db: D1Database, names: readonly string[]): D1PreparedStatement {
  return db
    .prepare(
      "SELECT name, tenant_id FROM domains WHERE verified_at IS NOT NULL AND name IN (SELECT value FROM json_each(?))",
    )
    .bind(JSON.stringify(names));
}

/** verifiedOwners' answer from its statement's rows. */
export function ownersOf(rows: readonly OwnerRow[]): Map<string, string> {
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
