/*
 * NAME
 *   mta-sts - SMTP MTA Strict Transport Security (RFC 8461): the TXT record, the policy, the
 *             cache rules and what a policy asks of one delivery
 *
 * SUMMARY
 *   Pure decisions of the mx kind's MTA-STS: the shell (worker/tls-policy/sts.ts) asks DoH and
 *   HTTPS and hands the answers here.
 *
 * DESCRIPTION
 *   parseStsRecord(txts)      the `_mta-sts.<domain>` TXT answers → { id } | null. Exactly one
 *                             record must start with "v=STSv1" (RFC 8461 3.1); none, several or
 *                             one without a valid id (1–32 letters and digits) is null.
 *   parsePolicy(text)         the policy file (3.2) → StsPolicy or { error }: version STSv1,
 *                             mode enforce | testing | none, max_age 0–31557600, mx patterns
 *                             (required unless mode none). Lines end in LF or CRLF; unknown keys
 *                             are ignored.
 *   mxMatches(pattern, host)  4.1: a literal name, or "*." and a name that matches exactly one
 *                             more leftmost label.
 *   nextLookup(cached, nowSec, cfg)  what to do with the cache entry of a domain before a
 *                             delivery: "use" (fresh), "use-and-refresh" (fresh but due for its
 *                             proactive check, done in the background), or "lookup" (none, or
 *                             expired: discover now).
 *   afterDiscovery(cached, record, fetched, nowSec)  5.1's rules once the TXT answer (and, when
 *                             needed, the fetch) is known: a new id is fetched; a failed fetch
 *                             keeps an unexpired cached policy, else no policy applies; no TXT
 *                             record with an unexpired cached policy keeps it (a removed record
 *                             does not end a policy before max_age).
 *   planDelivery(policy, hosts)  what the policy asks of one delivery: for `enforce`, the MX hosts
 *                             it allows (in order) and STARTTLS with a certificate valid for each
 *                             host's name; `testing` and `none` allow every host as usual.
 *   policyStrings(policy)     the policy as RFC 8460's "policy-string" lines.
 *
 * INVARIANTS
 *   A policy is never used past fetchedAt + max_age. mode none (or no policy) never restricts.
 *
 * ERRORS
 *   None thrown: malformed input is null or { error }.
 */

/** A parsed policy (3.2). */
export interface StsPolicy {
  mode: "enforce" | "testing" | "none";
  mx: string[];
  maxAge: number;
}

/** The cache entry of one policy domain (shared by every delivery agent). */
export interface StsCacheEntry {
  /** The TXT record's id when the policy was fetched; null: the domain has no policy (negative entry). */
  id: string | null;
  policy: StsPolicy | null;
  /** When the policy was fetched, or the negative answer seen (epoch seconds). */
  fetchedAt: number;
  /** When the entry stops being usable: fetchedAt + max_age, or the negative TTL (epoch seconds). */
  expiresAt: number;
  /** When the TXT record was last checked (epoch seconds). */
  checkedAt: number;
}

/** Cache lifetimes, seconds. */
export interface StsCacheConfig {
  /** How often a fresh entry's TXT record is checked again in the background (RFC 8461 10.2: daily). */
  refreshSec: number;
  /** How long "no policy" (or a policy that could not be fetched) is remembered. */
  negativeSec: number;
}

export const DEFAULT_STS_CACHE: Readonly<StsCacheConfig> = Object.freeze({ refreshSec: 86_400, negativeSec: 3_600 });

/** The largest max_age (3.2: about one year). */
export const MAX_AGE_LIMIT = 31_557_600;

const ID = /^[A-Za-z0-9]{1,32}$/;

/** The TXT record (see the header). */
export function parseStsRecord(txts: readonly string[]): { id: string } | null {
  const sts = txts.filter((t) => /^v=STSv1(;|\s|$)/.test(t.trim()));
  if (sts.length !== 1) return null;
  const fields = new Map<string, string>();
  for (const part of sts[0]!.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0) fields.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  const id = fields.get("id");
  return id !== undefined && ID.test(id) ? { id } : null;
}

/** The policy file (see the header). */
export function parsePolicy(text: string): StsPolicy | { error: string } {
  const mx: string[] = [];
  let version: string | null = null;
  let mode: string | null = null;
  let maxAge: number | null = null;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === "") continue;
    const colon = line.indexOf(":");
    if (colon <= 0) return { error: `policy line without a key: ${JSON.stringify(line.slice(0, 80))}` };
    const key = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (key === "version") version = value;
    else if (key === "mode") mode = value;
    else if (key === "max_age") maxAge = /^\d{1,10}$/.test(value) ? Number(value) : -1;
    else if (key === "mx") mx.push(value.toLowerCase().replace(/\.$/, ""));
  }
  if (version !== "STSv1") return { error: "policy version is not STSv1" };
  if (mode !== "enforce" && mode !== "testing" && mode !== "none")
    return { error: `policy mode ${JSON.stringify(mode)} is not enforce, testing or none` };
  if (maxAge === null || maxAge < 0 || maxAge > MAX_AGE_LIMIT)
    return { error: "policy max_age is missing or out of range" };
  if (mode !== "none" && mx.length === 0) return { error: "policy lists no mx" };
  if (mx.some((p) => !/^(\*\.)?[a-z0-9_-]+(\.[a-z0-9_-]+)+$/.test(p)))
    return { error: "policy has a malformed mx pattern" };
  return { mode, mx, maxAge };
}

/** Whether an mx pattern covers a host (see the header). */
export function mxMatches(pattern: string, host: string): boolean {
  const p = pattern.toLowerCase().replace(/\.$/, "");
  const h = host.toLowerCase().replace(/\.$/, "");
  if (!p.startsWith("*.")) return p === h;
  const dot = h.indexOf(".");
  return dot > 0 && h.slice(dot + 1) === p.slice(2);
}

/** What to do with a domain's cache entry before a delivery (see the header). */
export function nextLookup(
  cached: StsCacheEntry | null,
  nowSec: number,
  cfg: StsCacheConfig = DEFAULT_STS_CACHE,
): "use" | "use-and-refresh" | "lookup" {
  if (cached === null || nowSec >= cached.expiresAt) return "lookup";
  return nowSec - cached.checkedAt >= cfg.refreshSec ? "use-and-refresh" : "use";
}

/** What was learned: the TXT record (null: none or invalid; "failed": the lookup failed) and, when a fetch was needed, its result. */
export type Discovery = { record: { id: string } | null | "failed"; fetched?: StsPolicy | { error: string } };

/** Whether a discovery needs the policy fetched (a record whose id is not the cached policy's). */
export function needsFetch(cached: StsCacheEntry | null, record: Discovery["record"], nowSec: number): boolean {
  if (record === null || record === "failed") return false;
  return !(cached !== null && cached.policy !== null && cached.id === record.id && nowSec < cached.expiresAt);
}

/** The new cache entry after a discovery (see the header). */
export function afterDiscovery(
  cached: StsCacheEntry | null,
  d: Discovery,
  nowSec: number,
  cfg: StsCacheConfig = DEFAULT_STS_CACHE,
): StsCacheEntry {
  const live = cached !== null && cached.policy !== null && nowSec < cached.expiresAt ? cached : null;
  const none = (): StsCacheEntry => ({
    id: null,
    policy: null,
    fetchedAt: nowSec,
    expiresAt: nowSec + cfg.negativeSec,
    checkedAt: nowSec,
  });
  if (d.record === "failed" || d.record === null) {
    // 5.1: a policy stays in force until it expires, whatever DNS says meanwhile.
    if (live) return { ...live, checkedAt: nowSec };
    return d.record === "failed" ? { ...none(), expiresAt: nowSec + Math.min(cfg.negativeSec, 300) } : none();
  }
  if (!needsFetch(live, d.record, nowSec)) return { ...live!, checkedAt: nowSec };
  const f = d.fetched;
  if (f && !("error" in f))
    return { id: d.record.id, policy: f, fetchedAt: nowSec, expiresAt: nowSec + f.maxAge, checkedAt: nowSec };
  // A record whose policy cannot be fetched: the cached policy if any, else deliver as if none (5.1).
  if (live) return { ...live, checkedAt: nowSec };
  return { ...none(), expiresAt: nowSec + Math.min(cfg.negativeSec, 300) };
}

/** What a policy asks of one delivery (see the header). */
export interface StsPlan {
  mode: "enforce" | "testing" | "none";
  /** The hosts that may be tried, in order. */
  hosts: string[];
  /** Hosts the policy excludes (enforce), for the report. */
  excluded: string[];
  /** STARTTLS with a certificate valid for the host name is required. */
  requireTls: boolean;
}

export function planDelivery(policy: StsPolicy | null, hosts: readonly string[]): StsPlan {
  if (policy === null || policy.mode === "none")
    return { mode: "none", hosts: [...hosts], excluded: [], requireTls: false };
  const ok = (h: string) => policy.mx.some((p) => mxMatches(p, h));
  if (policy.mode === "testing")
    return { mode: "testing", hosts: [...hosts], excluded: hosts.filter((h) => !ok(h)), requireTls: false };
  return { mode: "enforce", hosts: hosts.filter(ok), excluded: hosts.filter((h) => !ok(h)), requireTls: true };
}

/** The policy as RFC 8460 policy-string lines. */
export function policyStrings(p: StsPolicy): string[] {
  return ["version: STSv1", `mode: ${p.mode}`, ...p.mx.map((m) => `mx: ${m}`), `max_age: ${p.maxAge}`];
}
