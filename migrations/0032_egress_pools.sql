-- Egress pools with failover (issue 39; worker/egress/). Forward-only.

-- Each egress's health (egress/core/health.ts EgressHealth as JSON: state, recent failures,
-- suspended until, strikes, reason), shared by every delivery agent and consumer. Written only
-- when a delivery saw a failure or an egress on probation came back; read at most once a second
-- per isolate.
CREATE TABLE egress_health (
  egress TEXT PRIMARY KEY,
  pool TEXT NOT NULL,
  health TEXT NOT NULL,
  updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- Every suspension, failover and return of an egress (GET /relay/egress; the newest first).
CREATE TABLE egress_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  egress TEXT NOT NULL,
  pool TEXT NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT,
  at INTEGER NOT NULL
);
