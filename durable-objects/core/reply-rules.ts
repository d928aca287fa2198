/*
 * NAME
 *   reply-rules - reactions to what a server says when it throttles (issue #13, item 3)
 * DESCRIPTION
 *   A reply rule matches the reply that deferred a delivery: a site failure's (the server
 *   refused the session: at the greeting, EHLO, or with a 421), or else the first deferring
 *   reply of the transaction (Yahoo answers TSS04 to MAIL FROM), by reply code, enhanced status
 *   code prefix and a case-insensitive text pattern, all given ones together. The first rule
 *   that matches acts, in one of these ways:
 *     suspend  {scope, seconds}: a suspension of `seconds` on the destination's site (all domains
 *              behind the same MX hosts, when grouping by site), on its egress, or on the
 *              destination (transport and nexthop). It never shortens a suspension in force.
 *     rate     {scope, rate, seconds}: at most `rate` ("60/h") selections for `seconds` on the
 *              same keys (PolicyRule.throttle: the stricter of it and an operator's own rate
 *              applies; a throttle in force is only made stricter or longer).
 *     ceiling  {}: the reply is taken as a concurrency refusal: the destination's learned
 *              ceiling goes to the sessions it had open, less one (destination-window.ts; only
 *              with the learned ceiling on), however the server worded it.
 *     defer    {}: a permanent (5xx) reply counts as a deferral: its recipients are retried,
 *              not bounced (the delivery stage applies it: outcomeOverride).
 *     bounce   {}: a temporary (4xx) reply counts as a bounce: its recipients fail at once.
 *   suspend and rate are pickup policies (policy.ts) labelled `reply_rule:<name>`, which is what
 *   blocked_by shows; they keep any concurrency cap, rate or suspension an operator set on the
 *   same key. defer and bounce match every reply of a transaction, the others the deferring
 *   ones the Transport DO is told of (a site failure's, or the first deferring reply).
 *
 *   DEFAULT_REPLY_RULES are the well-known throttling replies of the big providers, each with
 *   where its wording comes from. A configuration may replace them (`reply_rules`, [] for none).
 *
 *   replyOf() reads the code, enhanced code and text back from a site failure as the SMTP
 *   client reports it ("<what happened>: <code> <enhanced> <text>").
 *   matchReplyRule() the first rule that matches a reply, or null.
 *   replyRulePolicy() the policy key and rule a suspend or rate match installs (merged with the
 *   key's own).
 *   outcomeOverride() what a defer or bounce rule makes of one recipient's reply, or null.
 * INVARIANTS
 *   Pure: no I/O, the time is passed in. With no rule matching, nothing here changes anything.
 * ERRORS
 *   parseReplyRules returns the problems of a malformed list instead of throwing.
 */
import type { PolicyRule } from "./model";
import { parseRate } from "./policy";

export type ReplyRuleScope = "site" | "egress" | "destination";

/** One rule (see the header). */
export interface ReplyRule {
  name: string;
  /** Reply codes it matches; any when absent. */
  codes?: number[];
  /** Enhanced status code prefix it matches ("4.7." or "4.7.28"); any when absent. */
  enhanced?: string;
  /** Case-insensitive regular expression the reply text must contain; any when absent. */
  text?: string;
  action: ReplyRuleAction;
  /** Where the reply's wording and the reaction come from. */
  source?: string;
}

/** What a rule does (see the header). */
export type ReplyRuleAction =
  | { kind: "suspend"; scope: ReplyRuleScope; seconds: number }
  | { kind: "rate"; scope: ReplyRuleScope; rate: string; seconds: number }
  | { kind: "ceiling" }
  | { kind: "defer" }
  | { kind: "bounce" };

/** A reply as matched: code, enhanced code (null when none) and the text after them. */
export interface ReplyInfo {
  code: number | null;
  enhanced: string | null;
  text: string;
}

/** The shipped rules (see the header); each one's `source` says where it comes from. */
export const DEFAULT_REPLY_RULES: readonly ReplyRule[] = [
  {
    name: "yahoo-tss04",
    codes: [421],
    text: "\\[TSS04\\]",
    action: { kind: "suspend", scope: "site", seconds: 3600 },
    source:
      'Yahoo answers "421 4.7.0 [TSS04] Messages from <ip> temporarily deferred due to unexpected volume or user complaints" ' +
      "to MAIL FROM and points to postmaster.yahooinc.com/error-codes; the deferral lifts after hours, so retrying sooner only adds deferrals",
  },
  {
    name: "yahoo-ts",
    codes: [421],
    text: "\\[TS0[1-3]\\]",
    action: { kind: "suspend", scope: "site", seconds: 3600 },
    source:
      'Yahoo\'s older "421 4.7.0 [TS01]"–"[TS03]" temporary deferrals for unusual traffic or complaints from the sending IP',
  },
  {
    name: "gmail-4.7.28",
    enhanced: "4.7.28",
    action: { kind: "suspend", scope: "site", seconds: 900 },
    source:
      'Gmail answers 421 4.7.28 when it sees "an unusual rate of unsolicited mail" ' +
      "from the sending IP and rate-limits it (Gmail's SMTP error reference, support.google.com/a/answer/3726730)",
  },
  {
    name: "microsoft-4.7.650",
    enhanced: "4.7.650",
    action: { kind: "suspend", scope: "site", seconds: 3600 },
    source:
      'Outlook.com answers 451 4.7.650 "has been temporarily rate limited due to IP reputation" ' +
      "(Microsoft's sender support, sendersupport.olc.protection.outlook.com/pm)",
  },
];

const REPLY = /(?:^|:\s)([2-5]\d\d)(?:[ -]([245]\.\d{1,3}\.\d{1,3}))?\s*(.*)$/s;

/** Reads a site failure's reply (see the header); the code is null when the reason holds none. */
export function replyOf(failure: { dsnStatus: string; reason: string }): ReplyInfo {
  const m = REPLY.exec(failure.reason);
  if (!m) return { code: null, enhanced: failure.dsnStatus || null, text: failure.reason };
  return { code: Number(m[1]), enhanced: m[2] ?? (failure.dsnStatus || null), text: m[3] ?? "" };
}

const compiled = new Map<string, RegExp>();
function pattern(text: string): RegExp {
  let re = compiled.get(text);
  if (!re) compiled.set(text, (re = new RegExp(text, "i")));
  return re;
}

/** The first rule that matches `reply`, or null. */
export function matchReplyRule(rules: readonly ReplyRule[], reply: ReplyInfo): ReplyRule | null {
  for (const r of rules) {
    if (r.codes && (reply.code === null || !r.codes.includes(reply.code))) continue;
    if (r.enhanced !== undefined && !(reply.enhanced ?? "").startsWith(r.enhanced)) continue;
    if (r.text !== undefined && !pattern(r.text).test(reply.text)) continue;
    return r;
  }
  return null;
}

/** The label of a rule's policy, as blocked_by shows it. */
export function replyRuleLabel(rule: Pick<ReplyRule, "name">): string {
  return `reply_rule:${rule.name}`;
}

/** A destination as a rule's scope names it: transport, queue name, and the queue's egress and site. */
export type ReplyRuleDest = { transport: string; queue: string; egress: string | null; site: string | null };

/** The policy key a match puts its suspension on (its scope; the destination when the queue has no site or egress). */
export function replyRuleKey(rule: ReplyRule, dest: ReplyRuleDest): string {
  const scope = "scope" in rule.action ? rule.action.scope : "destination";
  return scope === "site" && dest.site !== null
    ? `site:${dest.site}`
    : scope === "egress" && dest.egress !== null
      ? `egress:${dest.egress}`
      : `dest:${dest.transport}/${dest.queue}`;
}

/**
 * The policy key a suspend or rate match acts on (replyRuleKey), the rule that key gets, and
 * until when it acts. suspend: the existing rule with a suspension until `now + seconds` (never
 * earlier than one in force) and the rule's label. rate: the existing rule with a throttle of
 * the rate until `now + seconds`; one in force stays when it is stricter, and lasts at least as
 * long as it did. null for the other kinds.
 */
export function replyRulePolicy(
  rule: ReplyRule,
  dest: ReplyRuleDest,
  existing: PolicyRule | undefined,
  now: number,
): { key: string; rule: PolicyRule; until: number } | null {
  const key = replyRuleKey(rule, dest);
  const a = rule.action;
  if (a.kind !== "suspend" && a.kind !== "rate") return null;
  if (a.kind === "suspend") {
    const until = Math.max(now + a.seconds, existing?.suspendedUntil ?? 0);
    const keepLabel = existing?.suspendedUntil !== undefined && existing.suspendedUntil > now + a.seconds;
    return {
      key,
      until,
      rule: { ...existing, suspendedUntil: until, label: keepLabel ? existing.label! : replyRuleLabel(rule) },
    };
  }
  const rate = parseRate(a.rate)!;
  const old = existing?.throttle !== undefined && existing.throttle.until > now ? existing.throttle : undefined;
  const until = Math.max(now + a.seconds, old?.until ?? 0);
  const stricter = old !== undefined && old.count / old.perSec <= rate.count / rate.perSec;
  const throttle = stricter
    ? { ...old, until }
    : { count: rate.count, perSec: rate.perSec, until, label: replyRuleLabel(rule) };
  return { key, until, rule: { ...existing, throttle } };
}

/**
 * What a defer or bounce rule makes of one recipient's reply (see the header): "deferred" for a
 * 5xx a defer rule matches, "bounced" for a 4xx a bounce rule matches, with the rule; null when
 * the first rule that matches is of another kind, or there is none.
 */
export function outcomeOverride(
  rules: readonly ReplyRule[],
  reply: ReplyInfo,
): { status: "deferred" | "bounced"; rule: ReplyRule } | null {
  const rule = matchReplyRule(rules, reply);
  if (!rule || reply.code === null) return null;
  if (rule.action.kind === "defer" && reply.code >= 500) return { status: "deferred", rule };
  if (rule.action.kind === "bounce" && reply.code >= 400 && reply.code < 500) return { status: "bounced", rule };
  return null;
}

/** Validates a configured list (see the header): the rules, or the problems. */
export function parseReplyRules(input: unknown): { ok: true; rules: ReplyRule[] } | { ok: false; errors: string[] } {
  if (!Array.isArray(input)) return { ok: false, errors: ["reply_rules: must be a list"] };
  const errors: string[] = [];
  const names = new Set<string>();
  input.forEach((r: Partial<ReplyRule> | null, i) => {
    const at = `reply_rules[${i}]`;
    if (r === null || typeof r !== "object") return errors.push(`${at}: must be an object`);
    if (typeof r.name !== "string" || !/^[a-z0-9][a-z0-9._-]{0,63}$/.test(r.name))
      errors.push(`${at}.name: lower-case letters, digits, '.', '_' or '-', at most 64`);
    else if (names.has(r.name)) errors.push(`${at}.name: "${r.name}" is used twice`);
    else names.add(r.name);
    if (
      r.codes !== undefined &&
      (!Array.isArray(r.codes) || r.codes.some((c) => !Number.isInteger(c) || c < 200 || c > 599))
    )
      errors.push(`${at}.codes: reply codes 200–599`);
    if (r.enhanced !== undefined && (typeof r.enhanced !== "string" || !/^[245](\.\d{0,3}){0,2}\.?$/.test(r.enhanced)))
      errors.push(`${at}.enhanced: an enhanced status code or its prefix, e.g. "4.7."`);
    if (r.text !== undefined) {
      try {
        if (typeof r.text !== "string") throw new Error();
        new RegExp(r.text, "i");
      } catch {
        errors.push(`${at}.text: a regular expression`);
      }
    }
    if (r.codes === undefined && r.enhanced === undefined && r.text === undefined)
      errors.push(`${at}: needs codes, enhanced or text (a rule that matches every reply)`);
    const problem = actionProblem(r.action);
    if (problem) errors.push(`${at}.action: ${problem}`);
    return undefined;
  });
  return errors.length > 0 ? { ok: false, errors } : { ok: true, rules: input as ReplyRule[] };
}

const SCOPED = `"scope":"site"|"egress"|"destination","seconds":1..604800`;

/** What is wrong with a configured action, or null. */
function actionProblem(a: Partial<Record<string, unknown>> | undefined): string | null {
  const kinds = `{"kind":"suspend",${SCOPED}}, {"kind":"rate","rate":"<n>/<unit>",${SCOPED}}, {"kind":"ceiling"}, {"kind":"defer"} or {"kind":"bounce"}`;
  if (!a || typeof a !== "object") return kinds;
  if (a.kind === "ceiling" || a.kind === "defer" || a.kind === "bounce")
    return Object.keys(a).length === 1 ? null : `{"kind":"${a.kind}"} takes nothing else`;
  if (a.kind !== "suspend" && a.kind !== "rate") return kinds;
  const scoped =
    typeof a.scope === "string" &&
    ["site", "egress", "destination"].includes(a.scope) &&
    Number.isInteger(a.seconds) &&
    (a.seconds as number) >= 1 &&
    (a.seconds as number) <= 7 * 86400;
  if (a.kind === "suspend") return scoped ? null : `{"kind":"suspend",${SCOPED}}`;
  return scoped && typeof a.rate === "string" && parseRate(a.rate) !== null
    ? null
    : `{"kind":"rate","rate":"<n>/<unit>" (e.g. "60/h"),${SCOPED}}`;
}
