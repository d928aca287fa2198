-- The operator surface (issue 6): an operator role on API keys, message tags for search, and
-- indexes for the admin API's queue counts, search and throughput. Forward-only.

-- 'tenant' keys see their own tenant's mail; 'operator' keys may also use the /relay/ admin
-- routes (queue, destinations, flush, suspensions, stats) and search every tenant's mail.
ALTER TABLE api_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'tenant' CHECK (role IN ('tenant', 'operator'));

-- A message's tags (Resend's {name, value}), written with the message index, for search.
CREATE TABLE IF NOT EXISTS message_tags (
  message_id TEXT NOT NULL,
  tenant_id TEXT NOT NULL,
  name TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (message_id, name, value)
);
CREATE INDEX IF NOT EXISTS message_tags_by_tag ON message_tags (tenant_id, name, value);
CREATE INDEX IF NOT EXISTS message_tags_by_tag_any_tenant ON message_tags (name, value);

-- Counts by state, transport and destination; searching by state.
CREATE INDEX IF NOT EXISTS recipients_by_status ON recipients (status, transport, nexthop);
-- Searching by address across tenants (operators; addresses compare case-insensitively).
CREATE INDEX IF NOT EXISTS recipients_by_address_any_tenant ON recipients (address COLLATE NOCASE);
-- Throughput per minute over a window.
CREATE INDEX IF NOT EXISTS events_by_time ON events (created_at, type);
