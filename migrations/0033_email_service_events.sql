-- Cloudflare Email Service's sending events (issue 39; worker/inbound/email-service.ts).
-- Forward-only.

-- The service's message id of every recipient the cf-email egress handed to it, so that the
-- service's events (keyed by its own message id) find the recipient. Deleted with the message's
-- other rows after MESSAGE_RETENTION_DAYS (worker/db/retention.ts).
CREATE TABLE cf_email_sends (
  cf_message_id TEXT PRIMARY KEY,
  email_id TEXT NOT NULL,
  address TEXT NOT NULL,
  created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX cf_email_sends_by_time ON cf_email_sends (created_at);
