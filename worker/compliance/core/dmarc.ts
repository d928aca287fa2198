/*
 * NAME
 *   dmarc - DMARC records, RFC 9989's DNS tree walk and identifier alignment
 *
 * SUMMARY
 *   The DMARC revision of 2026 (RFC 9989) finds a domain's policy and its Organizational Domain
 *   by walking the DNS towards the root and reading `_dmarc` records on the way (their `psd`
 *   tag marks where an organization ends), instead of a public suffix list; `pct` is gone.
 *
 * DESCRIPTION
 *   parseDmarc(txts)           the `_dmarc` TXT answers → DmarcRecord | null: exactly one record
 *                              starting "v=DMARC1"; p (none, quarantine, reject; required), sp,
 *                              np, adkim and aspf (r or s, default r), psd (y, n or u), rua.
 *   treeWalkNames(domain)      the names whose `_dmarc` records the walk reads, the domain first:
 *                              after the domain itself, its ancestors from at most 7 labels down
 *                              to the top-level label (a longer name jumps to its last 7 labels).
 *   organizationalDomain(domain, records)  the walk's answer from the records found (by name;
 *                              absent or null: no record): going up, a record with psd=n makes
 *                              its name the Organizational Domain and a record with psd=y the
 *                              name one label below it; otherwise the shortest name with a
 *                              record; with no record at all, the domain itself.
 *   policyFor(domain, records) the record that applies to mail from `domain`: its own, else its
 *                              Organizational Domain's (whose sp then applies).
 *   aligned(a, b, mode, records)  strict: the same name; relaxed: the same Organizational Domain.
 *   dmarcFacts(domain, records, bimi)  what GET /domains/:id and the compliance check show.
 *
 * INVARIANTS
 *   Pure. Names are compared lower-case without a trailing dot.
 *
 * ERRORS
 *   None thrown: a malformed record is null.
 */

export interface DmarcRecord {
  p: "none" | "quarantine" | "reject";
  sp?: "none" | "quarantine" | "reject";
  np?: "none" | "quarantine" | "reject";
  adkim: "r" | "s";
  aspf: "r" | "s";
  psd?: "y" | "n" | "u";
  rua?: string;
}

/** What is known of a sending domain's DMARC (stored with the domain, read on every send). */
export interface DmarcFacts {
  /** The record that applies, and where it was found (null: none). */
  record: DmarcRecord | null;
  foundAt: string | null;
  organizationalDomain: string;
  /** The policy mail from this domain gets: the record's p, or its sp for a subdomain. */
  policy: "none" | "quarantine" | "reject" | null;
  /** BIMI: a default._bimi record is published and the policy is at enforcement (quarantine or reject). */
  bimi: { record: boolean; enforcement: boolean; ready: boolean };
  /** When it was looked up (epoch ms). */
  checkedAt: number;
}

const norm = (d: string) => d.toLowerCase().replace(/\.$/, "");
const POLICY = new Set(["none", "quarantine", "reject"]);

export function parseDmarc(txts: readonly string[]): DmarcRecord | null {
  const recs = txts.filter((t) => /^v\s*=\s*DMARC1\s*(;|$)/i.test(t.trim()));
  if (recs.length !== 1) return null;
  const tags = new Map<string, string>();
  for (const part of recs[0]!.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0) tags.set(part.slice(0, eq).trim().toLowerCase(), part.slice(eq + 1).trim());
  }
  const pol = (k: string) => {
    const v = tags.get(k)?.toLowerCase();
    return v !== undefined && POLICY.has(v) ? (v as DmarcRecord["p"]) : undefined;
  };
  const p = pol("p");
  if (!p) return null;
  const mode = (k: string) => (tags.get(k)?.toLowerCase() === "s" ? "s" : "r") as "r" | "s";
  const psd = tags.get("psd")?.toLowerCase();
  const sp = pol("sp");
  const np = pol("np");
  const rua = tags.get("rua");
  return {
    p,
    adkim: mode("adkim"),
    aspf: mode("aspf"),
    ...(sp ? { sp } : {}),
    ...(np ? { np } : {}),
    ...(psd === "y" || psd === "n" || psd === "u" ? { psd } : {}),
    ...(rua ? { rua } : {}),
  };
}

export function treeWalkNames(domain: string): string[] {
  const labels = norm(domain)
    .split(".")
    .filter((l) => l !== "");
  const out = [labels.join(".")];
  for (let n = Math.min(labels.length - 1, 7); n >= 1; n--) out.push(labels.slice(-n).join("."));
  return out;
}

type Records = ReadonlyMap<string, DmarcRecord | null>;

export function organizationalDomain(domain: string, records: Records): string {
  const names = treeWalkNames(domain);
  let shortest: string | null = null;
  for (let i = 0; i < names.length; i++) {
    const r = records.get(names[i]!);
    if (!r) continue;
    if (r.psd === "n") return names[i]!;
    if (r.psd === "y") return i > 0 ? names[i - 1]! : names[i]!;
    shortest = names[i]!;
  }
  return shortest ?? names[0]!;
}

export function policyFor(
  domain: string,
  records: Records,
): { record: DmarcRecord; foundAt: string; policy: DmarcRecord["p"] } | null {
  const d = norm(domain);
  const own = records.get(d);
  if (own) return { record: own, foundAt: d, policy: own.p };
  const org = organizationalDomain(d, records);
  const r = records.get(org);
  return r ? { record: r, foundAt: org, policy: r.sp ?? r.p } : null;
}

export function aligned(a: string, b: string, mode: "r" | "s", records: Records): boolean {
  if (norm(a) === norm(b)) return true;
  return mode === "r" && organizationalDomain(a, records) === organizationalDomain(b, records);
}

export function dmarcFacts(domain: string, records: Records, bimiRecord: boolean, nowMs: number): DmarcFacts {
  const found = policyFor(domain, records);
  const enforcement = found !== null && (found.policy === "quarantine" || found.policy === "reject");
  return {
    record: found?.record ?? null,
    foundAt: found?.foundAt ?? null,
    organizationalDomain: organizationalDomain(domain, records),
    policy: found?.policy ?? null,
    bimi: { record: bimiRecord, enforcement, ready: bimiRecord && enforcement },
    checkedAt: nowMs,
  };
}
