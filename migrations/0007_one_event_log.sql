-- One event log instead of two, and fewer index entries per message (design/cost.md: every index
-- entry written is a row written). Forward-only; 0002–0006 stay as applied.
--
-- event_log replaces `events` (the Outbox transitions: message timeline, throughput) and
-- `event_feed` (the envelopes pushed to webhooks: pull feed, replay). A transition that is pushed
-- carries its envelope on the same row; a message-level email.canceled that expands to several
-- envelopes stores the others on rows of their own (part 1, 2, …, `data` NULL).
--   seq          per tenant, monotonic in insertion order (the feed's order), never reused, and
--                never below created_at * 1000: a time range starts its scan of the primary key
--                at from * 1000, so no time index is needed (replay, throughput, retention).
--   email_id, source_seq, part   the Outbox event (`<email id>`, its Outbox seq) and which of its
--                envelopes: unique, so forwarding is idempotent; also the message timeline's index.
--   data         the transition's data (JSON); NULL on a row that only carries an envelope.
--   event_id, event_type, body   the envelope (webhook-id, its type, the JSON text pushed and
--                signed); NULL for a transition that is not pushed (accepted, scheduled, a
--                deferral without notice).
--   enqueued_at  ms: when the envelope was claimed for the webhooks queue. The publication that
--                inserts the row holds the claim; another may take it only after a lease.
-- WITHOUT ROWID: the primary key is the table, so it needs no index of its own.
CREATE TABLE event_log (
  tenant_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  email_id TEXT NOT NULL,
  source_seq INTEGER NOT NULL,
  part INTEGER NOT NULL DEFAULT 0,
  type TEXT NOT NULL,
  recipient TEXT,
  created_at INTEGER NOT NULL,
  data TEXT,
  event_id TEXT,
  event_type TEXT,
  body TEXT,
  enqueued_at INTEGER,
  PRIMARY KEY (tenant_id, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX event_log_by_source ON event_log (email_id, source_seq, part);
-- Only pushed rows have an entry: the feed cursor, replay's `after`/`until`, the claim.
CREATE UNIQUE INDEX event_log_by_event_id ON event_log (event_id) WHERE event_id IS NOT NULL;

-- The old logs, moved over. seq = a running maximum of created_at * 1000 in the old order, plus
-- twice the row number (feed rows even, transitions odd), so the old feed order is kept, every
-- seq is unique and at least created_at * 1000, and new rows (which continue from the maximum)
-- come after. Old feed rows keep their envelope; old transitions are rows without one.
INSERT INTO event_log (tenant_id, seq, email_id, source_seq, part, type, recipient, created_at, data, event_id, event_type, body, enqueued_at)
SELECT tenant_id,
  MAX(created_at * 1000) OVER (PARTITION BY tenant_id ORDER BY seq ROWS UNBOUNDED PRECEDING) + 2 * ROW_NUMBER() OVER (PARTITION BY tenant_id ORDER BY seq),
  email_id, -seq, 0, type, recipient, created_at, NULL, event_id, type, body, enqueued_at
FROM event_feed;
INSERT INTO event_log (tenant_id, seq, email_id, source_seq, part, type, recipient, created_at, data, event_id, event_type, body, enqueued_at)
SELECT tenant_id,
  MAX(created_at * 1000) OVER (PARTITION BY tenant_id ORDER BY seq ROWS UNBOUNDED PRECEDING) + 2 * ROW_NUMBER() OVER (PARTITION BY tenant_id ORDER BY seq) + 1,
  email_id, CAST(substr(source_key, length(email_id) + 2) AS INTEGER), 0, type, recipient, created_at, data, NULL, NULL, NULL, NULL
FROM events;
DROP TABLE events;
DROP TABLE event_feed;

-- The message index without a separate primary-key index (WITHOUT ROWID). message_id holds only
-- a Message-ID the sender set: the relay's own (`<email id@domain>`) names the email already, so
-- the complaint lookup needs no index entry for it.
CREATE TABLE messages_v2 (
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
  updated_at INTEGER NOT NULL,
  message_id TEXT
) WITHOUT ROWID;
INSERT INTO messages_v2 (id, tenant_id, created_at, scheduled_at, from_addr, to_json, cc_json, bcc_json, reply_to_json, subject, last_event, updated_at, message_id)
SELECT id, tenant_id, created_at, scheduled_at, from_addr, to_json, cc_json, bcc_json, reply_to_json, subject, last_event, updated_at,
  CASE WHEN message_id = '<' || id || substr(message_id, length(id) + 2) AND substr(message_id, length(id) + 2, 1) = '@' THEN NULL ELSE message_id END
FROM messages;
DROP TABLE messages;
ALTER TABLE messages_v2 RENAME TO messages;
-- Listing, search and retention (per tenant, oldest first).
CREATE INDEX messages_by_tenant_time ON messages (tenant_id, created_at DESC, id DESC);
CREATE INDEX messages_by_message_id ON messages (message_id) WHERE message_id IS NOT NULL;

-- The recipient index without a separate primary-key index, and without recipients_by_address
-- (tenant_id, address): search compares addresses case-insensitively, which only the NOCASE
-- index serves (the tenant is checked on the message).
CREATE TABLE recipients_v2 (
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
) WITHOUT ROWID;
INSERT INTO recipients_v2 SELECT message_id, idx, tenant_id, address, status, transport, nexthop, attempts, next_attempt_at, updated_at FROM recipients;
DROP TABLE recipients;
ALTER TABLE recipients_v2 RENAME TO recipients;
CREATE INDEX recipients_by_status ON recipients (status, transport, nexthop);
CREATE INDEX recipients_by_address_any_tenant ON recipients (address COLLATE NOCASE);
