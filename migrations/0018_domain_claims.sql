-- Domain names: claims coexist, verification is exclusive (issue 37, item 2). A name is no longer
-- reserved for good by whoever asks first: several tenants may hold an unverified claim on one
-- name; the first to verify it owns it (verified_at set) and the others' claims lapse. Unverified
-- claims lapse after DOMAIN_CLAIM_TTL_HOURS (the cron deletes them).
-- SQLite cannot drop the column constraint `name UNIQUE` of 0008, so the table is rebuilt with the
-- same columns, and the two rules become indexes:
--   domains_claim   one claim per tenant and name;
--   domains_owner   at most one tenant has verified a name;
--   domains_claims_by_age  the unverified claims by age, for the lapse.
-- A domain verified before this migration without verified_at gets its created_at.
CREATE TABLE domains_next (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  name TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'not_started',
  region TEXT NOT NULL DEFAULT 'us-east-1',
  return_path TEXT NOT NULL DEFAULT 'send',
  open_tracking INTEGER NOT NULL DEFAULT 0,
  click_tracking INTEGER NOT NULL DEFAULT 0,
  tls TEXT NOT NULL DEFAULT 'opportunistic',
  records TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  verified_at INTEGER
);
INSERT INTO domains_next (id, tenant_id, name, status, region, return_path, open_tracking, click_tracking, tls, records, created_at, verified_at)
  SELECT id, tenant_id, name, status, region, return_path, open_tracking, click_tracking, tls, records, created_at,
    CASE WHEN verified_at IS NULL AND status = 'verified' THEN created_at ELSE verified_at END
  FROM domains;
DROP TABLE domains;
ALTER TABLE domains_next RENAME TO domains;
CREATE INDEX domains_by_tenant ON domains (tenant_id, created_at);
CREATE UNIQUE INDEX domains_claim ON domains (tenant_id, name);
CREATE UNIQUE INDEX domains_owner ON domains (name) WHERE verified_at IS NOT NULL;
CREATE INDEX domains_by_name ON domains (name);
CREATE INDEX domains_claims_by_age ON domains (created_at) WHERE verified_at IS NULL;
