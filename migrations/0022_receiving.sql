-- Received mail (Resend's emails.receiving; issue 38). Mail to a verified domain whose receiving
-- capability is enabled reaches the email() handler through Email Routing; its raw bytes go to R2
-- (`raw_key`) and its parsed fields here. `id` is a UUIDv7, so the primary key orders a tenant's
-- mail by arrival: listing, the daily quota's count and retention are range reads of it, and the
-- table needs no other index (one row written per received message).
CREATE TABLE received_emails (
  tenant_id TEXT NOT NULL,
  id TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  domain_id TEXT NOT NULL,
  envelope_from TEXT NOT NULL,
  from_addr TEXT NOT NULL,
  to_json TEXT NOT NULL,
  cc_json TEXT,
  bcc_json TEXT,
  reply_to_json TEXT,
  received_for_json TEXT NOT NULL,
  subject TEXT NOT NULL,
  message_id TEXT,
  headers_json TEXT NOT NULL,
  attachments_json TEXT NOT NULL,
  raw_key TEXT NOT NULL,
  size INTEGER NOT NULL,
  PRIMARY KEY (tenant_id, id)
) WITHOUT ROWID;

-- A domain's receiving capability (PATCH /domains/:id {capabilities: {receiving}}): off until
-- enabled.
ALTER TABLE domains ADD COLUMN receiving INTEGER NOT NULL DEFAULT 0;

-- A tenant's own limit of received messages per UTC day (PATCH /relay/settings); NULL: the
-- operator's RECEIVING_DAILY_QUOTA.
ALTER TABLE tenant_settings ADD COLUMN receiving_daily_quota INTEGER;
