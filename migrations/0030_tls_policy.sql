-- MTA-STS and TLS-RPT (issue 39; worker/tls-policy/). Forward-only.

-- The MTA-STS cache, shared by every delivery agent and consumer: one row per policy domain with
-- its cache entry (core/mta-sts.ts StsCacheEntry as JSON: the policy or a negative answer, its
-- id, when fetched, checked and when it expires), its TLS-RPT report URIs (JSON, NULL: no
-- record) and the last failed fetch's TLS-RPT result type. Read once per isolate per minute per
-- domain; written when a discovery ran.
CREATE TABLE mta_sts_policies (
  domain TEXT PRIMARY KEY,
  entry TEXT NOT NULL,
  rua TEXT,
  fetch_error TEXT,
  updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- TLS sessions counted per UTC day, policy domain (only domains with a TLS-RPT record), result
-- ('success' or an RFC 8460 result type), MX host and MX address; kept 7 days.
CREATE TABLE tlsrpt_counts (
  day TEXT NOT NULL,
  domain TEXT NOT NULL,
  result TEXT NOT NULL,
  mx TEXT NOT NULL,
  ip TEXT NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (day, domain, result, mx, ip)
) WITHOUT ROWID;

-- The daily reports sent (the report JSON and what each rua answered); kept 30 days.
CREATE TABLE tlsrpt_reports (
  day TEXT NOT NULL,
  domain TEXT NOT NULL,
  report_id TEXT NOT NULL,
  report TEXT NOT NULL,
  outcome TEXT NOT NULL,
  sent_at INTEGER NOT NULL,
  PRIMARY KEY (day, domain)
) WITHOUT ROWID;
