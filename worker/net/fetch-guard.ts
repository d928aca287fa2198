/**
 * The SSRF guard's second half at send time: the addresses a webhook host name resolves to.
 *
 * DESCRIPTION
 *   resolvedTarget(env, url, deps?, always?)  for a URL whose host is a name (IP literals are judged by
 *                         core/ssrf.ts checkEndpointUrl), asks the DoH resolver (DOH_RESOLVER_URL,
 *                         the JSON API) for its A and AAAA records and checks every address with
 *                         checkResolvedAddress: { kind: "ok" }, { kind: "refused", reason } when
 *                         any address is in a special range (loopback, private, link-local,
 *                         metadata…), or { kind: "unresolved", reason } when the resolver failed
 *                         or the name has no address (a transient failure: retry later). Under
 *                         COHORT_ENV development or test nothing is resolved (local receivers
 *                         listen on loopback), unless `always` (attachments by path: only the
 *                         declared local origins skip the guard, path-attachments.ts). Answers are cached per isolate for their TTL, at
 *                         most CACHE_MAX_MS, so a busy endpoint costs one lookup a minute.
 *
 * INVARIANTS
 *   A name is allowed only when it has at least one address and every address is public.
 *   fetch() resolves again on its own; the window between the two lookups is short and capped by
 *   the TTL cache (DNS rebinding within it is not excluded; Workers cannot pin an address).
 */
import { DNS_STATUS, DNS_TYPE, parseDohJson, selectAnswers } from "./core/doh";
import { queryDoh } from "./mx";
import { checkResolvedAddress } from "./core/ssrf";
import { classifyIp } from "./core/ip-address";
import { settingsOf } from "../settings/settings";

/** Longest time a resolution is trusted. */
export const CACHE_MAX_MS = 60_000;

/** What the resolved addresses allow. */
export type ResolvedVerdict =
  { kind: "ok" } | { kind: "refused"; reason: string } | { kind: "unresolved"; reason: string };

type Cached = { verdict: ResolvedVerdict; until: number };
const cache = new Map<string, Cached>();

/** Injected for tests. */
export interface ResolveDeps {
  fetch?: typeof fetch;
  now?: () => number;
}

async function addresses(
  name: string,
  type: "A" | "AAAA",
  resolverUrl: string,
  deps: ResolveDeps,
): Promise<{ ips: string[]; ttl: number } | { error: string }> {
  const event = await queryDoh(name, type, { resolverUrl, ...(deps.fetch ? { fetch: deps.fetch } : {}) });
  if (event.kind === "failed") return { error: event.reason };
  const msg = parseDohJson(event.body);
  if ("error" in msg) return { error: msg.error };
  if (msg.status === DNS_STATUS.NXDOMAIN) return { ips: [], ttl: 60 };
  if (msg.status !== DNS_STATUS.NOERROR) return { error: `resolver status ${msg.status}` };
  const sel = selectAnswers(msg, name, type === "A" ? DNS_TYPE.A : DNS_TYPE.AAAA);
  if (sel.error !== null) return { error: sel.error };
  const ttls = [...sel.records.map((r) => r.ttl), ...(sel.chainTtl === null ? [] : [sel.chainTtl])];
  return { ips: sel.records.map((r) => r.data), ttl: ttls.length > 0 ? Math.min(...ttls) : 60 };
}

/** Checks where a webhook URL's host name resolves (see header). */
export async function resolvedTarget(
  env: { COHORT_ENV: string; DOH_RESOLVER_URL?: string },
  url: string,
  deps: ResolveDeps = {},
  always = false,
): Promise<ResolvedVerdict> {
  if (settingsOf(env).local && !always) return { kind: "ok" };
  let host: string;
  try {
    host = new URL(url).hostname.toLowerCase();
  } catch {
    return { kind: "refused", reason: "endpoint is not a URL" };
  }
  if (host.startsWith("[") || classifyIp(host) !== null) return { kind: "ok" }; // a literal: judged by checkEndpointUrl
  const now = (deps.now ?? Date.now)();
  const hit = cache.get(host);
  if (hit && hit.until > now) return hit.verdict;
  const resolver = settingsOf(env).dohResolverUrl;
  const [a, aaaa] = await Promise.all([addresses(host, "A", resolver, deps), addresses(host, "AAAA", resolver, deps)]);
  let verdict: ResolvedVerdict;
  let ttl = 60;
  if ("error" in a || "error" in aaaa) {
    verdict = {
      kind: "unresolved",
      reason: `could not resolve ${host}: ${"error" in a ? a.error : (aaaa as { error: string }).error}`,
    };
  } else {
    const ips = [...a.ips, ...aaaa.ips];
    ttl = Math.min(a.ttl, aaaa.ttl);
    const bad = ips.map((ip) => checkResolvedAddress(ip)).find((v) => !v.ok);
    if (ips.length === 0) verdict = { kind: "unresolved", reason: `${host} has no address` };
    else if (bad && !bad.ok)
      verdict = { kind: "refused", reason: `refused by the SSRF guard: ${host} resolves to ${bad.detail}` };
    else verdict = { kind: "ok" };
  }
  // Failures are not cached: the next attempt asks again.
  if (verdict.kind !== "unresolved")
    cache.set(host, { verdict, until: now + Math.min(CACHE_MAX_MS, Math.max(0, ttl) * 1000) });
  if (cache.size > 10_000) cache.clear();
  return verdict;
}

/** Forgets every cached resolution (tests). */
export function clearResolvedCache(): void {
  cache.clear();
}
