/*
 * NAME
 *   mx - where mail for a domain goes: MX lookup over DoH as a pure state
 *        machine, with RFC 5321 A/AAAA fallback and RFC 7505 null MX
 *
 * SUMMARY
 *   startMxLookup() names the first DNS query; advanceMxLookup() takes each
 *   DoH JSON answer (or the failure to get one) and names the next query or
 *   the resolution: hosts in preference order, a bounce, or a deferral.
 *
 * DESCRIPTION
 *   Queries go MX, then, only when the domain exists but has no MX (NODATA),
 *   A, then AAAA; an address record makes the domain its own mail host with
 *   preference 0 (RFC 5321 5.1, "implicit MX"). Address literals
 *   ("[192.0.2.1]", "[IPv6:2001:db8::1]") resolve without DNS; as a recipient's
 *   nexthop one carries LITERAL_NEXTHOP ("literal:[192.0.2.1]", literalNexthop),
 *   since "[host]" alone names the relay kind's fixed host (delivery/plan.ts).
 *
 *   Outcomes (code, RFC 3463 status):
 *     NXDOMAIN, or a domain that is not a host name   bounce 550 5.1.2
 *     null MX: every MX exchange is "."                bounce 556 5.1.10
 *     no MX, A or AAAA record                         bounce 554 5.4.4
 *     SERVFAIL, REFUSED, other RCODEs, timeouts,
 *     HTTP errors, bad JSON, CNAME loops, MX records
 *     none of which names a usable host               defer 451 4.4.3
 *   A "." exchange next to real MX records is ignored (RFC 7505 3: it must
 *   not be published so; the real ones are used). The name an MX record
 *   gives is kept as the host even if it is an alias (a CNAME): it is the
 *   name TLS is verified against and the connector resolves it.
 *
 *   Hosts are in preference order, and the site is their siteKey()
 *   (mx-hosts.ts).
 *
 *   expiresAtMs: nowMs plus the smallest TTL of the records used (CNAMEs
 *   included), clamped to [minTtlSec, maxTtlSec]; negative answers use the
 *   RFC 2308 SOA TTL or negativeTtlSec; deferrals use transientTtlSec.
 *
 * INVARIANTS
 *   Pure: same (state, event, nowMs, cfg), same step. Host names in results
 *   are lower-case without a trailing dot.
 *
 * ERRORS
 *   None thrown: every DNS or resolver problem is a result.
 */

import {
  DNS_STATUS,
  DNS_TYPE,
  isHostName,
  negativeTtlSec,
  normalizeDnsName,
  parseDohJson,
  selectAnswers,
  type DohMessage,
} from "./doh";
import { parseIPv4, parseIPv6 } from "./ip-literal";
import { orderMxHosts, parseMxData, siteKey, type MxHost, type MxRecordData } from "./mx-hosts";

/** Cache lifetimes in seconds. */
export interface MxConfig {
  /** Floor for any cached result but deferrals. Default 60. */
  minTtlSec: number;
  /** Ceiling for any cached result. Default 86400. */
  maxTtlSec: number;
  /** Negative-answer lifetime when the resolver gives no SOA. Default 300. */
  negativeTtlSec: number;
  /** How long a deferral may be reused. Default 30. */
  transientTtlSec: number;
}

/** Default cache lifetimes. */
export const DEFAULT_MX_CONFIG: Readonly<MxConfig> = Object.freeze({
  minTtlSec: 60,
  maxTtlSec: 86_400,
  negativeTtlSec: 300,
  transientTtlSec: 30,
});

/** Merges input over the defaults; a field that is not a finite number >= 0 keeps its default. */
export function createMxConfig(input: Partial<MxConfig> = {}): MxConfig {
  const cfg: MxConfig = { ...DEFAULT_MX_CONFIG };
  for (const key of Object.keys(cfg) as (keyof MxConfig)[]) {
    const v = input[key];
    if (typeof v === "number" && Number.isFinite(v) && v >= 0) cfg[key] = v;
  }
  if (cfg.minTtlSec > cfg.maxTtlSec) cfg.minTtlSec = cfg.maxTtlSec;
  return cfg;
}

/** The record types queried. */
export type MxQueryType = "MX" | "A" | "AAAA";

/** Lookup state; plain data. */
export interface MxLookupState {
  domain: string;
  query: MxQueryType;
  tieSeed: number | null;
  /** Smallest TTL met so far that bounds the final answer (the MX NODATA's). */
  ttlSec: number | null;
}

/** What the shell reports for one query. */
export type DohEvent = { kind: "answer"; body: unknown } | { kind: "failed"; reason: string };

/** Where mail for a domain goes, or why it cannot go now or ever. */
export type MxResolution =
  | { kind: "hosts"; domain: string; hosts: MxHost[]; implicit: boolean; site: string; expiresAtMs: number }
  | { kind: "bounce" | "defer"; domain: string; code: number; enhanced: string; text: string; expiresAtMs: number };

/** Next query, or the end. */
export type MxStep =
  { kind: "query"; state: MxLookupState; name: string; type: MxQueryType } | { kind: "done"; result: MxResolution };

/** The prefix of an address literal as a recipient's nexthop (see the header). */
export const LITERAL_NEXTHOP = "literal:";

/** The nexthop of a recipient domain: the domain, or an address literal with LITERAL_NEXTHOP. */
export function literalNexthop(domain: string): string {
  return domain.startsWith("[") ? `${LITERAL_NEXTHOP}${domain}` : domain;
}

/** Starts resolving `domain` (ASCII; convert IDNs to punycode first). */
export function startMxLookup(
  input: { domain: string; tieSeed?: number | null },
  nowMs: number,
  cfg: MxConfig,
): MxStep {
  const literal = parseAddressLiteral(input.domain);
  if (literal !== null) {
    const hosts = [{ host: literal, preference: 0 }];
    const expiresAtMs = nowMs + cfg.maxTtlSec * 1000;
    return {
      kind: "done",
      result: { kind: "hosts", domain: input.domain, hosts, implicit: true, site: literal, expiresAtMs },
    };
  }
  const domain = normalizeDnsName(input.domain);
  if (!isHostName(domain)) {
    const text = `bad destination domain ${JSON.stringify(input.domain)}`;
    return done(permanent(input.domain, 550, "5.1.2", text, nowMs + cfg.negativeTtlSec * 1000));
  }
  const state: MxLookupState = { domain, query: "MX", tieSeed: input.tieSeed ?? null, ttlSec: null };
  return { kind: "query", state, name: domain, type: "MX" };
}

/** Takes the answer to the current query; returns the next query or the resolution. */
export function advanceMxLookup(state: MxLookupState, event: DohEvent, nowMs: number, cfg: MxConfig): MxStep {
  const { domain, query } = state;
  const failed = (why: string) => done(transient(domain, `${lookupText(domain, query)}: ${why}`, nowMs, cfg));
  if (event.kind === "failed") return failed(event.reason);
  const message = parseDohJson(event.body);
  if ("error" in message) return failed(message.error);
  if (message.status === DNS_STATUS.NXDOMAIN) {
    const text = `Host or domain name not found. ${lookupText(domain, query)}: Host not found`;
    return done(permanent(domain, 550, "5.1.2", text, negativeExpiry(message, nowMs, cfg)));
  }
  if (message.status !== DNS_STATUS.NOERROR) return failed(`${rcodeName(message.status)}, try again`);
  const picked = selectAnswers(message, domain, DNS_TYPE[query]);
  if (picked.error) return failed(picked.error);
  const ttlSec = minTtl(picked.chainTtl, ...picked.records.map((r) => r.ttl));
  if (query === "MX" && picked.records.length > 0) {
    return done(
      resolveMxRecords(
        state,
        picked.records.map((r) => r.data),
        minTtl(ttlSec, state.ttlSec),
        nowMs,
        cfg,
      ),
    );
  }
  if (picked.records.length > 0) {
    const hosts = [{ host: domain, preference: 0 }];
    const expiresAtMs = positiveExpiry(minTtl(ttlSec, state.ttlSec), nowMs, cfg);
    return done({ kind: "hosts", domain, hosts, implicit: true, site: domain, expiresAtMs });
  }
  return noData(state, message, nowMs, cfg);
}

/** NODATA: fall back MX → A → AAAA, then bounce. */
function noData(state: MxLookupState, message: DohMessage, nowMs: number, cfg: MxConfig): MxStep {
  const ttlSec = minTtl(state.ttlSec, negativeTtlSec(message));
  if (state.query !== "AAAA") {
    const next: MxQueryType = state.query === "MX" ? "A" : "AAAA";
    return { kind: "query", state: { ...state, query: next, ttlSec }, name: state.domain, type: next };
  }
  const text = `Host or domain name not found. ${lookupText(state.domain, "AAAA")}: no MX, A or AAAA record`;
  return done(permanent(state.domain, 554, "5.4.4", text, negativeExpiry(message, nowMs, cfg)));
}

/** Turns MX RDATA strings into hosts, a null-MX bounce, or a deferral. */
function resolveMxRecords(
  state: MxLookupState,
  data: string[],
  ttlSec: number | null,
  nowMs: number,
  cfg: MxConfig,
): MxResolution {
  const { domain } = state;
  const parsed = data.map(parseMxData);
  const valid = parsed.filter((r): r is MxRecordData => r !== null);
  if (valid.length > 0 && valid.every((r) => r.exchange === "")) {
    const text = `Domain ${domain} does not accept mail (null MX)`;
    return permanent(domain, 556, "5.1.10", text, positiveExpiry(ttlSec, nowMs, cfg));
  }
  const usable = valid.filter((r) => r.exchange !== "" && isHostName(r.exchange));
  if (usable.length === 0) {
    return transient(domain, `${lookupText(domain, "MX")}: no MX record names a usable host`, nowMs, cfg);
  }
  const hosts = orderMxHosts(usable, state.tieSeed);
  return {
    kind: "hosts",
    domain,
    hosts,
    implicit: false,
    site: siteKey(hosts),
    expiresAtMs: positiveExpiry(ttlSec, nowMs, cfg),
  };
}

/** "[192.0.2.1]" or "[IPv6:2001:db8::1]" to the address text, else null. */
function parseAddressLiteral(domain: string): string | null {
  const d = domain.trim();
  const m = /^\[(?:IPv6:([^\]]+)|([0-9.]+))\]$/i.exec(
    d.startsWith(LITERAL_NEXTHOP) ? d.slice(LITERAL_NEXTHOP.length) : d,
  );
  if (!m) return null;
  if (m[1] !== undefined) return parseIPv6(m[1]) ? m[1].toLowerCase() : null;
  return m[2] !== undefined && parseIPv4(m[2]) ? m[2] : null;
}

/** Smallest of the numbers given, ignoring nulls; null when none. */
function minTtl(...ttls: (number | null)[]): number | null {
  const present = ttls.filter((t): t is number => t !== null);
  return present.length > 0 ? Math.min(...present) : null;
}

/** Expiry of a positive answer. */
function positiveExpiry(ttlSec: number | null, nowMs: number, cfg: MxConfig): number {
  const ttl = Math.min(cfg.maxTtlSec, Math.max(cfg.minTtlSec, ttlSec ?? cfg.minTtlSec));
  return nowMs + ttl * 1000;
}

/** Expiry of a negative answer (RFC 2308). */
function negativeExpiry(message: DohMessage, nowMs: number, cfg: MxConfig): number {
  return positiveExpiry(negativeTtlSec(message) ?? cfg.negativeTtlSec, nowMs, cfg);
}

/** A bounce. */
function permanent(domain: string, code: number, enhanced: string, text: string, expiresAtMs: number): MxResolution {
  return { kind: "bounce", domain, code, enhanced, text, expiresAtMs };
}

/** A deferral (4.4.3, "directory server failure"). */
function transient(domain: string, text: string, nowMs: number, cfg: MxConfig): MxResolution {
  return { kind: "defer", domain, code: 451, enhanced: "4.4.3", text, expiresAtMs: nowMs + cfg.transientTtlSec * 1000 };
}

/** Postfix-style "Name service error for name=… type=…". */
function lookupText(name: string, type: MxQueryType): string {
  return `Name service error for name=${name} type=${type}`;
}

/** RCODE mnemonic. */
function rcodeName(status: number): string {
  const name = Object.entries(DNS_STATUS).find(([, v]) => v === status)?.[0];
  return name ?? `RCODE ${status}`;
}

/** Wraps a resolution as the final step. */
function done(result: MxResolution): MxStep {
  return { kind: "done", result };
}
