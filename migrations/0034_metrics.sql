-- GET /metrics (issue 39; worker/metrics/). Forward-only.

-- Send requests refused (answers of 400 or more to POST /emails, /emails/batch and
-- /relay/messages/raw) per UTC day, error name and status, written by each isolate at most every
-- 10 s (worker/api/http/refusals.ts). Kept 30 days (the TLS-RPT cron purges it).
CREATE TABLE accept_refusals (
  day TEXT NOT NULL,
  reason TEXT NOT NULL,
  status INTEGER NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (day, reason, status)
) WITHOUT ROWID;

-- The webhook backlog: envelopes whose claim for the webhooks queue was given up (the enqueue
-- failed) and not taken again, counted through this partial index (it holds only those) instead
-- of a scan of the event log.
CREATE INDEX event_log_unclaimed ON event_log (created_at) WHERE event_id IS NOT NULL AND enqueued_at IS NULL;
