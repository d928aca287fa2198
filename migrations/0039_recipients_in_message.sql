-- A message of two or more recipients keeps them in its own row (issue 41; worker/db/messages.ts),
-- as one of one recipient has since migration 0035: `rcpts` is a JSON array, one element per
-- recipient in idx order, each [address, status, transport, nexthop, attempts, next_attempt_at,
-- updated_at]; `rcpts_open` is 1 while any of them is open, else NULL. A recipients row was a row
-- written per recipient at the first index write, another when it left or entered the open
-- states, and its delete at retention: twenty rows for a ten-recipient email delivered at once,
-- where its message row, written anyway, now carries them. A message indexed before this keeps
-- its recipients rows (rcpts stays NULL). Forward-only.

ALTER TABLE messages ADD COLUMN rcpts TEXT;
ALTER TABLE messages ADD COLUMN rcpts_open INTEGER;

-- The messages with an open recipient in `rcpts`: the queue's counts and ages walk these, as
-- recipients_open and messages_r_open hold the other forms' open recipients.
CREATE INDEX messages_rcpts_open ON messages (rcpts_open) WHERE rcpts_open = 1;

-- Every recipient in the form of a recipients row, from all three homes. Read it with the message
-- bound (message_id = ?, or IN a list): SQLite then looks each part up by its key.
DROP VIEW recipients_all;
CREATE VIEW recipients_all AS
  SELECT message_id, idx, tenant_id, address, status, transport, nexthop, attempts, next_attempt_at, updated_at FROM recipients
  UNION ALL
  SELECT id, 0, tenant_id, r_address, r_status, r_transport, r_nexthop, r_attempts, r_next_attempt_at, r_updated_at
  FROM messages WHERE r_status IS NOT NULL
  UNION ALL
  SELECT m.id, CAST(j.key AS INTEGER), m.tenant_id, j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 4,
    j.value ->> 5, j.value ->> 6
  FROM messages m, json_each(m.rcpts) j WHERE m.rcpts IS NOT NULL;

-- The open recipients (incoming, ready, active, deferred) of all three homes, each part read
-- through its partial index: the queue's counts, ages and the cancel filter read this, so their
-- work follows the queue, never the retention.
CREATE VIEW recipients_open_all AS
  SELECT message_id, idx, tenant_id, address, status, transport, nexthop, attempts, next_attempt_at, updated_at FROM recipients
  WHERE status IN ('incoming', 'ready', 'active', 'deferred')
  UNION ALL
  SELECT id, 0, tenant_id, r_address, r_status, r_transport, r_nexthop, r_attempts, r_next_attempt_at, r_updated_at
  FROM messages WHERE r_status IN ('incoming', 'ready', 'active', 'deferred')
  UNION ALL
  SELECT m.id, CAST(j.key AS INTEGER), m.tenant_id, j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 4,
    j.value ->> 5, j.value ->> 6
  FROM messages m, json_each(m.rcpts) j WHERE m.rcpts_open = 1 AND j.value ->> 1 IN ('incoming', 'ready', 'active', 'deferred');
