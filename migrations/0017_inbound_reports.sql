-- Reports that came back by mail (worker/inbound/email.ts, issue 37): every DSN and ARF report
-- the email() handler takes, with what became of it, so an operator sees the reports that changed
-- nothing (unauthenticated, naming another recipient than their VERP address, about no message of
-- this relay) beside those that did. GET /relay/inbound/reports lists them (operator only).
--   verdict   acted | duplicate | unmatched | mismatch | unauthenticated | not_delivered | info
--   detail    JSON: the recipients as read (address, action, status, reason), the evidence
--             (verified DKIM domains, SPF domains) and the reason for the verdict
--   raw       the first INBOUND_STORED_BYTES of the message (latin1 text); raw_size its full size
-- A report is one row per (its own Message-ID, the address it came to): the same report again is a
-- duplicate, counted once. D1 retention (worker/db/retention.ts) deletes rows past
-- MESSAGE_RETENTION_DAYS.
CREATE TABLE IF NOT EXISTS inbound_reports (
  id TEXT PRIMARY KEY,
  received_at INTEGER NOT NULL,
  kind TEXT NOT NULL,
  verdict TEXT NOT NULL,
  email_id TEXT,
  tenant_id TEXT,
  envelope_from TEXT NOT NULL,
  envelope_to TEXT NOT NULL,
  message_id TEXT,
  detail TEXT NOT NULL,
  raw TEXT NOT NULL,
  raw_size INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS inbound_reports_by_time ON inbound_reports (received_at);
CREATE UNIQUE INDEX IF NOT EXISTS inbound_reports_once ON inbound_reports (message_id, envelope_to) WHERE message_id IS NOT NULL;
