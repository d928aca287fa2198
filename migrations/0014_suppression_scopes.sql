-- Suppressions get a scope, so that an unsubscribe stops only the mail it was about:
--   ''              every email of the tenant to the address (bounces, complaints, manual entries);
--   'bulk'          only its bulk mail (emails sent with one-click unsubscribe): an unsubscribe
--                   that named no topic;
--   'bulk:<topic>'  only its bulk mail of that topic: an unsubscribe from a topic's email.
-- Transactional mail (no unsubscribe) is held back by '' entries alone, so a newsletter's
-- unsubscribe never blocks a password reset. An address may have one entry per scope, hence
-- the new key; SQLite cannot change a primary key in place, so the table is rebuilt.
CREATE TABLE suppressions_v2 (
  tenant_id TEXT NOT NULL,
  address TEXT NOT NULL,
  scope TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT 'manual',
  created_at INTEGER NOT NULL,
  expires_at INTEGER,
  PRIMARY KEY (tenant_id, address, scope)
);
INSERT INTO suppressions_v2 (tenant_id, address, scope, reason, created_at, expires_at)
  SELECT tenant_id, address,
    CASE WHEN reason = 'unsubscribe' THEN 'bulk'
         WHEN reason LIKE 'unsubscribe:%' THEN 'bulk:' || substr(reason, 13)
         ELSE '' END,
    reason, created_at, expires_at
  FROM suppressions;
DROP TABLE suppressions;
ALTER TABLE suppressions_v2 RENAME TO suppressions;
