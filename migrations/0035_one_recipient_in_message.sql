-- A message of one recipient keeps it in its own index row (issue 41; worker/db/messages.ts),
-- not in a recipients row: the recipients row, its address index entry and its delete at
-- retention were 3 rows written per one-recipient email. Forward-only.

ALTER TABLE messages ADD COLUMN r_address TEXT;
ALTER TABLE messages ADD COLUMN r_status TEXT;
ALTER TABLE messages ADD COLUMN r_transport TEXT;
ALTER TABLE messages ADD COLUMN r_nexthop TEXT;
ALTER TABLE messages ADD COLUMN r_attempts INTEGER;
ALTER TABLE messages ADD COLUMN r_next_attempt_at INTEGER;
ALTER TABLE messages ADD COLUMN r_updated_at INTEGER;

-- The open ones, as recipients_open (migration 0009) holds those of recipients rows: the queue
-- counts and ages read both through recipients_all.
CREATE INDEX messages_r_open ON messages (r_status, r_transport, r_nexthop) WHERE r_status IN ('incoming', 'ready', 'active', 'deferred');

-- Every recipient in the form of a recipients row. Read it with the message bound (message_id =
-- ?, or IN a list): SQLite then looks each half up by its key. A look-up correlated with an
-- outer row is not pushed into the halves; such queries name both forms themselves.
CREATE VIEW recipients_all AS
  SELECT message_id, idx, tenant_id, address, status, transport, nexthop, attempts, next_attempt_at, updated_at FROM recipients
  UNION ALL
  SELECT id, 0, tenant_id, r_address, r_status, r_transport, r_nexthop, r_attempts, r_next_attempt_at, r_updated_at
  FROM messages WHERE r_status IS NOT NULL;
