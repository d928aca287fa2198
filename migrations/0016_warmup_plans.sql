-- IP warm-up plans (durable-objects/core/warmup.ts; issue 13, item 4): per egress ("direct" or
-- the SOCKS5 bridge's host:port), the ramp of daily and hourly caps per provider as JSON, when it
-- started (unix seconds), and the plan day whose caps were last pushed to the Transport DOs (so
-- the cron pushes a day's caps once). Edited through /relay/warmup.
CREATE TABLE warmup_plans (
  egress TEXT PRIMARY KEY,
  plan TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  applied_day INTEGER,
  updated_at INTEGER NOT NULL
);
