/**
 * NAME
 *   providers - provider rules: big mailbox providers shaped as one site, kept as data
 *
 * DESCRIPTION
 *   Google, Microsoft, Yahoo and Apple each host millions of domains behind a few MX names. A
 *   provider rule matches a destination by the suffix of its MX hosts (".google.com") and rolls
 *   every domain hosted there into one site, named after the rule, with the rule's shape:
 *     window {initial, limit}   the window of each of its domains starts at `initial` and stays
 *                               at most `limit`; `limit` also caps the provider's sessions as a
 *                               whole (a concurrency cap on the key site:<name>);
 *     messages_per_session      a connection is reused for at most this many messages;
 *     recipients_per_message    at most this many RCPT TO per transaction;
 *     rate                      at most this many deliveries per interval to the provider ("300/m");
 *     require_tls               STARTTLS is required: a server that does not offer it defers.
 *     domains                   recipient domains known to be hosted there (gmail.com, …), so
 *                               the accept path's compliance check knows a recipient's provider
 *                               without a DNS query;
 *     max_message_bytes, max_recipients  the largest message and the most recipients per
 *                               message the provider takes (the compliance check warns above).
 *   Each value may say where it comes from (`sources`, by field name).
 *
 *   Rules live in D1 (migrations/0015_provider_rules.sql seeds DEFAULT_PROVIDER_RULES) and are
 *   edited through /relay/providers and `cohort providers`.
 *
 *   matchProvider(rules, hosts)  the first rule (in name order) one of whose suffixes ends an MX
 *                                host (hosts in preference order), with the host and suffix; or null.
 *   shapeOf(rule)                what the Transport DO is told of it (core/site-shape.ts).
 *   parseProviderRule(input)     a rule, or the problems of a malformed one.
 *
 * INVARIANTS
 *   Pure. A suffix matches a host that ends with it, or equals it without its leading dot;
 *   comparisons ignore case and a trailing dot.
 */

/** A provider rule (see the header). */
export interface ProviderRule {
  name: string;
  mx: string[];
  window?: { initial?: number; limit?: number };
  messages_per_session?: number;
  recipients_per_message?: number;
  rate?: string;
  require_tls?: boolean;
  domains?: string[];
  max_message_bytes?: number;
  max_recipients?: number;
  /** Where each value comes from, by field name. */
  sources?: Record<string, string>;
}

/** A destination's match: the rule, and the MX host and suffix that matched. */
export interface ProviderMatch {
  rule: ProviderRule;
  host: string;
  suffix: string;
}

const KUMO = "KumoMTA's shipped traffic shaping (assets/policy-extras/shaping.toml)";

/** The rules the relay ships (seeded into D1 by migrations/0015_provider_rules.sql). */
export const DEFAULT_PROVIDER_RULES: readonly ProviderRule[] = [
  {
    name: "apple",
    mx: [".icloud.com"],
    window: { initial: 5, limit: 10 },
    messages_per_session: 5,
    domains: ["icloud.com", "me.com", "mac.com"],
    sources: {
      domains: "iCloud Mail's domains",
      mx: "iCloud Mail's MX hosts are mx01–mx02.mail.icloud.com",
      window: `${KUMO}: provider_connection_limit 10, after Apple's postmaster page (support.apple.com/102322)`,
      messages_per_session: `${KUMO}: max_deliveries_per_connection 5`,
    },
  },
  {
    name: "google",
    mx: [".google.com", ".googlemail.com"],
    window: { initial: 5, limit: 5 },
    messages_per_session: 50,
    require_tls: true,
    domains: ["gmail.com", "googlemail.com"],
    max_message_bytes: 52_428_800,
    max_recipients: 100,
    sources: {
      domains: "Gmail's consumer domains",
      max_message_bytes:
        "Gmail receives messages of up to 50 MB (support.google.com/mail/answer/6584); above, 552 5.3.4",
      max_recipients: "Gmail answers 452 4.5.3 'Your message has too many recipients' (Gmail SMTP errors and codes)",
      mx: "Gmail and Google Workspace MX hosts (aspmx.l.google.com, gmail-smtp-in.l.google.com) share one edge",
      window: `${KUMO}: provider_connection_limit 5`,
      messages_per_session: `${KUMO}: max_deliveries_per_connection 50`,
      require_tls:
        "Gmail's sender guidelines (support.google.com/mail/answer/81126) require a TLS connection for transmitting email",
    },
  },
  {
    name: "microsoft",
    mx: [".olc.protection.outlook.com", ".mail.protection.outlook.com", ".mx.microsoft"],
    window: { initial: 5, limit: 5 },
    messages_per_session: 50,
    domains: ["outlook.com", "hotmail.com", "live.com", "msn.com"],
    max_message_bytes: 37_748_736,
    sources: {
      domains: "Outlook.com's consumer domains",
      max_message_bytes:
        "Exchange Online's default maximum receive size, 36 MB (learn.microsoft.com, Exchange Online limits)",
      mx: "Outlook.com (consumer), Exchange Online and its DANE MX hosts (techcommunity.microsoft.com, inbound SMTP DANE for Exchange Online)",
      window: `${KUMO}: provider_connection_limit 5 for outlook and office365`,
      messages_per_session: `${KUMO}: max_deliveries_per_connection 50`,
    },
  },
  {
    name: "yahoo",
    mx: [".yahoodns.net"],
    messages_per_session: 20,
    domains: ["yahoo.com", "aol.com", "ymail.com", "rocketmail.com"],
    sources: {
      domains: "Yahoo's and AOL's consumer domains",
      mx: "Yahoo, AOL and their partner domains are served by *.yahoodns.net MX hosts",
      messages_per_session: `${KUMO}: max_deliveries_per_connection 20, given by Yahoo (senders.yahooinc.com/best-practices)`,
    },
  },
];

function norm(host: string): string {
  return host.toLowerCase().replace(/\.$/, "");
}

/** Whether a suffix (".google.com", or "google.com" for the host itself and its subdomains) covers a host. */
export function suffixMatches(suffix: string, host: string): boolean {
  const s = norm(suffix);
  const h = norm(host);
  const bare = s.startsWith(".") ? s.slice(1) : s;
  return h === bare || h.endsWith(`.${bare}`);
}

/** The first matching rule (see the header), or null. */
export function matchProvider(rules: readonly ProviderRule[], hosts: readonly string[]): ProviderMatch | null {
  const ordered = [...rules].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const host of hosts) {
    for (const rule of ordered) {
      const suffix = rule.mx.find((s) => suffixMatches(s, host));
      if (suffix !== undefined) return { rule, host: norm(host), suffix };
    }
  }
  return null;
}

/** What the Transport DO is told of a rule (core/site-shape.ts SiteShape). */
export function shapeOf(rule: ProviderRule): { name: string; initial?: number; limit?: number; rate?: string } {
  return {
    name: rule.name,
    ...(rule.window?.initial !== undefined ? { initial: rule.window.initial } : {}),
    ...(rule.window?.limit !== undefined ? { limit: rule.window.limit } : {}),
    ...(rule.rate !== undefined ? { rate: rule.rate } : {}),
  };
}

const NAME = /^[a-z0-9][a-z0-9-]{0,31}$/;
const SUFFIX = /^\.?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$|^\.[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;
const RATE = /^(\d+)\s*\/\s*(\d*)\s*([smhd])$/;
const FIELDS = new Set([
  "name",
  "mx",
  "window",
  "messages_per_session",
  "recipients_per_message",
  "rate",
  "require_tls",
  "domains",
  "max_message_bytes",
  "max_recipients",
  "sources",
]);

const int = (v: unknown, min: number, max: number) =>
  Number.isInteger(v) && (v as number) >= min && (v as number) <= max;

/** A rule from untrusted input (the admin API, a D1 row), or its problems. */
export function parseProviderRule(input: unknown): { ok: true; rule: ProviderRule } | { ok: false; errors: string[] } {
  const errors: string[] = [];
  const r = input as Record<string, unknown> | null;
  if (r === null || typeof r !== "object" || Array.isArray(r))
    return { ok: false, errors: ["a provider rule is an object"] };
  for (const k of Object.keys(r)) if (!FIELDS.has(k)) errors.push(`${k}: unknown field`);
  if (typeof r.name !== "string" || !NAME.test(r.name)) errors.push("name: 1–32 lower-case letters, digits or '-'");
  if (
    !Array.isArray(r.mx) ||
    r.mx.length === 0 ||
    r.mx.length > 20 ||
    !r.mx.every((s) => typeof s === "string" && SUFFIX.test(s.toLowerCase()))
  ) {
    errors.push('mx: 1–20 MX host suffixes, e.g. ".google.com"');
  }
  const w = r.window as Record<string, unknown> | undefined;
  if (w !== undefined) {
    if (w === null || typeof w !== "object" || Object.keys(w).some((k) => k !== "initial" && k !== "limit"))
      errors.push("window: {initial?, limit?}");
    else {
      if (w.initial !== undefined && !int(w.initial, 1, 1000)) errors.push("window.initial: an integer 1–1000");
      if (w.limit !== undefined && !int(w.limit, 1, 1000)) errors.push("window.limit: an integer 1–1000");
      if (int(w.initial, 1, 1000) && int(w.limit, 1, 1000) && (w.initial as number) > (w.limit as number))
        errors.push("window: initial above limit");
    }
  }
  if (r.messages_per_session !== undefined && !int(r.messages_per_session, 1, 100_000))
    errors.push("messages_per_session: an integer 1–100000");
  if (r.recipients_per_message !== undefined && !int(r.recipients_per_message, 1, 1000))
    errors.push("recipients_per_message: an integer 1–1000");
  if (r.rate !== undefined) {
    const m = typeof r.rate === "string" ? RATE.exec(r.rate.trim()) : null;
    if (!m || Number(m[1]) < 1 || (m[2] !== "" && Number(m[2]) < 1))
      errors.push('rate: "<count>/<unit>", e.g. "300/m" (s, m, h or d)');
  }
  if (r.require_tls !== undefined && typeof r.require_tls !== "boolean") errors.push("require_tls: true or false");
  const domainName = (d: unknown) => typeof d === "string" && /^[a-z0-9-]+(\.[a-z0-9-]+)+$/.test(d);
  if (r.domains !== undefined && (!Array.isArray(r.domains) || r.domains.length > 100 || !r.domains.every(domainName)))
    errors.push("domains: up to 100 lower-case domain names");
  if (r.max_message_bytes !== undefined && !int(r.max_message_bytes, 1024, 1_000_000_000))
    errors.push("max_message_bytes: an integer 1024–1000000000");
  if (r.max_recipients !== undefined && !int(r.max_recipients, 1, 100_000))
    errors.push("max_recipients: an integer 1–100000");
  if (
    r.sources !== undefined &&
    (r.sources === null ||
      typeof r.sources !== "object" ||
      Array.isArray(r.sources) ||
      !Object.entries(r.sources).every(([k, v]) => FIELDS.has(k) && typeof v === "string" && v.length <= 500))
  ) {
    errors.push("sources: {<field>: text}, by field name");
  }
  if (errors.length > 0) return { ok: false, errors };
  const rule = { ...(r as unknown as ProviderRule), mx: (r.mx as string[]).map((s) => s.toLowerCase()) };
  return { ok: true, rule };
}
