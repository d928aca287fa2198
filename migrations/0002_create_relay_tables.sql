-- The accept path's index and configuration (issue #3). The Outbox Durable Objects hold the
-- authoritative queue; these tables are written asynchronously, in batches, by the classify
-- consumer, and read for listing, search, auth and routing. Forward-only.

-- Tenants own API keys, messages, events and (optionally) suppressions and routes.
CREATE TABLE tenants (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  created_at INTEGER NOT NULL
);

-- API keys, stored only as the hex SHA-256 of the key; the key itself is shown once.
CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  key_hash TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);

-- The message index (one row per accepted message), kept in step with its Outbox record.
CREATE TABLE messages (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  scheduled_at INTEGER,
  from_addr TEXT NOT NULL,
  to_json TEXT NOT NULL,
  cc_json TEXT,
  bcc_json TEXT,
  reply_to_json TEXT,
  subject TEXT,
  last_event TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX messages_by_tenant_time ON messages (tenant_id, created_at DESC, id DESC);

-- The recipient index: where each recipient is, for search ("what happened to a@x?").
CREATE TABLE recipients (
  message_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  tenant_id TEXT NOT NULL,
  address TEXT NOT NULL,
  status TEXT NOT NULL,
  transport TEXT,
  nexthop TEXT,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (message_id, idx)
);
CREATE INDEX recipients_by_address ON recipients (tenant_id, address);

-- The append-only event log. `seq` is monotonic per tenant; `source_key` (Outbox event id)
-- makes forwarding idempotent under at-least-once delivery.
CREATE TABLE events (
  tenant_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  source_key TEXT NOT NULL UNIQUE,
  type TEXT NOT NULL,
  email_id TEXT NOT NULL,
  recipient TEXT,
  created_at INTEGER NOT NULL,
  data TEXT NOT NULL DEFAULT '{}',
  PRIMARY KEY (tenant_id, seq)
);
CREATE INDEX events_by_email ON events (email_id);

-- Suppressed recipients. tenant_id '*' suppresses the address for every tenant;
-- expires_at NULL means until removed.
CREATE TABLE suppressions (
  tenant_id TEXT NOT NULL,
  address TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT 'manual',
  created_at INTEGER NOT NULL,
  expires_at INTEGER,
  PRIMARY KEY (tenant_id, address)
);

-- Transports: a name, and a fixed nexthop (a smarthost such as "[smtp.example.net]:587") or
-- NULL to deliver to the recipient domain.
CREATE TABLE transports (
  name TEXT PRIMARY KEY,
  nexthop TEXT,
  config TEXT NOT NULL DEFAULT '{}'
);

-- Routes: a domain pattern ("example.com", "*.example.com" for subdomains, "*" for all) to a
-- transport, optionally with its own nexthop; tenant_id NULL applies to every tenant.
-- The most specific pattern wins; a tenant's own route beats a global one of equal specificity.
CREATE TABLE routes (
  id INTEGER PRIMARY KEY,
  tenant_id TEXT,
  pattern TEXT NOT NULL,
  transport TEXT NOT NULL REFERENCES transports(name),
  nexthop TEXT,
  UNIQUE (tenant_id, pattern)
);
