/*
 * NAME
 *   doh - DNS-over-HTTPS JSON answers (application/dns-json), checked and
 *         made usable
 *
 * SUMMARY
 *   Turns the JSON a Google- or Cloudflare-style resolver returns,
 *   {Status, Answer:[{name,type,TTL,data}], Authority:[...]}, into typed
 *   records, follows CNAME chains, and reads negative-caching TTLs.
 *
 * DESCRIPTION
 *   parseDohJson(body) validates an already JSON.parse'd body. Records whose
 *   fields have the wrong types are an error (the resolver is broken), not
 *   skipped. Names are normalised with normalizeDnsName.
 *
 *   normalizeDnsName(name) lower-cases and drops one trailing dot; the root
 *   "." becomes "". Punycode (xn--) labels pass through unchanged.
 *
 *   isHostName(name) says whether a normalised name is usable as a host:
 *   ASCII letters, digits, "-" and "_", labels of 1..63, at most 253 in all.
 *
 *   selectAnswers(message, qname, type) follows CNAME records from qname (as
 *   recursive resolvers put them in Answer) up to MAX_CNAME_HOPS and returns
 *   the records of `type` owned by the final name, with the smallest TTL seen
 *   along the chain.
 *
 *   negativeTtlSec(message) is the RFC 2308 negative TTL: the smaller of the
 *   SOA record's TTL and its MINIMUM field, or null without an SOA.
 *
 * INVARIANTS
 *   All names in a DohMessage are normalised. TTLs are integers >= 0.
 *
 * ERRORS
 *   None thrown: parseDohJson returns {error} for a body of the wrong shape;
 *   selectAnswers reports a CNAME loop or an over-long chain as `error`.
 */

/** RR type numbers used here. */
export const DNS_TYPE = Object.freeze({ A: 1, CNAME: 5, SOA: 6, MX: 15, TXT: 16, AAAA: 28 });

/** RCODEs (DoH JSON "Status"). */
export const DNS_STATUS = Object.freeze({ NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 });

/** CNAME links followed before giving up (like common resolvers). */
export const MAX_CNAME_HOPS = 8;

/** One resource record. */
export interface DohRecord {
  name: string;
  type: number;
  ttl: number;
  data: string;
}

/** A checked DoH JSON answer. */
export interface DohMessage {
  status: number;
  answers: DohRecord[];
  authority: DohRecord[];
}

/** Lower-cases a DNS name and drops one trailing dot ("." becomes ""). */
export function normalizeDnsName(name: string): string {
  const lower = name.trim().toLowerCase();
  return lower.endsWith(".") ? lower.slice(0, -1) : lower;
}

/** True for a normalised, non-empty ASCII host name (see header). */
export function isHostName(name: string): boolean {
  if (name.length < 1 || name.length > 253) return false;
  return name.split(".").every((label) => /^[a-z0-9_-]{1,63}$/.test(label));
}

/** Validates a parsed DoH JSON body. */
export function parseDohJson(body: unknown): DohMessage | { error: string } {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    return { error: "DoH answer is not a JSON object" };
  const obj = body as Record<string, unknown>;
  if (!isCount(obj.Status)) return { error: "DoH answer has no numeric Status" };
  const answers = parseRecords(obj.Answer, "Answer");
  if ("error" in answers) return answers;
  const authority = parseRecords(obj.Authority, "Authority");
  if ("error" in authority) return authority;
  return { status: obj.Status, answers: answers.records, authority: authority.records };
}

/** Parses an optional record array. */
function parseRecords(value: unknown, field: string): { records: DohRecord[] } | { error: string } {
  if (value === undefined || value === null) return { records: [] };
  if (!Array.isArray(value)) return { error: `DoH ${field} is not an array` };
  const records: DohRecord[] = [];
  for (const item of value as unknown[]) {
    const r = (typeof item === "object" && item !== null ? item : {}) as Record<string, unknown>;
    if (typeof r.name !== "string" || !isCount(r.type) || !isCount(r.TTL) || typeof r.data !== "string") {
      return { error: `DoH ${field} has a record without string name/data and numeric type/TTL` };
    }
    records.push({ name: normalizeDnsName(r.name), type: r.type, ttl: r.TTL, data: r.data });
  }
  return { records };
}

/** True for an integer >= 0. */
function isCount(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v) && v >= 0;
}

/** The records of `type` at the end of qname's CNAME chain (see header). */
export function selectAnswers(
  message: DohMessage,
  qname: string,
  type: number,
): { owner: string; records: DohRecord[]; chainTtl: number | null; error: string | null } {
  let owner = normalizeDnsName(qname);
  let chainTtl: number | null = null;
  const seen = new Set([owner]);
  for (let hops = 0; ; hops++) {
    const records = message.answers.filter((r) => r.type === type && r.name === owner);
    if (records.length > 0 || type === DNS_TYPE.CNAME) return { owner, records, chainTtl, error: null };
    const alias = message.answers.find((r) => r.type === DNS_TYPE.CNAME && r.name === owner);
    if (!alias) return { owner, records: [], chainTtl, error: null };
    if (hops >= MAX_CNAME_HOPS)
      return { owner, records: [], chainTtl, error: `CNAME chain from ${qname} longer than ${MAX_CNAME_HOPS}` };
    owner = normalizeDnsName(alias.data);
    chainTtl = chainTtl === null ? alias.ttl : Math.min(chainTtl, alias.ttl);
    if (seen.has(owner)) return { owner, records: [], chainTtl, error: `CNAME loop at ${owner}` };
    seen.add(owner);
  }
}

/** RFC 2308 negative TTL from the SOA in Authority, or null without one. */
export function negativeTtlSec(message: DohMessage): number | null {
  const soa = message.authority.find((r) => r.type === DNS_TYPE.SOA);
  if (!soa) return null;
  const minimum = Number(soa.data.trim().split(/\s+/)[6]);
  return Number.isInteger(minimum) && minimum >= 0 ? Math.min(soa.ttl, minimum) : soa.ttl;
}
