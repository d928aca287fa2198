/**
 * A destination's MTA-STS policy and TLS-RPT record, discovered over DoH and cached so that one
 * discovery serves every delivery agent and consumer.
 *
 * DESCRIPTION
 *   stsInfo(env, domain, owner, background)  the domain's cache entry (core/mta-sts.ts
 *       StsCacheEntry) and its TLS-RPT rua (null: no record). Looked up in this isolate's memory
 *       (MEMORY_TTL_MS; a discovery under way is shared by `owner`'s callers only, the delivery
 *       stage's, lib/shared-cache.ts),
 *       else in D1 `mta_sts_policies` (one row read), else discovered now: the TXT records
 *       `_mta-sts.<domain>` and `_smtp._tls.<domain>` in parallel, and the policy fetched
 *       (https.ts) when the record's id is not the cached policy's; the entry is written back to
 *       D1 (one row). An entry due for its daily check is used as it is and checked again in the
 *       background (`background(p)` keeps the invocation alive for p). A cached policy therefore
 *       costs no DoH query and no fetch; the first delivery to a domain in an isolate costs one
 *       D1 row read.
 *       A domain that publishes neither record, and has no row, gets none: its negative answer
 *       carries nothing another isolate needs (no policy to keep in force, no report address),
 *       so this isolate keeps it in memory for the negative lifetime (an hour) instead of a D1
 *       row per domain ever sent to, rewritten every hour it is sent to (most domains of the
 *       long tail publish neither).
 *   fetchFailure(info)    the TLS-RPT result type of the last failed policy fetch, if any.
 *   clearStsMemory()      forgets the memory cache (tests).
 *
 * INVARIANTS
 *   The decisions (what to look up, what a failed fetch means) are core/mta-sts.ts's. A discovery
 *   that fails leaves an unexpired cached policy in force.
 */
import { DNS_STATUS, DNS_TYPE, parseDohJson, selectAnswers } from "../net/core/doh";
import { queryDoh } from "../net/mx";
import { txtValue } from "../domains/records";
import {
  afterDiscovery,
  needsFetch,
  nextLookup,
  parseStsRecord,
  type Discovery,
  type StsCacheEntry,
} from "./core/mta-sts";
import { parseTlsRptRecord, type TlsResultType } from "./core/tlsrpt";
import { fetchStsPolicy } from "./https";
import { settingsOf } from "../settings/settings";
import { SharedCache } from "../lib/shared-cache";

/** How long this isolate reuses an entry it read, ms. */
export const MEMORY_TTL_MS = 60_000;

/** What is known of one policy domain. */
export interface StsInfo {
  domain: string;
  entry: StsCacheEntry;
  /** TLS-RPT report URIs (null: the domain publishes no record). */
  rua: string[] | null;
  /** The last discovery's failed fetch, as a TLS-RPT result type. */
  fetchError?: TlsResultType | null;
}

/** What this isolate remembers, by policy domain (lib/shared-cache.ts: values shared, look-ups under way not). */
const memory = new SharedCache<StsInfo>();

/** Until when this isolate reuses `info`, read at `nowMs` (see the header). */
function keptUntil(info: StsInfo, nowMs: number): number {
  const expires = info.entry.expiresAt * 1000;
  return memoryOnly(info) ? expires : Math.min(nowMs + MEMORY_TTL_MS, expires);
}

/** Forgets what this isolate remembers (tests). */
export function clearStsMemory(): void {
  memory.clear();
}

/** The TXT strings at a name; "failed" when the lookup failed. */
async function txt(env: Env, name: string): Promise<string[] | "failed"> {
  const event = await queryDoh(name, "TXT", { resolverUrl: settingsOf(env).dohResolverUrl });
  if (event.kind === "failed") return "failed";
  const msg = parseDohJson(event.body);
  if ("error" in msg) return "failed";
  if (msg.status === DNS_STATUS.NXDOMAIN) return [];
  if (msg.status !== DNS_STATUS.NOERROR) return "failed";
  const sel = selectAnswers(msg, name, DNS_TYPE.TXT);
  return sel.error !== null ? "failed" : sel.records.map((r) => txtValue(r.data));
}

interface Row {
  entry: string;
  rua: string | null;
  fetch_error: string | null;
}

async function readRow(env: Env, domain: string): Promise<StsInfo | null> {
  const row = await env.DB.prepare("SELECT entry, rua, fetch_error FROM mta_sts_policies WHERE domain = ?")
    .bind(domain)
    .first<Row>();
  if (!row) return null;
  return {
    domain,
    entry: JSON.parse(row.entry) as StsCacheEntry,
    rua: row.rua === null ? null : (JSON.parse(row.rua) as string[]),
    fetchError: row.fetch_error as TlsResultType | null,
  };
}

/** Looks the domain up now and stores the new entry. */
async function discover(env: Env, domain: string, cached: StsInfo | null, nowSec: number): Promise<StsInfo> {
  const [sts, rpt] = await Promise.all([txt(env, `_mta-sts.${domain}`), txt(env, `_smtp._tls.${domain}`)]);
  const record = sts === "failed" ? "failed" : parseStsRecord(sts);
  const d: Discovery = { record };
  let fetchError: TlsResultType | null = null;
  if (needsFetch(cached?.entry ?? null, record, nowSec)) {
    const got = await fetchStsPolicy(env, domain);
    if ("policy" in got) d.fetched = got.policy;
    else {
      d.fetched = { error: got.error };
      fetchError =
        got.kind === "webpki"
          ? "sts-webpki-invalid"
          : got.kind === "invalid"
            ? "sts-policy-invalid"
            : "sts-policy-fetch-error";
      console.warn(
        JSON.stringify({ warning: "MTA-STS policy not fetched", domain, kind: got.kind, detail: got.error }),
      );
    }
  }
  const entry = afterDiscovery(cached?.entry ?? null, d, nowSec, {
    refreshSec: settingsOf(env).mtaStsRefreshSeconds,
    negativeSec: 3600,
  });
  const rua = rpt === "failed" ? (cached?.rua ?? null) : (parseTlsRptRecord(rpt)?.rua ?? null);
  const info: StsInfo = { domain, entry, rua, fetchError };
  if (cached === null && memoryOnly(info)) return info;
  await env.DB.prepare(
    `INSERT INTO mta_sts_policies (domain, entry, rua, fetch_error, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
      ON CONFLICT (domain) DO UPDATE SET entry = excluded.entry, rua = excluded.rua, fetch_error = excluded.fetch_error, updated_at = excluded.updated_at`,
  )
    .bind(domain, JSON.stringify(entry), rua === null ? null : JSON.stringify(rua), fetchError, nowSec * 1000)
    .run()
    .catch((e: unknown) =>
      console.error(
        JSON.stringify({
          error: "MTA-STS cache not written",
          domain,
          detail: e instanceof Error ? e.message : String(e),
        }),
      ),
    );
  return info;
}

async function load(
  env: Env,
  domain: string,
  nowSec: number,
  background: (p: Promise<unknown>) => void,
): Promise<StsInfo> {
  const stored = await readRow(env, domain).catch(() => null);
  const next = nextLookup(stored?.entry ?? null, nowSec, {
    refreshSec: settingsOf(env).mtaStsRefreshSeconds,
    negativeSec: 3600,
  });
  if (stored && next !== "lookup") {
    if (next === "use-and-refresh") {
      background(
        discover(env, domain, stored, nowSec)
          .then((info) => memory.set(domain, info, keptUntil(info, Date.now())))
          .catch(() => undefined),
      );
    }
    return stored;
  }
  return discover(env, domain, stored, nowSec);
}

/** A negative answer with no report address and no failed fetch: kept in memory only (see the header). */
function memoryOnly(info: StsInfo): boolean {
  return info.entry.policy === null && info.entry.id === null && info.rua === null && !info.fetchError;
}

/** See the header. */
export function stsInfo(
  env: Env,
  domain: string,
  owner: object,
  background: (p: Promise<unknown>) => void,
): Promise<StsInfo> {
  const key = domain.toLowerCase().replace(/\.$/, "");
  const now = Date.now();
  return memory.lookup(
    key,
    owner,
    () => load(env, key, Math.floor(now / 1000), background),
    now,
    (info) => keptUntil(info, now),
  );
}
