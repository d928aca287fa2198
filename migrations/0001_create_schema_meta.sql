-- Cohort D1 schema: the index, the event log and configuration live here.
-- Migrations are forward-only; never edit one that has been applied.
CREATE TABLE IF NOT EXISTS schema_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
INSERT OR IGNORE INTO schema_meta (key, value) VALUES ('created_by', '0001_create_schema_meta');
