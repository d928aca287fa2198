-- The recipient state index holds only recipients that are still open (design/cost.md: every
-- index entry written is a row written). A recipient indexed once it is final (the usual case:
-- the delivery stage writes it with its outcome) costs no entry; one indexed while open loses
-- its entry when it ends. The open counts and age percentiles of GET /relay/queue read this
-- index (their WHERE repeats its list, in this order); the counts of final states scan the table.
DROP INDEX IF EXISTS recipients_by_status;
CREATE INDEX recipients_open ON recipients (status, transport, nexthop) WHERE status IN ('incoming', 'ready', 'active', 'deferred');
