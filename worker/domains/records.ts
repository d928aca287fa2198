/**
 * A sending domain's DNS records, in Resend's shape, and their verification (pure).
 *
 * DESCRIPTION
 *   DomainRecord            { record, name, type, value, ttl, status, priority? } as Resend's API
 *                           returns them; `name` is relative to the domain, as Resend's are.
 *   recordsFor(domain, o)   what to publish: the DKIM key (TXT at <selector>._domainkey), SPF on
 *                           the return-path host (MX and TXT), and a DMARC suggestion (TXT at
 *                           _dmarc). Statuses start "not_started".
 *   judgeRecord(rec, found) a record's status from what DNS answered for its name: "verified"
 *                           when a matching value is there, "failed" when the name answered
 *                           without it, "temporary_failure" when the lookup itself failed.
 *   domainStatus(records, o?)  the domain's status: "verified" when every required record (DKIM,
 *                           SPF MX and TXT) is verified, "partially_verified" when some are,
 *                           "pending" while a lookup failed and none verified, else "failed".
 *                           o.rotating: the name of a rotation's new DKIM record, which does not
 *                           count until it verifies (the old selector signs meanwhile); o.previous:
 *                           the status before this check, so that a verified domain whose lookups
 *                           failed for a moment (none found missing) stays verified.
 *   txtValue(data)          a DoH TXT answer's text: its quoted strings joined.
 *
 * INVARIANTS
 *   The DMARC record is a suggestion: its status is reported, it never decides the domain's.
 *   Only a record found missing or wrong demotes a verified domain (and stops its sending).
 */
import type { DomainRecord, DomainStatus, RecordStatus } from "../model/domain";

export type { DomainRecord, DomainStatus, RecordStatus };

/** What DNS answered for one record's name and type. */
export type Found = { kind: "answer"; values: string[] } | { kind: "error" };

export interface RecordOptions {
  selector: string;
  /** The DKIM public key, base64 SPKI. */
  publicKey: string;
  /** "rsa" or "ed25519" (RFC 8463). */
  keyType: "rsa" | "ed25519";
  /** Sub-domain used as the return path (Resend's custom_return_path, default "send"). */
  returnPath: string;
  /** The return path's MX host (where bounces go). */
  mxHost: string;
  /** The SPF policy published on the return path. */
  spf: string;
}

/** The records to publish for `domain` (see header). */
export function recordsFor(_domain: string, o: RecordOptions): DomainRecord[] {
  return [
    {
      record: "DKIM",
      name: `${o.selector}._domainkey`,
      type: "TXT",
      value: `v=DKIM1; k=${o.keyType}; p=${o.publicKey}`,
      ttl: "Auto",
      status: "not_started",
    },
    {
      record: "SPF",
      name: o.returnPath,
      type: "MX",
      value: o.mxHost,
      ttl: "Auto",
      status: "not_started",
      priority: 10,
    },
    { record: "SPF", name: o.returnPath, type: "TXT", value: o.spf, ttl: "Auto", status: "not_started" },
    { record: "DMARC", name: "_dmarc", type: "TXT", value: "v=DMARC1; p=none;", ttl: "Auto", status: "not_started" },
  ];
}

/** The text of a DoH TXT answer ("\"v=spf1 \" \"~all\"" → "v=spf1 ~all"). */
export function txtValue(data: string): string {
  const parts = [...data.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!.replace(/\\(.)/g, "$1"));
  return parts.length > 0 ? parts.join("") : data;
}

const squash = (s: string) => s.replace(/\s+/g, "").replace(/;$/, "").toLowerCase();

/** Whether `got` (one DNS value) carries what `rec` asks for. */
function matches(rec: DomainRecord, got: string): boolean {
  if (rec.type === "MX")
    return got.trim().replace(/\.$/, "").toLowerCase().split(/\s+/).pop() === rec.value.toLowerCase();
  if (rec.record === "DKIM") {
    const p = /(?:^|;)\s*p=([^;]*)/i.exec(got.replace(/\s+/g, " "));
    return p !== null && p[1]!.replace(/\s+/g, "") === /p=([^;]*)/.exec(rec.value)![1];
  }
  if (rec.record === "DMARC") return /^v=DMARC1\b/i.test(got.trim());
  return squash(got) === squash(rec.value);
}

/** A record's status from what DNS answered (see header). */
export function judgeRecord(rec: DomainRecord, found: Found): RecordStatus {
  if (found.kind === "error") return "temporary_failure";
  return found.values.some((v) => matches(rec, v)) ? "verified" : "failed";
}

/** The domain's status from its records' (see header). */
export function domainStatus(
  records: readonly DomainRecord[],
  o: { rotating?: string; previous?: DomainStatus } = {},
): DomainStatus {
  const required = records.filter(
    (r) => r.record !== "DMARC" && !(r.record === "DKIM" && r.name === o.rotating && r.status !== "verified"),
  );
  if (required.every((r) => r.status === "not_started")) return "not_started";
  const ok = required.filter((r) => r.status === "verified").length;
  if (ok === required.length) return "verified";
  const unknown = required.filter((r) => r.status === "temporary_failure" || r.status === "pending").length;
  if (o.previous === "verified" && ok + unknown === required.length) return "verified";
  if (ok > 0) return "partially_verified";
  return unknown > 0 ? "pending" : "failed";
}
