/*
 * NAME
 *   mx-hosts - the mail hosts of an MX answer: parsing, ordering and the
 *              site key (the pure part after the lookup, mx.ts)
 *
 * SUMMARY
 *   parseMxData() reads one MX RDATA; orderMxHosts() puts the records in
 *   delivery order; siteKey() names the set of hosts.
 *
 * DESCRIPTION
 *   Order: ascending preference. Ties are put in name order, then, when a
 *   tieSeed is given, shuffled with a PRNG seeded by it (RFC 5321 5.1 asks to
 *   spread load over equal preferences). The result depends only on the set
 *   of records and the seed, never on the order the resolver listed them;
 *   the shell picks the seed (e.g. from the attempt number).
 *
 *   The site (the key destinations are grouped by) is siteKey(hosts): the
 *   sorted, de-duplicated host names joined by ",". It ignores preferences
 *   and order, so it is stable across answers and seeds.
 *
 * INVARIANTS
 *   Pure: same records and seed, same hosts. Exchanges are lower-case
 *   without a trailing dot ("" for the root, ".").
 *
 * ERRORS
 *   None thrown: a malformed RDATA is null.
 */

import { normalizeDnsName } from "./doh";

/** A mail host and its MX preference. */
export interface MxHost {
  host: string;
  preference: number;
}

/** One MX RDATA: preference and normalised exchange ("" for the root, "."). */
export interface MxRecordData {
  preference: number;
  exchange: string;
}

/** Parses "10 mx.example.com." (DoH JSON MX data), or null when malformed. */
export function parseMxData(data: string): MxRecordData | null {
  const m = /^\s*(\d{1,5})\s+(\S+)\s*$/.exec(data);
  if (!m) return null;
  const preference = Number(m[1]);
  if (preference > 65535) return null;
  return { preference, exchange: normalizeDnsName(m[2] ?? "") };
}

/** Orders MX records by preference with the documented tie rule; a host listed twice keeps its best preference. */
export function orderMxHosts(records: readonly MxRecordData[], tieSeed: number | null): MxHost[] {
  const best = new Map<string, number>();
  for (const r of records) best.set(r.exchange, Math.min(r.preference, best.get(r.exchange) ?? Infinity));
  const sorted = [...best].map(([host, preference]) => ({ host, preference }));
  sorted.sort((a, b) => a.preference - b.preference || (a.host < b.host ? -1 : a.host > b.host ? 1 : 0));
  if (tieSeed === null) return sorted;
  const next = mulberry32(tieSeed);
  for (let start = 0; start < sorted.length;) {
    let end = start;
    while (end < sorted.length && sorted[end]?.preference === sorted[start]?.preference) end++;
    for (let i = end - 1; i > start; i--) {
      const j = start + Math.floor(next() * (i - start + 1));
      [sorted[i], sorted[j]] = [sorted[j] as MxHost, sorted[i] as MxHost];
    }
    start = end;
  }
  return sorted;
}

/** The MX site: sorted, de-duplicated host names joined by ",". */
export function siteKey(hosts: readonly MxHost[]): string {
  return [...new Set(hosts.map((h) => h.host))].sort().join(",");
}

/** mulberry32: a small seeded PRNG giving floats in [0, 1). */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
