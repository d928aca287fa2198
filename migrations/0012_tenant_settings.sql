-- A tenant's defaults for the mail it sends (GET/PATCH /relay/settings): `unsubscribe` is the
-- default of a send request's `unsubscribe` (JSON: true, or {"topic": "..."}; NULL: off). Read in
-- the same query that authenticates a send request (worker/db/domains.ts keyAccess): no extra
-- statement per email.
CREATE TABLE IF NOT EXISTS tenant_settings (
  tenant_id TEXT PRIMARY KEY,
  unsubscribe TEXT,
  updated_at INTEGER NOT NULL
) WITHOUT ROWID;
