-- Event ids name their email (worker/webhooks/core/event-id.ts: "evt_<email id>_<16 hex>"), so
-- every look-up by event id (the feed cursor, replay's after/until, the queue claims, a bundle's
-- stored body, the duplicate check of an insert) goes through event_log_by_source, whose first
-- column is the email id, and the event log needs no index of event ids: a pushed event costs
-- one row written less (design/cost.md: every index entry written is a row written).
-- Events stored before this migration keep their ids ("evt_" and 32 hex digits, no "_" after
-- the prefix): only those stay indexed, by a partial index that no new row enters. Queries for
-- such an id repeat its WHERE, so that SQLite uses it.
DROP INDEX IF EXISTS event_log_by_event_id;
CREATE UNIQUE INDEX event_log_by_legacy_event_id ON event_log (event_id) WHERE instr(substr(event_id, 5), '_') = 0;
