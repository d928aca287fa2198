-- Messages indexed before migrations 0035 and 0039 kept their recipients as `recipients` rows,
-- and so every index write (worker/db/messages.ts) carried two statements for them: one to update
-- the row of a one-recipient message indexed before 0035, one to upsert the rows of a message of
-- two or more indexed before 0039. Both matched nothing for every message indexed since, and each
-- was a D1 statement of every publication (issue 41). This moves those recipients into their
-- message rows, in the forms 0035 and 0039 gave every message since, and deletes the rows, so the
-- writers no longer name them. A message whose recipients' idx are not 0, 1, 2, … keeps its rows,
-- as such a message indexed today does. The work is bounded by the `recipients` rows, which only
-- messages of before 0039 (and that irregular kind) hold, and retention deletes. Forward-only.

-- One recipient: into the r_* columns (read as idx 0, as a one-recipient message indexed today).
UPDATE messages SET r_address = r.address, r_status = r.status, r_transport = r.transport, r_nexthop = r.nexthop,
    r_attempts = r.attempts, r_next_attempt_at = r.next_attempt_at, r_updated_at = r.updated_at
  FROM recipients r
  WHERE r.message_id = messages.id AND messages.r_status IS NULL AND messages.rcpts IS NULL
    AND NOT EXISTS (SELECT 1 FROM recipients x WHERE x.message_id = r.message_id AND x.idx <> r.idx);

-- Two or more, idx 0 … n-1: into `rcpts` (one [address, status, transport, nexthop, attempts,
-- next_attempt_at, updated_at] per recipient, in idx order) and `rcpts_open` (1 while one is open).
UPDATE messages SET rcpts = g.list, rcpts_open = g.open
  FROM (SELECT message_id,
      json_group_array(json_array(address, status, transport, nexthop, attempts, next_attempt_at, updated_at) ORDER BY idx) AS list,
      IIF(max(status NOT IN ('delivered', 'bounced', 'expired', 'suppressed', 'cancelled')), 1, NULL) AS open,
      count(*) AS n, min(idx) AS lo, max(idx) AS hi
    FROM recipients GROUP BY message_id) AS g
  WHERE g.message_id = messages.id AND g.n >= 2 AND g.lo = 0 AND g.hi = g.n - 1
    AND messages.r_status IS NULL AND messages.rcpts IS NULL;

-- The rows moved.
DELETE FROM recipients WHERE EXISTS (SELECT 1 FROM messages m WHERE m.id = recipients.message_id
  AND (m.r_status IS NOT NULL OR m.rcpts IS NOT NULL));
