-- An email's events written by one statement are one run of consecutive seqs: only the run's
-- first row (its head) has an entry in event_log_by_source, and `run` says how far the run goes
-- (issue 41; worker/db/events.ts). Every index entry written is a row written (design/cost.md):
-- an email sent alone has its email.sent and email.delivered written together, 4 rows before
-- this migration and 3 after. Forward-only.
--   run   on a head: the seqs seq..seq+run hold the rest of the run (rows of other emails may
--         sit between; they are told apart by email_id). -1 on any other row of the run. NULL
--         on every row written before this migration: each is a head of its own.
ALTER TABLE event_log ADD COLUMN run INTEGER;

DROP INDEX event_log_by_source;
CREATE UNIQUE INDEX event_log_by_source ON event_log (email_id, source_seq, part) WHERE run IS NOT -1;

-- Every event of an email, under the email's id (`of_email`). Read it with of_email bound (= ?,
-- or IN a list): SQLite then finds the heads through event_log_by_source and each run through
-- the primary key. A look-up correlated with an outer row is not pushed into the view.
CREATE VIEW event_of_email AS
  SELECT h.email_id AS of_email, e.tenant_id, e.seq, e.email_id, e.source_seq, e.part, e.type, e.recipient,
    e.created_at, e.data, e.event_id, e.event_type, e.body, e.enqueued_at, e.run
  FROM event_log h JOIN event_log e
    ON e.tenant_id = h.tenant_id AND e.seq BETWEEN h.seq AND h.seq + IFNULL(h.run, 0) AND e.email_id = h.email_id
  WHERE h.run IS NOT -1;
