/**
 * Sending domains: DKIM key generation, verification through DoH, rotation (the I/O half;
 * records.ts decides).
 *
 * DESCRIPTION
 *   newDkimKey(selector, env)  a fresh RSA-2048 key: its public half (base64 SPKI, for the DNS
 *                        record) and its private half (PKCS#8 PEM) sealed with WEBHOOK_SECRETS_KEY.
 *   recordOptions(env, selector, publicKey, returnPath)  what recordsFor needs, from the config:
 *                        RETURN_PATH_MX (default feedback.<HELO_NAME>) and SPF_RECORD.
 *   dnsLookup(env, name, type)  the TXT texts (joined per record) or MX data of a name over DoH:
 *                        { kind: "answer", values } (none for NXDOMAIN) or { kind: "error" }.
 *   verifyDomain(env, row, keys)  looks every record up (DoH JSON at DOH_RESOLVER_URL), judges
 *                        each, and returns the records, the domain's status and the selector of a
 *                        rotation key that just verified (to promote), if any. A rotation's record
 *                        not yet published, or a lookup that failed, leaves a verified domain
 *                        verified (records.ts domainStatus). It also walks the DNS tree for the
 *                        domain's DMARC record (RFC 9989: `_dmarc` of the domain and its ancestors)
 *                        and reads default._bimi: the facts (compliance/core/dmarc.ts) the
 *                        compliance check reads on every send without a query, and GET
 *                        /domains/:id shows (null when a lookup failed: the last facts stay).
 */
import type { DomainRow, KeyRow } from "../db/domains";
import { DNS_STATUS, DNS_TYPE, parseDohJson, selectAnswers } from "../net/core/doh";
import { queryDoh } from "../net/mx";
import { sealSecret, secretsKey } from "../lib/secrets";
import {
  domainStatus,
  judgeRecord,
  txtValue,
  type DomainRecord,
  type DomainStatus,
  type Found,
  type RecordOptions,
} from "./records";
import { settingsOf } from "../settings/settings";
import { dmarcFacts, parseDmarc, treeWalkNames, type DmarcFacts, type DmarcRecord } from "../compliance/core/dmarc";

function b64(bytes: ArrayBuffer): string {
  let s = "";
  for (const b of new Uint8Array(bytes)) s += String.fromCharCode(b);
  return btoa(s);
}

/** A new RSA-2048 DKIM key for `selector`. */
export async function newDkimKey(
  env: Env,
  domainId: string,
  selector: string,
  state: KeyRow["state"],
  nowMs: number,
): Promise<KeyRow> {
  const pair = (await crypto.subtle.generateKey(
    { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" },
    true,
    ["sign", "verify"],
  )) as CryptoKeyPair;
  const spki = (await crypto.subtle.exportKey("spki", pair.publicKey)) as ArrayBuffer;
  const pkcs8 = (await crypto.subtle.exportKey("pkcs8", pair.privateKey)) as ArrayBuffer;
  const pem = `-----BEGIN PRIVATE KEY-----\n${b64(pkcs8)
    .replace(/(.{64})/g, "$1\n")
    .trim()}\n-----END PRIVATE KEY-----\n`;
  return {
    domain_id: domainId,
    selector,
    algorithm: "rsa-sha256",
    public_key: b64(spki),
    private_sealed: await sealSecret(await secretsKey(env), pem),
    state,
    created_at: nowMs,
  };
}

/** The record options from the configuration (see header). */
export function recordOptions(env: Env, selector: string, publicKey: string, returnPath: string): RecordOptions {
  const e = env as unknown as { RETURN_PATH_MX?: string; SPF_RECORD?: string };
  return {
    selector,
    publicKey,
    keyType: "rsa",
    returnPath,
    mxHost: e.RETURN_PATH_MX || `feedback.${settingsOf(env).heloName}`,
    spf: e.SPF_RECORD || "v=spf1 ~all",
  };
}

/** See the header. */
export async function dnsLookup(env: Env, name: string, type: "TXT" | "MX"): Promise<Found> {
  const event = await queryDoh(name, type, { resolverUrl: settingsOf(env).dohResolverUrl });
  if (event.kind === "failed") return { kind: "error" };
  const msg = parseDohJson(event.body);
  if ("error" in msg) return { kind: "error" };
  if (msg.status === DNS_STATUS.NXDOMAIN) return { kind: "answer", values: [] };
  if (msg.status !== DNS_STATUS.NOERROR) return { kind: "error" };
  const sel = selectAnswers(msg, name, type === "TXT" ? DNS_TYPE.TXT : DNS_TYPE.MX);
  if (sel.error !== null) return { kind: "error" };
  return { kind: "answer", values: sel.records.map((r) => (type === "TXT" ? txtValue(r.data) : r.data)) };
}

/** The domain's DMARC facts by RFC 9989's tree walk, or null when a lookup failed. */
export async function lookupDmarc(env: Env, domain: string, nowMs: number): Promise<DmarcFacts | null> {
  const names = treeWalkNames(domain);
  const [answers, bimi] = await Promise.all([
    Promise.all(names.map((n) => dnsLookup(env, `_dmarc.${n}`, "TXT"))),
    dnsLookup(env, `default._bimi.${domain}`, "TXT"),
  ]);
  if (answers.some((a) => a.kind === "error")) return null;
  const records = new Map<string, DmarcRecord | null>(
    names.map((n, i) => [n, parseDmarc((answers[i] as { values: string[] }).values)]),
  );
  const bimiRecord = bimi.kind === "answer" && bimi.values.some((v) => /^v=BIMI1\b/i.test(v.trim()));
  return dmarcFacts(domain, records, bimiRecord, nowMs);
}

/** Checks every record of the domain (see header). */
export async function verifyDomain(
  env: Env,
  row: DomainRow,
  keys: KeyRow[],
): Promise<{ records: DomainRecord[]; status: DomainStatus; promote: string | null; dmarc: DmarcFacts | null }> {
  const records = JSON.parse(row.records) as DomainRecord[];
  const [checked, dmarc] = await Promise.all([
    Promise.all(
      records.map(async (r) => ({
        ...r,
        status: judgeRecord(r, await dnsLookup(env, `${r.name}.${row.name}`, r.type)),
      })),
    ),
    lookupDmarc(env, row.name, Date.now()),
  ]);
  const next = keys.find((k) => k.state === "next");
  const nextOk =
    next !== undefined &&
    checked.some((r) => r.record === "DKIM" && r.name === `${next.selector}._domainkey` && r.status === "verified");
  // Once the rotation's selector verifies, the old selector's record is no longer needed.
  const active = keys.find((k) => k.state === "active");
  const kept =
    nextOk && active
      ? checked.filter((r) => !(r.record === "DKIM" && r.name === `${active.selector}._domainkey`))
      : checked;
  const rotating = next !== undefined && !nextOk ? `${next.selector}._domainkey` : undefined;
  return {
    records: kept,
    status: domainStatus(kept, { rotating, previous: row.status }),
    promote: nextOk ? next!.selector : null,
    dmarc,
  };
}
