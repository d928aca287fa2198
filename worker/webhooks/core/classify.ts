/*
 * NAME
 *   classify - bounce classification from one table of rules
 *
 * SUMMARY
 *   Maps an SMTP result (reply code, RFC 3463 enhanced code, response text)
 *   to a bounce category for data.classification (api-conventions §7), in
 *   the manner of KumoMTA's bounce rule files.
 *
 * DESCRIPTION
 *   BOUNCE_RULES is the single ordered table. Each rule names a category and
 *   up to three patterns: `code` over the three-digit reply code, `enhanced`
 *   over the enhanced code ("5.1.1") and `text` over the response text. A
 *   rule matches when every pattern it has matches; a rule with none never
 *   matches. The first matching rule wins, so specific rules (provider
 *   throttles, DMARC) sit above generic ones (any 5.7.x, any 4xx).
 *
 *   classifyBounce(result) returns the category and the name of the rule
 *   that matched, or "unknown" with rule null. When the enhanced code is
 *   missing it is taken from the start of the response text, where servers
 *   usually repeat it ("550-5.1.1 The email account ...").
 *
 *   Yahoo's "421 4.7.0 [TSS04] ... deferred due to user complaints" is a
 *   reputation throttle on the sending IP, so it is rate_limited: a
 *   site-level signal for the scheduler, not a fault of the recipient.
 *
 * INVARIANTS
 *   classifyBounce is total and deterministic; the answer depends only on
 *   the input and the table order.
 *
 * ERRORS
 *   None thrown.
 */

/** The bounce categories carried in data.classification. */
export type BounceCategory =
  | "invalid_recipient"
  | "bad_domain"
  | "mailbox_full"
  | "message_too_large"
  | "policy"
  | "spam_block"
  | "dns_failure"
  | "timeout"
  | "expired"
  | "auth_failure"
  | "rate_limited"
  | "transient"
  | "unknown";

/** The SMTP result being classified; codes may be absent for local failures. */
export interface SmtpResult {
  smtpCode: number | null;
  enhancedCode: string | null;
  response: string;
}

/** One row of the table; every pattern present must match. */
export interface BounceRule {
  name: string;
  category: BounceCategory;
  code?: RegExp;
  enhanced?: RegExp;
  text?: RegExp;
}

/** Result of classification: the category and the rule that decided it. */
export interface Classification {
  category: BounceCategory;
  rule: string | null;
}

/** The one ordered rule table; first match wins (see the module header). */
export const BOUNCE_RULES: readonly BounceRule[] = [
  // Site-level throttles first: providers mix them into 4xx and 5xx alike.
  { name: "yahoo-tss", category: "rate_limited", text: /\[TS[S]?0\d\]/i },
  { name: "gmail-rate", category: "rate_limited", enhanced: /^4\.7\.28$/ },
  { name: "receiving-rate", category: "rate_limited", enhanced: /^4\.2\.1$/, text: /rate/i },
  {
    name: "rate-text",
    category: "rate_limited",
    text: /rate.?limit|too many\b.{0,30}\b(connections|messages|recipients|sessions)|throttl|try again later.*(volume|rate)|exceeded.*(rate|connection) limit/i,
  },
  // Sender authentication (SPF, DKIM, DMARC) before the generic 5.7.x rows.
  { name: "auth-enhanced", category: "auth_failure", enhanced: /^[45]\.7\.(2[0-7]|8)$/ },
  {
    name: "auth-text",
    category: "auth_failure",
    text: /\bDMARC\b|\bDKIM\b|\bSPF\b|unauthenticated|authentication (failed|required)/i,
  },
  // Reputation and block lists.
  {
    name: "blocklist",
    category: "spam_block",
    text: /block ?list|black ?list|spamhaus|spamcop|barracuda|\bRBL\b|\bDNSBL\b|\(S3150\)|listed (at|by|on)|poor reputation|IP reputation/i,
  },
  { name: "spam-content", category: "spam_block", text: /\bspam\b|\bjunk\b|unsolicited/i },
  // Domain-level problems.
  { name: "null-mx", category: "bad_domain", enhanced: /^5\.1\.10$/ },
  { name: "bad-domain-enhanced", category: "bad_domain", enhanced: /^5\.1\.2$/ },
  {
    name: "bad-domain-text",
    category: "bad_domain",
    text: /null MX|no such domain|domain (does not exist|not found|name not found)|NXDOMAIN|unrouteable address/i,
  },
  { name: "dns-enhanced", category: "dns_failure", enhanced: /^[45]\.4\.[34]$/ },
  {
    name: "dns-text",
    category: "dns_failure",
    text: /host not found|name service error|DNS (lookup|resolution|failure|error|timeout)|no (MX|A|address) record/i,
  },
  // Recipient-level problems.
  { name: "mailbox-full-enhanced", category: "mailbox_full", enhanced: /^[45]\.2\.2$/ },
  {
    name: "mailbox-full-text",
    category: "mailbox_full",
    text: /mailbox (is )?full|over ?quota|quota exceeded|exceeded (storage|its) (allocation|quota)/i,
  },
  { name: "too-large-enhanced", category: "message_too_large", enhanced: /^[45]\.(3\.4|2\.3)$/ },
  {
    name: "too-large-text",
    category: "message_too_large",
    text: /message (size|is too (big|large))|too (big|large)|exceeds.*size/i,
  },
  { name: "invalid-enhanced", category: "invalid_recipient", enhanced: /^5\.1\.[1346]$|^5\.2\.1$/ },
  {
    name: "invalid-text",
    category: "invalid_recipient",
    code: /^5/,
    text: new RegExp(
      /user unknown|unknown user|no such (user|mailbox|recipient)|does not exist|recipient (address )?rejected/.source +
        "|" +
        /invalid (recipient|mailbox|address)|mailbox (unavailable|not found)|address rejected/.source,
      "i",
    ),
  },
  // Connection-level and queue-level outcomes, mostly produced locally.
  { name: "expired-enhanced", category: "expired", enhanced: /^[45]\.4\.7$/ },
  { name: "expired-text", category: "expired", text: /expired|too long in (the )?queue|retry time(out)? exceeded/i },
  { name: "timeout-enhanced", category: "timeout", enhanced: /^4\.4\.[12]$/ },
  { name: "timeout-text", category: "timeout", text: /timed? ?out|timeout|no answer|connection (refused|reset)/i },
  // Generic policy, then anything transient.
  { name: "policy-enhanced", category: "policy", enhanced: /^5\.7\.\d+$/ },
  {
    name: "policy-text",
    category: "policy",
    code: /^5/,
    text: /policy|not allowed|access denied|relay(ing)? (access )?denied|prohibited/i,
  },
  { name: "transient-code", category: "transient", code: /^4/ },
  { name: "transient-enhanced", category: "transient", enhanced: /^4\./ },
];

const ENHANCED_IN_TEXT = /(?:^|[\s-])([245]\.\d{1,3}\.\d{1,3})(?=\s|$)/;

/** Returns the enhanced code given, or the first one found in the response text. */
export function effectiveEnhancedCode(result: SmtpResult): string | null {
  if (result.enhancedCode !== null && result.enhancedCode !== "") return result.enhancedCode;
  const found = ENHANCED_IN_TEXT.exec(result.response);
  return found?.[1] ?? null;
}

/** Tests one rule against an already normalised result. */
export function ruleMatches(rule: BounceRule, code: string, enhanced: string, text: string): boolean {
  if (rule.code === undefined && rule.enhanced === undefined && rule.text === undefined) return false;
  if (rule.code !== undefined && !rule.code.test(code)) return false;
  if (rule.enhanced !== undefined && !rule.enhanced.test(enhanced)) return false;
  if (rule.text !== undefined && !rule.text.test(text)) return false;
  return true;
}

/** Classifies an SMTP result with BOUNCE_RULES (or a supplied table); first match wins. */
export function classifyBounce(result: SmtpResult, rules: readonly BounceRule[] = BOUNCE_RULES): Classification {
  const code = result.smtpCode === null ? "" : String(result.smtpCode);
  const enhanced = effectiveEnhancedCode(result) ?? "";
  for (const rule of rules) {
    if (ruleMatches(rule, code, enhanced, result.response)) return { category: rule.category, rule: rule.name };
  }
  return { category: "unknown", rule: null };
}
