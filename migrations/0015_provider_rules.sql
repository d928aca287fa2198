-- Provider rules (worker/net/core/providers.ts; issue 13, item 2): a big mailbox provider's MX
-- host suffixes and the shape the relay gives all the domains hosted there (window initial and
-- limit, messages per session, recipients per message, rate, required TLS), each value with
-- where it comes from. Read by the delivery stage (cached per isolate) and edited through
-- /relay/providers. `rule` is the rule as JSON; the rows below are the shipped defaults
-- (DEFAULT_PROVIDER_RULES; test/unit/net/providers.test.ts checks they agree).
CREATE TABLE provider_rules (
  name TEXT PRIMARY KEY,
  rule TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);
INSERT INTO provider_rules (name, rule, updated_at) VALUES ('apple', '{"name":"apple","mx":[".icloud.com"],"window":{"initial":5,"limit":10},"messages_per_session":5,"sources":{"mx":"iCloud Mail''s MX hosts are mx01–mx02.mail.icloud.com","window":"KumoMTA''s shipped traffic shaping (assets/policy-extras/shaping.toml): provider_connection_limit 10, after Apple''s postmaster page (support.apple.com/102322)","messages_per_session":"KumoMTA''s shipped traffic shaping (assets/policy-extras/shaping.toml): max_deliveries_per_connection 5"}}', 0);
INSERT INTO provider_rules (name, rule, updated_at) VALUES ('google', '{"name":"google","mx":[".google.com",".googlemail.com"],"window":{"initial":5,"limit":5},"messages_per_session":50,"require_tls":true,"sources":{"mx":"Gmail and Google Workspace MX hosts (aspmx.l.google.com, gmail-smtp-in.l.google.com) share one edge","window":"KumoMTA''s shipped traffic shaping (assets/policy-extras/shaping.toml): provider_connection_limit 5","messages_per_session":"KumoMTA''s shipped traffic shaping (assets/policy-extras/shaping.toml): max_deliveries_per_connection 50","require_tls":"Gmail''s sender guidelines (support.google.com/mail/answer/81126) require a TLS connection for transmitting email"}}', 0);
INSERT INTO provider_rules (name, rule, updated_at) VALUES ('microsoft', '{"name":"microsoft","mx":[".olc.protection.outlook.com",".mail.protection.outlook.com",".mx.microsoft"],"window":{"initial":5,"limit":5},"messages_per_session":50,"sources":{"mx":"Outlook.com (consumer), Exchange Online and its DANE MX hosts (techcommunity.microsoft.com, inbound SMTP DANE for Exchange Online)","window":"KumoMTA''s shipped traffic shaping (assets/policy-extras/shaping.toml): provider_connection_limit 5 for outlook and office365","messages_per_session":"KumoMTA''s shipped traffic shaping (assets/policy-extras/shaping.toml): max_deliveries_per_connection 50"}}', 0);
INSERT INTO provider_rules (name, rule, updated_at) VALUES ('yahoo', '{"name":"yahoo","mx":[".yahoodns.net"],"messages_per_session":20,"sources":{"mx":"Yahoo, AOL and their partner domains are served by *.yahoodns.net MX hosts","messages_per_session":"KumoMTA''s shipped traffic shaping (assets/policy-extras/shaping.toml): max_deliveries_per_connection 20, given by Yahoo (senders.yahooinc.com/best-practices)"}}', 0);
