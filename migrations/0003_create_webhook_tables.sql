-- Webhook endpoints per tenant (issue 5). Signing secrets are stored encrypted
-- (AES-GCM under the WEBHOOK_SECRETS_KEY secret): the relay must sign with them, so they
-- cannot be hashed, and they are shown to the user only when created or rotated.
CREATE TABLE IF NOT EXISTS webhook_endpoints (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  endpoint TEXT NOT NULL,
  events TEXT,                      -- JSON array of event types, NULL = every event
  status TEXT NOT NULL DEFAULT 'enabled' CHECK (status IN ('enabled', 'disabled')),
  disabled_reason TEXT,
  secret_enc TEXT NOT NULL,         -- the current signing secret, encrypted
  previous_secret_enc TEXT,         -- the secret before the last rotation, encrypted
  previous_valid_until INTEGER,     -- ms since epoch: until then both secrets sign
  created_at INTEGER NOT NULL,      -- ms since epoch
  updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS webhook_endpoints_by_tenant ON webhook_endpoints (tenant_id, created_at DESC, id);
