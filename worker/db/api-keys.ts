/**
 * API keys in D1: generated once, stored only as their SHA-256, looked up by hash.
 *
 * DESCRIPTION
 *   generateApiKey   a new random key (`co_` + 32 base64url characters, 192 bits).
 *   hashApiKey       hex SHA-256 of a key; the only form ever stored.
 *   tenantForKey     the tenant owning a (non-revoked) key hash, or null.
 *   insertKeySql     the SQL that creates a tenant (if new) and a key hash, for the key scripts.
 *   insertApiKey     the same through a D1 binding (tests, future admin API).
 *
 * INVARIANTS
 *   No function here logs, returns or stores a key; only its hash reaches D1.
 */

const KEY_PREFIX = "co_";

/** A new API key. */
export function generateApiKey(): string {
  const bytes = new Uint8Array(24);
  crypto.getRandomValues(bytes);
  const b64 = btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");
  return KEY_PREFIX + b64;
}

/** Hex SHA-256 of `key`. */
export async function hashApiKey(key: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(key));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** The tenant of a non-revoked key hash, or null. */
export async function tenantForKey(db: D1Database, keyHash: string): Promise<string | null> {
  const row = await db
    .prepare("SELECT tenant_id FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL")
    .bind(keyHash)
    .first<{ tenant_id: string }>();
  return row?.tenant_id ?? null;
}

/** A tenant id: lowercase letters, digits, `-` and `_`, 1–64 characters. */
export function isTenantId(t: string): boolean {
  return /^[a-z0-9][a-z0-9_-]{0,63}$/.test(t);
}

function sqlString(s: string): string {
  return `'${s.replace(/'/g, "''")}'`;
}

/** SQL creating the tenant if new and the key hash (for `wrangler d1 execute --command`). */
export function insertKeySql(tenant: string, keyHash: string, name: string, nowMs: number): string {
  if (!isTenantId(tenant)) throw new RangeError(`invalid tenant id ${JSON.stringify(tenant)}`);
  if (!/^[0-9a-f]{64}$/.test(keyHash)) throw new RangeError("key hash must be hex SHA-256");
  const id = keyHash.slice(0, 16);
  return (
    `INSERT OR IGNORE INTO tenants (id, name, created_at) VALUES (${sqlString(tenant)}, ${sqlString(tenant)}, ${nowMs}); ` +
    `INSERT OR IGNORE INTO api_keys (id, tenant_id, key_hash, name, created_at) ` +
    `VALUES (${sqlString(id)}, ${sqlString(tenant)}, ${sqlString(keyHash)}, ${sqlString(name)}, ${nowMs});`
  );
}

/** Creates the tenant (if new) and a key for it; returns the key (show it once). */
export async function insertApiKey(db: D1Database, tenant: string, name = "", nowMs = Date.now()): Promise<string> {
  if (!isTenantId(tenant)) throw new RangeError(`invalid tenant id ${JSON.stringify(tenant)}`);
  const key = generateApiKey();
  const hash = await hashApiKey(key);
  await db.batch([
    db.prepare("INSERT OR IGNORE INTO tenants (id, name, created_at) VALUES (?, ?, ?)").bind(tenant, tenant, nowMs),
    db
      .prepare("INSERT INTO api_keys (id, tenant_id, key_hash, name, created_at) VALUES (?, ?, ?, ?, ?)")
      .bind(hash.slice(0, 16), tenant, hash, name, nowMs),
  ]);
  return key;
}
