-- Sending domains per tenant, with their own DKIM keys, and API keys in Resend's shape
-- (issue 12). Forward-only.

-- A tenant's sending domain. `name` is unique: two tenants cannot both claim one domain.
-- `records` is the JSON list of DNS records to publish, each with its verification status.
CREATE TABLE domains (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  name TEXT NOT NULL UNIQUE,
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
CREATE INDEX domains_by_tenant ON domains (tenant_id, created_at);

-- A domain's DKIM keys: the private key sealed with WEBHOOK_SECRETS_KEY (AES-256-GCM), never
-- returned. state: 'active' signs; 'next' is published for a rotation and becomes active once
-- verified; 'retired' is kept until the domain goes.
CREATE TABLE domain_keys (
  domain_id TEXT NOT NULL,
  selector TEXT NOT NULL,
  algorithm TEXT NOT NULL,
  public_key TEXT NOT NULL,
  private_sealed TEXT NOT NULL,
  state TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (domain_id, selector)
);

-- Resend's API key permissions: 'full_access' or 'sending_access' (send only, and only from
-- `domain_id` when set).
ALTER TABLE api_keys ADD COLUMN permission TEXT NOT NULL DEFAULT 'full_access' CHECK (permission IN ('full_access', 'sending_access'));
ALTER TABLE api_keys ADD COLUMN domain_id TEXT;
