-- Stored templates (Resend's /templates; issue 38): a tenant's template with a draft and, once
-- published, the published version that sends use. `draft` and `published` are JSON of the same
-- shape (subject, html, text, from, reply_to, variables); a send renders the published one once,
-- at accept, and stores the rendered message. `alias` names it as well as its id. WITHOUT ROWID:
-- the primary key is the table; the alias index holds only templates that have one.
CREATE TABLE templates (
  tenant_id TEXT NOT NULL,
  id TEXT NOT NULL,
  name TEXT NOT NULL,
  alias TEXT,
  draft TEXT NOT NULL,
  draft_version TEXT NOT NULL,
  published TEXT,
  published_version TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  published_at INTEGER,
  PRIMARY KEY (tenant_id, id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX templates_by_alias ON templates (tenant_id, alias) WHERE alias IS NOT NULL;
