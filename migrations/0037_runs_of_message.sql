-- An email's first run of events can be found through its messages row instead of an entry in
-- event_log_by_source (issue 41; worker/db/events.ts, worker/db/messages.ts). When the delivery
-- stage or the classify consumer writes a message's row and its first events in one batch, the
-- events go in first with run -1 on every row (no index entry), and the messages row, inserted
-- after them, names them: `head_seq` is the run's first seq and `head_run` how far its seqs go
-- (rows of other emails may sit between; they are told apart by email_id). An email sent alone
-- has its email.sent and email.delivered written that way: 2 rows, not 3. Later runs, and runs of
-- emails whose row was there before, keep their index entry (migration 0036). Forward-only.
ALTER TABLE messages ADD COLUMN head_seq INTEGER;
ALTER TABLE messages ADD COLUMN head_run INTEGER;

-- Every event of an email, under the email's id (`of_email`): the runs found by their head's
-- index entry, and the run its messages row names. Read it with of_email bound (= ?, or IN a
-- list): SQLite pushes that into both arms, finds the heads through event_log_by_source, the
-- messages row through its primary key, and each run through event_log's primary key.
DROP VIEW event_of_email;
CREATE VIEW event_of_email AS
  SELECT h.email_id AS of_email, e.tenant_id, e.seq, e.email_id, e.source_seq, e.part, e.type, e.recipient,
    e.created_at, e.data, e.event_id, e.event_type, e.body, e.enqueued_at, e.run
  FROM event_log h JOIN event_log e
    ON e.tenant_id = h.tenant_id AND e.seq BETWEEN h.seq AND h.seq + IFNULL(h.run, 0) AND e.email_id = h.email_id
  WHERE h.run IS NOT -1
  UNION ALL
  SELECT m.id AS of_email, e.tenant_id, e.seq, e.email_id, e.source_seq, e.part, e.type, e.recipient,
    e.created_at, e.data, e.event_id, e.event_type, e.body, e.enqueued_at, e.run
  FROM messages m JOIN event_log e
    ON e.tenant_id = m.tenant_id AND e.seq BETWEEN m.head_seq AND m.head_seq + m.head_run AND e.email_id = m.id
  WHERE m.head_seq IS NOT NULL;
