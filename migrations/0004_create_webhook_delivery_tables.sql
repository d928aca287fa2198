-- Sending delivery-status events (issue 5): the pushed envelopes (also the pull feed), the
-- delay-notice state per recipient, dead letters and endpoint health. Forward-only.

-- Every envelope pushed to webhooks, exactly as pushed (`body`, the JSON text that is signed),
-- in per-tenant order. `event_id` is the webhook-id and the feed's `id`; `seq` orders the feed
-- (monotonic per tenant, never reused). `enqueued_at` lets only one of two concurrent
-- publications of the same events enqueue them; a claim older than a lease may be taken again.
CREATE TABLE event_feed (
  tenant_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  event_id TEXT NOT NULL UNIQUE,
  type TEXT NOT NULL,
  email_id TEXT NOT NULL,
  recipient TEXT,
  created_at INTEGER NOT NULL,      -- ms since epoch: the event's time (the envelope's created_at)
  body TEXT NOT NULL,
  enqueued_at INTEGER,              -- ms since epoch: claimed for the webhooks queue (NULL = not yet)
  PRIMARY KEY (tenant_id, seq)
);
CREATE INDEX event_feed_by_type ON event_feed (tenant_id, type, seq);
CREATE INDEX event_feed_by_time ON event_feed (tenant_id, created_at, seq);

-- Delay-notice state per recipient (worker/webhooks/core/events.ts DelayNoticeState): how many
-- deferrals were seen and when the last email.delivery_delayed was sent. `last_source_seq` is
-- the Outbox event seq last counted, so a repeated publication never counts a deferral twice.
CREATE TABLE webhook_delay_notices (
  email_id TEXT NOT NULL,
  recipient TEXT NOT NULL,
  deferrals INTEGER NOT NULL,
  last_notice_ms INTEGER,
  last_source_seq INTEGER NOT NULL,
  PRIMARY KEY (email_id, recipient)
);

-- Deliveries that used up the retry schedule (or were refused for good): one row per endpoint
-- and event; a replay sets `replayed_at`, a new failure after it replaces the row.
CREATE TABLE webhook_dead_letters (
  endpoint_id TEXT NOT NULL,
  event_id TEXT NOT NULL,
  tenant_id TEXT NOT NULL,
  type TEXT NOT NULL,
  attempts INTEGER NOT NULL,
  reason TEXT NOT NULL,
  created_at INTEGER NOT NULL,      -- ms since epoch: when it was dead-lettered
  replayed_at INTEGER,
  PRIMARY KEY (endpoint_id, event_id)
);
CREATE INDEX webhook_dead_letters_by_time ON webhook_dead_letters (endpoint_id, created_at, event_id);

-- Endpoint health (worker/webhooks/core/endpoint-health.ts EndpointHealth as JSON, plus
-- `slowUntilMs`: the endpoint's deliveries go through the webhooks-slow queue until then): the
-- window and the dead-period back-off of each endpoint, shared by every consumer invocation.
CREATE TABLE webhook_endpoint_health (
  endpoint_id TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);

