-- Topics (Resend's /topics; issue 38) and the explicit opt-ins of topics whose default is
-- opt_out. An opt-out is not stored here: it is the suppression of scope 'bulk:<topic id>'
-- (migrations/0014), the entry a one-click unsubscribe from the topic's email writes too, so
-- one mechanism holds the topic's mail back. A send with `topic_id` is bulk mail of the topic:
-- held back for an address with that suppression, and, when the topic's default is opt_out, for
-- an address without an opt-in here (worker/db/routing.ts suppressedAmong, in the same query).
CREATE TABLE topics (
  tenant_id TEXT NOT NULL,
  id TEXT NOT NULL,
  name TEXT NOT NULL,
  description TEXT,
  default_subscription TEXT NOT NULL CHECK (default_subscription IN ('opt_in', 'opt_out')),
  created_at INTEGER NOT NULL,
  PRIMARY KEY (tenant_id, id)
) WITHOUT ROWID;

CREATE TABLE topic_opt_ins (
  tenant_id TEXT NOT NULL,
  topic_id TEXT NOT NULL,
  address TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (tenant_id, topic_id, address)
) WITHOUT ROWID;
