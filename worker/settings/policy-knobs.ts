/**
 * The knobs of what goes around delivery rather than through it: status notices and VERP bounces,
 * receiving, inbound reports and feedback loops, the complaint brake, destination grouping, SMTP
 * timeouts, MTA-STS and TLS-RPT, egress pools, metrics and webhooks. They are the second half of
 * the settings table (settings.ts spreads them in, in wrangler.toml's order).
 */
import { parseSmtpTimeouts, type SmtpTimeouts } from "../smtp/core/config";
import { parseWebhookConfig, type WebhookConfig } from "../webhooks/core/webhook-config";
import { isOn, knob, list, positive } from "./knob";
import { countSetting } from "./parse";

/** The knobs from DSN_NOTICES on (see the header); the order is wrangler.toml's. */
export const POLICY_KNOBS = {
  dsnNotices: knob("DSN_NOTICES", "off", '"on": delivery status notices (RFC 3464) to the envelope sender', isOn("on")),
  bounceDomain: knob(
    "BOUNCE_DOMAIN",
    "",
    'the domain of VERP envelope senders for mail from unverified domains ("": the From address)',
    (r) => r || null,
  ),
  publicUrl: knob(
    "PUBLIC_URL",
    "",
    "the relay's public origin for one-click unsubscribe links (\"\": each request's origin)",
    (r) => r ?? "",
  ),
  receivingDailyQuota: knob(
    "RECEIVING_DAILY_QUOTA",
    "1000",
    "received messages a tenant takes per UTC day unless it sets its own (1–10,000,000)",
    (r) => Math.min(countSetting(r, 1000), 10_000_000),
  ),
  fileLinkSeconds: knob(
    "FILE_LINK_SECONDS",
    "3600",
    "seconds a download link of an attachment or a raw received message stays valid (60–604,800)",
    (r) => Math.min(Math.max(countSetting(r, 3600), 60), 604_800),
  ),
  routingAuthservId: knob(
    "ROUTING_AUTHSERV_ID",
    "mx.cloudflare.net",
    'the authserv-id of Email Routing\'s Authentication-Results, whose SPF and DKIM verdicts inbound reports may use ("": believe none)',
    (r) => (r ?? "mx.cloudflare.net").trim().toLowerCase(),
  ),
  reportingMtas: knob(
    "REPORTING_MTAS",
    "",
    "domains whose authenticated bounces count for any recipient domain (a smarthost, a provider bouncing from another domain than its MX)",
    list,
  ),
  feedbackLoopSenders: knob(
    "FEEDBACK_LOOP_SENDERS",
    "",
    "domains whose DKIM-aligned ARF reports count as complaints (feedback loops); others are kept for the operator",
    list,
  ),
  domainClaimTtlMs: knob(
    "DOMAIN_CLAIM_TTL_HOURS",
    "72",
    "hours an unverified claim on a domain name lasts; verified domains never lapse",
    positive(72, 3_600_000),
  ),
  devPathOrigins: knob(
    "DEV_PATH_ORIGINS",
    "",
    "development only: the origins (http://127.0.0.1:2526) an attachment `path` may reach besides public https URLs",
    list,
  ),
  complaintThreshold: knob(
    "COMPLAINT_RATE_THRESHOLD",
    "0.003",
    "a tenant's complaint rate above which its bulk mail is paused, in (0, 1)",
    (r) => {
      const t = Number(r);
      return Number.isFinite(t) && t > 0 && t < 1 ? t : 0.003;
    },
  ),
  complaintWindowDays: knob("COMPLAINT_WINDOW_DAYS", "7", "days the complaint rate is measured over", positive(7)),
  complaintMinDelivered: knob(
    "COMPLAINT_MIN_DELIVERED",
    "1000",
    "deliveries in the window below which the brake never acts",
    positive(1000),
  ),
  complaintPauseHours: knob("COMPLAINT_PAUSE_HOURS", "24", "hours the brake pauses a tenant's bulk mail", positive(24)),
  siteGrouping: knob(
    "DESTINATION_GROUPING",
    "nexthop",
    '"site": an mx nexthop shares the Destination DO of its MX site; "nexthop": one per nexthop',
    (r) => r === "site",
  ),
  smtpTimeouts: knob(
    "SMTP_TIMEOUTS",
    "",
    "the SMTP client's per-step timeouts, JSON with Postfix's names; a malformed value is ignored",
    (r): Partial<SmtpTimeouts> => {
      if (!r) return {};
      try {
        return parseSmtpTimeouts(JSON.parse(r));
      } catch (e) {
        // Mail still goes out with Postfix's defaults rather than not at all.
        console.error(
          JSON.stringify({ error: "SMTP_TIMEOUTS ignored", detail: e instanceof Error ? e.message : String(e) }),
        );
        return {};
      }
    },
  ),
  mtaStsPort: knob(
    "MTA_STS_PORT",
    "443",
    "the port MTA-STS policies are fetched from (443; other values for local runs and tests)",
    (r) => {
      const port = Number(r || 443);
      return Number.isInteger(port) && port > 0 && port < 65536 ? port : 443;
    },
  ),
  mtaStsRefreshSeconds: knob(
    "MTA_STS_REFRESH_SECONDS",
    "86400",
    "seconds after which a cached MTA-STS policy's TXT record is checked again in the background",
    positive(86_400),
  ),
  tlsrptFrom: knob(
    "TLSRPT_FROM",
    "",
    'the From address of TLS-RPT reports sent by mail ("": mailto reports are not sent); the operator\'s DKIM_KEYS must cover its domain',
    (r) => r ?? "",
  ),
  tlsrptOrg: knob(
    "TLSRPT_ORG",
    "",
    'organization-name of TLS-RPT reports ("": HELO_NAME)',
    (r, vars) => r || vars.HELO_NAME || "cohort.localhost",
  ),
  egressPools: knob(
    "EGRESS_POOLS",
    "",
    'egress pools as JSON (worker/egress/core/pools.ts); "": every MX connection leaves by EGRESS',
    (r) => r ?? "",
  ),
  egressSuspendSeconds: knob(
    "EGRESS_SUSPEND_SECONDS",
    "300",
    "seconds an egress that failed its health is first suspended (doubling on each relapse, at most 16 times)",
    positive(300),
  ),
  egressFailures: knob("EGRESS_FAILURES", "3", "health failures of an egress within 60 s that suspend it", (r) =>
    countSetting(r, 3),
  ),
  metricsTopN: knob(
    "METRICS_TOP_N",
    "20",
    'destinations GET /metrics names one by one (the rest are summed as "other"), at most 200',
    (r) => Math.min(countSetting(r, 20), 200),
  ),
  webhooks: knob(
    "WEBHOOK_*",
    "",
    "WEBHOOK_DELAYED_EVERY_NTH, WEBHOOK_DELAYED_MIN_INTERVAL_SECONDS, WEBHOOK_RETRY_SCALE, WEBHOOK_TIMEOUT_MS (webhooks/core/webhook-config.ts)",
    (_r, vars): WebhookConfig => parseWebhookConfig(vars),
  ),
};
