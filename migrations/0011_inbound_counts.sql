-- Mail that came back to the relay through Email Routing (worker/inbound/email.ts), counted per
-- UTC day and kind (bounce, delay, auto_reply, complaint, rejected, ...): one row per day and
-- kind, upserted, so counting costs one row written per inbound message and the table holds a
-- few rows a day. D1 retention (worker/db/retention.ts) deletes days past MESSAGE_RETENTION_DAYS.
CREATE TABLE IF NOT EXISTS inbound_counts (
  day TEXT NOT NULL,
  kind TEXT NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (day, kind)
) WITHOUT ROWID;
