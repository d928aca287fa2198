/*
 * NAME
 *   policy - Halon-style pickup policies on top of the destination window (spec §12.6)
 * DESCRIPTION
 *   An entry may carry policy keys: its message's tenant ("tenant:<id>"), campaign
 *   ("jobid:<tenant>/<campaign>", Halon's jobid) and bulk mail ("bulk:<tenant>", what the
 *   complaint brake suspends), its queue's egress source ("egress:<id>") and destination site
 *   ("site:<id>": the MX site, or a provider rule's name), its tags named in `policy_tags`
 *   (custom fields: "tag:<tenant>/<name>=<value>"), the MX address its destination's last
 *   delivery connected to ("remoteip:<ip>", Halon's remoteip), and always its transport
 *   ("transport:<name>") and destination ("dest:<transport>/<queue>"), so that an operator can
 *   cap or suspend any of them for a while. Combinations of fields configured as
 *   `policy_combinations` (e.g. "egress+site": one IP's jam at Yahoo does not slow another
 *   IP's) are keys of their own: "egress:<id>+site:<id>", present when every field is. Each key
 *   may have a rule: a concurrency cap, a rate (count per interval, as a token bucket whose
 *   burst is the count), a least interval between two selections (Halon's connectinterval),
 *   caps per UTC hour and day (an IP warm-up's, warmup.ts) and a suspension with an expiry.
 *   The combination egress+site is always a key of its own when both are known (the key an
 *   egress's warm-up caps are put on). A peer is selectable only while every key it carries has
 *   room. With no rules configured nothing here runs, and selection is exactly Postfix's.
 *
 *   setPolicy()/clearPolicy() change rules; policyKeysOf() lists an entry's keys;
 *   policyBlock() says whether (and why, and until when) a set of keys blocks selection;
 *   chargePolicies() and releasePolicies() count an entry in and out of flight.
 *   parseRate() reads "100/h"-style rates and formatRate() prints them back identically.
 *   rateOf() the rate in force: the rule's own, or while a reply rule's throttle lasts the
 *   stricter of the two (the bucket keeps its tokens, at most the rate in force's count).
 * INVARIANTS
 *   0 ≤ tokens ≤ rate.count; inflight counts only entries charged after the rule existed.
 * ERRORS
 *   parseRate returns null for a malformed rate.
 */
import type { MessageFields, PolicyCounter, PolicyRule, Qmgr } from "./model";
import { releaseBlockers } from "./job-list";

const RATE = /^(\d+)\s*\/\s*(\d*)\s*([smhd])$/;
const UNIT_SEC: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** Parses "100/h", "10/30s", "5/m" into a rate; null if malformed. */
export function parseRate(spec: string): { count: number; perSec: number } | null {
  const m = RATE.exec(spec.trim());
  if (!m) return null;
  const count = Number(m[1]);
  const mult = m[2] === "" ? 1 : Number(m[2]);
  const perSec = mult * (UNIT_SEC[m[3]!] ?? 1);
  return count > 0 && perSec > 0 ? { count, perSec } : null;
}

/** Prints a rate back in the form parseRate reads. */
export function formatRate(r: { count: number; perSec: number }): string {
  for (const [u, sec] of [
    ["d", 86400],
    ["h", 3600],
    ["m", 60],
    ["s", 1],
  ] as const) {
    if (r.perSec % sec === 0) return r.perSec === sec ? `${r.count}/${u}` : `${r.count}/${r.perSec / sec}${u}`;
  }
  return `${r.count}/${r.perSec}s`;
}

/** The rate in force at `now` (see the header), with the throttle's label when it is the throttle's. */
export function rateOf(rule: PolicyRule, now: number): { count: number; perSec: number; label?: string } | undefined {
  const t = rule.throttle !== undefined && rule.throttle.until > now ? rule.throttle : undefined;
  if (!t) return rule.rate;
  if (rule.rate && rule.rate.count / rule.rate.perSec <= t.count / t.perSec) return rule.rate;
  return { count: t.count, perSec: t.perSec, label: t.label };
}

/** Installs or replaces the rule of a key (e.g. "tenant:acme"). */
export function setPolicy(q: Qmgr, key: string, rule: PolicyRule, now: number): void {
  const old = q.policies.get(key);
  const rate = rateOf(rule, now);
  const tokens = rate ? Math.min(old && rateOf(old.rule, now) ? old.tokens : rate.count, rate.count) : 0;
  q.policies.set(key, { key, rule, inflight: old?.inflight ?? 0, tokens, tokensAt: now, wakeAt: 0 });
  // Jobs marked as blocked under the old rule are looked at again.
  for (const t of q.transports.values()) releaseBlockers(t);
}

/** Removes the rule of a key. */
export function clearPolicy(q: Qmgr, key: string): void {
  q.policies.delete(key);
  for (const t of q.transports.values()) releaseBlockers(t);
}

const HOUR = 3600;
const DAY = 86_400;

/** The start of the fixed window (UTC hour or day) holding `now`. */
function windowStart(now: number, size: number): number {
  return Math.floor(now / size) * size;
}

/** Selections counted in the window holding `now` (0 once a new window began). */
function countIn(w: { start: number; n: number } | undefined, now: number, size: number): number {
  return w !== undefined && w.start === windowStart(now, size) ? w.n : 0;
}

/** Refills a counter's token bucket up to `now`. */
function refill(c: PolicyCounter, now: number): void {
  const r = rateOf(c.rule, now);
  if (!r) return;
  if (now > c.tokensAt) c.tokens += ((now - c.tokensAt) * r.count) / r.perSec;
  c.tokens = Math.min(r.count, c.tokens);
  c.tokensAt = Math.max(c.tokensAt, now);
}

/** Why a key blocks selection, and until when (null = until something finishes). */
export interface PolicyBlock {
  key: string;
  reason: "suspended" | "concurrency" | "rate" | "interval" | "cap";
  until: number | null;
  /** The suspension's label (PolicyRule.label), when it has one. */
  label?: string;
}

/** The first key that blocks selection now, or null if all have room. */
export function policyBlock(q: Qmgr, keys: readonly string[], now: number): PolicyBlock | null {
  for (const key of keys) {
    const c = q.policies.get(key);
    if (!c) continue;
    const r = c.rule;
    if (r.suspendedUntil !== undefined && r.suspendedUntil > now)
      return { key, reason: "suspended", until: r.suspendedUntil, ...(r.label ? { label: r.label } : {}) };
    if (r.concurrency !== undefined && c.inflight >= r.concurrency) return { key, reason: "concurrency", until: null };
    if (r.interval !== undefined && c.lastAt !== undefined && now < c.lastAt + r.interval)
      return { key, reason: "interval", until: c.lastAt + r.interval };
    if (r.caps) {
      const label = r.caps.label ? { label: r.caps.label } : {};
      if (r.caps.perDay !== undefined && countIn(c.day, now, DAY) >= r.caps.perDay)
        return { key, reason: "cap", until: windowStart(now, DAY) + DAY, ...label };
      if (r.caps.perHour !== undefined && countIn(c.hour, now, HOUR) >= r.caps.perHour)
        return { key, reason: "cap", until: windowStart(now, HOUR) + HOUR, ...label };
    }
    const rate = rateOf(r, now);
    if (rate) {
      refill(c, now);
      if (c.tokens < 1) {
        const waitSec = Math.ceil(((1 - c.tokens) * rate.perSec) / rate.count);
        return { key, reason: "rate", until: now + Math.max(1, waitSec), ...(rate.label ? { label: rate.label } : {}) };
      }
    }
  }
  return null;
}

/** Counts an entry into flight for every ruled key; returns the counters charged. */
export function chargePolicies(q: Qmgr, keys: readonly string[], now: number): PolicyCounter[] | null {
  let charged: PolicyCounter[] | null = null;
  for (const key of keys) {
    const c = q.policies.get(key);
    if (!c) continue;
    c.inflight += 1;
    countSelection(c, now);
    (charged ??= []).push(c);
  }
  return charged;
}

/**
 * Counts a selection that happened before the entry carried `keys` (its destination's provider,
 * egress or address were learned from its own report) against their intervals, caps and rates;
 * it is not in flight under them, so concurrency is untouched.
 */
export function countLate(q: Qmgr, keys: readonly string[], now: number): void {
  for (const key of keys) {
    const c = q.policies.get(key);
    if (c) countSelection(c, now);
  }
}

/** One selection against a key's interval (its time), caps (this hour's and day's counts) and rate (a token). */
function countSelection(c: PolicyCounter, now: number): void {
  if (c.rule.interval !== undefined) c.lastAt = now;
  if (c.rule.caps) {
    c.hour = { start: windowStart(now, HOUR), n: countIn(c.hour, now, HOUR) + 1 };
    c.day = { start: windowStart(now, DAY), n: countIn(c.day, now, DAY) + 1 };
  }
  if (rateOf(c.rule, now)) {
    refill(c, now);
    c.tokens -= 1;
  }
}

/** Counts an entry out of flight; true if a concurrency cap gained room. */
export function releasePolicies(charged: readonly PolicyCounter[] | null): boolean {
  if (!charged) return false;
  let freed = false;
  for (const c of charged) {
    if (c.inflight > 0) c.inflight -= 1;
    if (c.rule.concurrency !== undefined && c.inflight === c.rule.concurrency - 1) freed = true;
  }
  return freed;
}

/** The combination every entry carries when both are known: an egress's warm-up caps go on it. */
const WARMUP_COMBINATION: readonly PolicyField[] = ["egress", "site"];

/** The fields a policy key or combination may name. */
export const POLICY_FIELDS = ["transport", "dest", "tenant", "jobid", "bulk", "egress", "site", "remoteip"] as const;
export type PolicyField = (typeof POLICY_FIELDS)[number];

/**
 * The policy keys of an entry of a message (tenant, fields) for a queue (transport, destination,
 * egress, site), and of each configured combination whose fields are all present.
 */
export function policyKeysOf(
  tenant: string | null,
  transport: string,
  queue: string,
  egress: string | null,
  site: string | null,
  fields?: MessageFields,
  combinations: readonly (readonly PolicyField[])[] = [],
  remoteip: string | null = null,
): string[] {
  const one: Partial<Record<PolicyField, string>> = {
    transport: `transport:${transport}`,
    dest: `dest:${transport}/${queue}`,
  };
  if (tenant !== null) one.tenant = `tenant:${tenant}`;
  if (fields?.jobid !== undefined) one.jobid = `jobid:${tenant ?? ""}/${fields.jobid}`;
  if (fields?.bulk) one.bulk = `bulk:${tenant ?? ""}`;
  if (egress !== null) one.egress = `egress:${egress}`;
  if (site !== null) one.site = `site:${site}`;
  if (remoteip !== null) one.remoteip = `remoteip:${remoteip}`;
  const keys = POLICY_FIELDS.flatMap((f) => (one[f] !== undefined ? [one[f]!] : []));
  if (fields?.tags)
    for (const name of Object.keys(fields.tags).sort()) keys.push(`tag:${tenant ?? ""}/${name}=${fields.tags[name]}`);
  for (const combo of [WARMUP_COMBINATION, ...combinations]) {
    const parts = combo.map((f) => one[f]);
    if (!parts.every((p) => p !== undefined)) continue;
    const key = parts.join("+");
    if (!keys.includes(key)) keys.push(key);
  }
  return keys;
}
