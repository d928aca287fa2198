/*
 * NAME
 *   tlsrpt - SMTP TLS Reporting (RFC 8460): the `_smtp._tls` record, result types and the
 *            daily aggregate report
 *
 * SUMMARY
 *   Pure: the shell (worker/tls-policy/tlsrpt.ts) counts sessions in D1, looks the record up and
 *   sends what buildReport returns.
 *
 * DESCRIPTION
 *   parseTlsRptRecord(txts)   the TXT answers → { rua: [uri, …] } | null: exactly one record
 *                             starting "v=TLSRPTv1"; rua is a comma-separated list of mailto:
 *                             and https: URIs (others are dropped; none left is null).
 *   resultTypeOf(failure)     the RFC 8460 4.3 result type of a TLS failure as the session saw it
 *                             ("starttls-not-supported", "certificate-host-mismatch",
 *                             "certificate-expired", "certificate-not-trusted",
 *                             "validation-failure") or of an MTA-STS problem
 *                             ("sts-policy-fetch-error", "sts-policy-invalid", "sts-webpki-invalid").
 *   buildReport(input)        the report object of one policy domain and one UTC day (4.4).
 *   reportFileName(...)       5.3's "<submitter>!<policy domain>!<begin>!<end>!<id>.json.gz".
 *
 * INVARIANTS
 *   total-failure-session-count is the sum of the failure details' counts.
 *
 * ERRORS
 *   None thrown.
 */

/** Result types used here (RFC 8460 4.3). */
export type TlsResultType =
  | "starttls-not-supported"
  | "certificate-host-mismatch"
  | "certificate-expired"
  | "certificate-not-trusted"
  | "validation-failure"
  | "sts-policy-fetch-error"
  | "sts-policy-invalid"
  | "sts-webpki-invalid";

/** The record (see the header). */
export function parseTlsRptRecord(txts: readonly string[]): { rua: string[] } | null {
  const recs = txts.filter((t) => /^v=TLSRPTv1(;|\s|$)/.test(t.trim()));
  if (recs.length !== 1) return null;
  const m = /(?:^|;)\s*rua\s*=\s*([^;]*)/.exec(recs[0]!);
  if (!m) return null;
  const rua = m[1]!
    .split(",")
    .map((u) => u.trim())
    .filter((u) => /^mailto:[^@\s]+@[^@\s]+$/i.test(u) || /^https:\/\/\S+$/i.test(u));
  return rua.length > 0 ? { rua } : null;
}

/** The result type of a failure's text (see the header). */
export function resultTypeOf(failure: string): TlsResultType {
  const t = failure.toLowerCase();
  if (/not offered|not supported|refused to start tls|starttls/.test(t) && !/handshake/.test(t))
    return "starttls-not-supported";
  if (/expired/.test(t)) return "certificate-expired";
  if (/host ?name|mismatch|subject ?alt|does not match|wrong name|ip address/.test(t))
    return "certificate-host-mismatch";
  if (
    /self[- ]signed|unknown (ca|issuer)|issuer|untrusted|not trusted|unable to (get|verify)|verif|certificate/.test(t)
  )
    return "certificate-not-trusted";
  return "validation-failure";
}

/** One counted row: successes have result "success" (mx and ip empty). */
export interface CountRow {
  result: string;
  mx: string;
  ip: string;
  n: number;
}

/** What one domain's report is made of. */
export interface ReportInput {
  organization: string;
  contact: string;
  reportId: string;
  /** The UTC day, "YYYY-MM-DD". */
  day: string;
  domain: string;
  policyType: "sts" | "no-policy-found";
  policyStrings: string[];
  mxHosts: string[];
  rows: CountRow[];
}

/** The report (4.4). */
export function buildReport(r: ReportInput) {
  const ok = r.rows.filter((x) => x.result === "success").reduce((n, x) => n + x.n, 0);
  const failures = r.rows.filter((x) => x.result !== "success");
  return {
    "organization-name": r.organization,
    "date-range": { "start-datetime": `${r.day}T00:00:00Z`, "end-datetime": `${r.day}T23:59:59Z` },
    "contact-info": r.contact,
    "report-id": r.reportId,
    policies: [
      {
        policy: {
          "policy-type": r.policyType,
          ...(r.policyType === "sts" ? { "policy-string": r.policyStrings, "mx-host": r.mxHosts } : {}),
          "policy-domain": r.domain,
        },
        summary: {
          "total-successful-session-count": ok,
          "total-failure-session-count": failures.reduce((n, x) => n + x.n, 0),
        },
        ...(failures.length > 0
          ? {
              "failure-details": failures.map((f) => ({
                "result-type": f.result,
                ...(f.ip ? { "sending-mta-ip": f.ip } : {}),
                ...(f.mx ? { "receiving-mx-hostname": f.mx } : {}),
                "failed-session-count": f.n,
              })),
            }
          : {}),
      },
    ],
  };
}

/** The epoch seconds of a UTC day's start and end. */
export function dayRange(day: string): { begin: number; end: number } {
  const begin = Date.parse(`${day}T00:00:00Z`) / 1000;
  return { begin, end: begin + 86_399 };
}

/** 5.3's file name. */
export function reportFileName(submitter: string, domain: string, day: string, id: string): string {
  const { begin, end } = dayRange(day);
  return `${submitter}!${domain}!${begin}!${end}!${id}.json.gz`;
}
