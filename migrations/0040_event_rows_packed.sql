-- An email's events written by one statement are one row (issue 41; worker/db/events.ts). Before
-- this migration a run of n events was n rows (and, unless its messages row named it, an index
-- entry), each written and, at retention, deleted: an email sent alone paid 2 rows for its
-- email.sent and email.delivered and 2 more to delete them, a ten-recipient email 11 and 11.
-- Now the table is `event_runs`: a row holds its run's first event in its columns and the others,
-- at most REST_MAX (63) of them, in `rest`. `event_log` is a view of every event, one row each,
-- with the columns the table had; readers keep reading it. Rows written before keep their form
-- (rest NULL). Forward-only.
--   rest      NULL, or a JSON array of the run's other events in order, each
--             [source_seq, part, type, recipient, created_at, data, event_id, event_type, body]
--             with recipient 0 when it is the row's, event_id `_…` when it is `evt_<email_id>_…`,
--             event_type 0 when it is the type (worker/db/event-inserts.ts restOf); the i-th
--             (from 0) has seq = seq + i + 1. Those seqs belong to the row: a writer starts after
--             the last row's seq + json_array_length(rest).
--   run       on a row with rest: 0 (its own events only) or how far the seqs of its email's
--             other rows of the same statement go (more than REST_MAX events), -1 on those.
--   enqueued_at  one claim for the row's envelopes (they are pushed together).
--   rest_envelopes  1 when the rest holds an envelope (the first event may be a transition
--             without one), else NULL: with event_id, what says the row has envelopes to push.
--   head_seq  (views) the seq of the row an event is stored in: a reader bounding seq from below
--             by S also bounds head_seq by S - 63, which the primary key serves.

DROP VIEW event_of_email;
ALTER TABLE event_log RENAME TO event_runs;
ALTER TABLE event_runs ADD COLUMN rest TEXT;
ALTER TABLE event_runs ADD COLUMN rest_envelopes INTEGER;

-- Rows whose envelopes wait to be enqueued again (a claim given up): the metric's count.
DROP INDEX event_log_unclaimed;
CREATE INDEX event_runs_unclaimed ON event_runs (created_at)
  WHERE enqueued_at IS NULL AND (event_id IS NOT NULL OR rest_envelopes = 1);

CREATE VIEW event_log AS
  SELECT tenant_id, seq, email_id, source_seq, part, type, recipient, created_at, data, event_id, event_type, body,
    enqueued_at, run, seq AS head_seq
  FROM event_runs
  UNION ALL
  SELECT h.tenant_id, h.seq + j.key + 1, h.email_id, j.value ->> 0, j.value ->> 1, j.value ->> 2,
    IIF(j.value ->> 3 IS 0, h.recipient, j.value ->> 3), j.value ->> 4, j.value ->> 5,
    IIF(substr(j.value ->> 6, 1, 1) = '_', 'evt_' || h.email_id || (j.value ->> 6), j.value ->> 6),
    IIF(j.value ->> 7 IS 0, j.value ->> 2, j.value ->> 7), j.value ->> 8, h.enqueued_at, -1, h.seq
  FROM event_runs h, json_each(h.rest) j WHERE h.rest IS NOT NULL;

-- The rows (not events) of an email, under its id (`of_email`), as event_of_email found them
-- before (migrations 0036 and 0037): what a delete by email removes. Read it with of_email bound.
CREATE VIEW event_rows_of_email AS
  SELECT h.email_id AS of_email, e.tenant_id, e.seq, e.email_id, e.run
  FROM event_runs h JOIN event_runs e
    ON e.tenant_id = h.tenant_id AND e.seq BETWEEN h.seq AND h.seq + IFNULL(h.run, 0) AND e.email_id = h.email_id
  WHERE h.run IS NOT -1
  UNION ALL
  SELECT m.id, e.tenant_id, e.seq, e.email_id, e.run
  FROM messages m JOIN event_runs e
    ON e.tenant_id = m.tenant_id AND e.seq BETWEEN m.head_seq AND m.head_seq + m.head_run AND e.email_id = m.id
  WHERE m.head_seq IS NOT NULL;

-- Every event of an email, one row each, under the email's id (`of_email`): the rows found as in
-- event_rows_of_email, each with the events in its rest. Read it with of_email bound (= ?, or IN
-- a list): SQLite pushes that into every arm.
CREATE VIEW event_of_email AS
  SELECT h.email_id AS of_email, e.tenant_id, e.seq, e.email_id, e.source_seq, e.part, e.type, e.recipient,
    e.created_at, e.data, e.event_id, e.event_type, e.body, e.enqueued_at, e.run, e.seq AS head_seq
  FROM event_runs h JOIN event_runs e
    ON e.tenant_id = h.tenant_id AND e.seq BETWEEN h.seq AND h.seq + IFNULL(h.run, 0) AND e.email_id = h.email_id
  WHERE h.run IS NOT -1
  UNION ALL
  SELECT h.email_id, e.tenant_id, e.seq + j.key + 1, e.email_id, j.value ->> 0, j.value ->> 1, j.value ->> 2,
    IIF(j.value ->> 3 IS 0, e.recipient, j.value ->> 3), j.value ->> 4, j.value ->> 5,
    IIF(substr(j.value ->> 6, 1, 1) = '_', 'evt_' || e.email_id || (j.value ->> 6), j.value ->> 6),
    IIF(j.value ->> 7 IS 0, j.value ->> 2, j.value ->> 7), j.value ->> 8, e.enqueued_at, -1, e.seq
  FROM event_runs h JOIN event_runs e
    ON e.tenant_id = h.tenant_id AND e.seq BETWEEN h.seq AND h.seq + IFNULL(h.run, 0) AND e.email_id = h.email_id,
    json_each(e.rest) j
  WHERE h.run IS NOT -1 AND e.rest IS NOT NULL
  UNION ALL
  SELECT m.id, e.tenant_id, e.seq, e.email_id, e.source_seq, e.part, e.type, e.recipient,
    e.created_at, e.data, e.event_id, e.event_type, e.body, e.enqueued_at, e.run, e.seq
  FROM messages m JOIN event_runs e
    ON e.tenant_id = m.tenant_id AND e.seq BETWEEN m.head_seq AND m.head_seq + m.head_run AND e.email_id = m.id
  WHERE m.head_seq IS NOT NULL
  UNION ALL
  SELECT m.id, e.tenant_id, e.seq + j.key + 1, e.email_id, j.value ->> 0, j.value ->> 1, j.value ->> 2,
    IIF(j.value ->> 3 IS 0, e.recipient, j.value ->> 3), j.value ->> 4, j.value ->> 5,
    IIF(substr(j.value ->> 6, 1, 1) = '_', 'evt_' || e.email_id || (j.value ->> 6), j.value ->> 6),
    IIF(j.value ->> 7 IS 0, j.value ->> 2, j.value ->> 7), j.value ->> 8, e.enqueued_at, -1, e.seq
  FROM messages m JOIN event_runs e
    ON e.tenant_id = m.tenant_id AND e.seq BETWEEN m.head_seq AND m.head_seq + m.head_run AND e.email_id = m.id,
    json_each(e.rest) j
  WHERE m.head_seq IS NOT NULL AND e.rest IS NOT NULL;
