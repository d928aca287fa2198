/**
 * TLS-RPT (RFC 8460) in the relay: sessions counted per policy domain, and the daily reports.
 *
 * DESCRIPTION
 *   TlsRptTally              counts of one delivery stage: add(info, result, mx, ip) for a domain
 *                            that publishes a TLS-RPT record (others are not counted), flush(env)
 *                            writes them to D1 `tlsrpt_counts` in one batch (one upsert per day,
 *                            domain, result, MX host and address), so a stage that delivered many
 *                            messages to one domain writes one row.
 *   sendTlsReports(env, nowMs)  run by the daily cron: for every (day, domain) counted before today
 *                            and not yet reported (at most MAX_REPORTS_PER_RUN), the report of
 *                            core/tlsrpt.ts, gzipped, to each `rua`: an https: URI gets a POST
 *                            (Content-Type application/tlsrpt+gzip) through the SSRF guard; a
 *                            mailto: URI a multipart/report message (report-type "tlsrpt", the
 *                            gzipped JSON attached, 5.3) accepted through the relay itself from
 *                            TLSRPT_FROM, signed with the operator's DKIM key for that domain. Each
 *                            report is recorded in `tlsrpt_reports` (sent or failed, by URI), and
 *                            counts older than RETAIN_DAYS, reports older than 30 days (and GET
 *                            /metrics' accept refusals as old) are purged.
 *
 * INVARIANTS
 *   A (day, domain) is reported once. Storage is bounded: counts exist only for domains with a
 *   record, and only for RETAIN_DAYS days.
 */
import { affineShard } from "../model/ids";
import { storeAndQueue } from "../accept/accept";
import { limitsOf } from "../accept/limits";
import { prepareRaw } from "../accept/raw";
import { SenderPolicy } from "../domains/sender";
import type { KeyAccess } from "../db/sending-domains";
import { checkEndpointUrl, LOCAL_DEVELOPMENT } from "../net/core/ssrf";
import { resolvedTarget } from "../net/fetch-guard";
import { policyStrings } from "./core/mta-sts";
import { buildReport, reportFileName, type CountRow } from "./core/tlsrpt";
import type { StsInfo } from "./sts";
import { settingsOf } from "../settings/settings";

/** The cron expression of the daily run (wrangler.toml [triggers]). */
export const TLSRPT_CRON = "30 0 * * *";

/** Days counts are kept. */
export const RETAIN_DAYS = 7;
/** Reports one cron run sends at most. */
export const MAX_REPORTS_PER_RUN = 200;
/** The tenant the report messages are accepted for. */
export const REPORT_TENANT = "relay";

const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

export class TlsRptTally {
  private readonly rows = new Map<
    string,
    { day: string; domain: string; result: string; mx: string; ip: string; n: number }
  >();

  constructor(private readonly now: () => number = Date.now) {}

  /** Counts one session for a domain with a TLS-RPT record. */
  add(info: StsInfo | null, result: string, mx = "", ip = ""): void {
    if (!info?.rua) return;
    const day = dayOf(this.now());
    const key = [day, info.domain, result, mx, ip].join("\u0000");
    const r = this.rows.get(key) ?? { day, domain: info.domain, result, mx, ip, n: 0 };
    r.n += 1;
    this.rows.set(key, r);
  }

  get size(): number {
    return this.rows.size;
  }

  /** Writes the counts (one batch); on failure they are logged and dropped. */
  async flush(env: Env): Promise<void> {
    if (this.rows.size === 0) return;
    const rows = [...this.rows.values()];
    this.rows.clear();
    await env.DB.prepare(
      `INSERT INTO tlsrpt_counts (day, domain, result, mx, ip, n)
        SELECT json_extract(value, '$.day'), json_extract(value, '$.domain'), json_extract(value, '$.result'),
          json_extract(value, '$.mx'), json_extract(value, '$.ip'), json_extract(value, '$.n')
        FROM json_each(?1) WHERE true
        ON CONFLICT (day, domain, result, mx, ip) DO UPDATE SET n = n + excluded.n`,
    )
      .bind(JSON.stringify(rows))
      .run()
      .catch((e: unknown) =>
        console.error(
          JSON.stringify({ error: "TLS-RPT counts not written", detail: e instanceof Error ? e.message : String(e) }),
        ),
      );
  }
}

async function gzip(text: string): Promise<Uint8Array> {
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

function base64Lines(bytes: Uint8Array): string {
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin).replace(/(.{76})/g, "$1\r\n");
}

/** The operator identity the report mail is accepted with. */
function operatorKey(): KeyAccess {
  return {
    id: "tlsrpt",
    tenant: REPORT_TENANT,
    role: "operator",
    permission: "full_access",
    domainId: null,
    domainName: null,
    verified: null,
    unsubscribe: null,
    bulkPausedUntil: null,
  };
}

async function sendMail(
  env: Env,
  to: string,
  from: string,
  org: string,
  domain: string,
  reportId: string,
  file: string,
  gz: Uint8Array,
): Promise<string> {
  const boundary = `tlsrpt-${reportId}`;
  const message = [
    `From: ${from}`,
    `To: ${to}`,
    `Subject: Report Domain: ${domain} Submitter: ${org} Report-ID: <${reportId}@${org}>`,
    `TLS-Report-Domain: ${domain}`,
    `TLS-Report-Submitter: ${org}`,
    "MIME-Version: 1.0",
    `Content-Type: multipart/report; report-type="tlsrpt"; boundary="${boundary}"`,
    "",
    `--${boundary}`,
    "Content-Type: text/plain; charset=utf-8",
    "",
    `This is an aggregate TLS report from ${org} for ${domain}.`,
    "",
    `--${boundary}`,
    "Content-Type: application/tlsrpt+gzip",
    "Content-Transfer-Encoding: base64",
    `Content-Disposition: attachment; filename="${file}"`,
    "",
    base64Lines(gz),
    `--${boundary}--`,
    "",
  ].join("\r\n");
  const limits = limitsOf(env);
  const shard = affineShard(limits.shards);
  const sender = new SenderPolicy(env, REPORT_TENANT, operatorKey());
  const prepared = await prepareRaw(
    env,
    { mail_from: from, rcpt_to: [to], message, encoding: "utf8" },
    { shard, nowMs: Date.now(), limits, sender, origin: "" },
  );
  await storeAndQueue(env, {
    tenant: REPORT_TENANT,
    shard,
    idempotency: null,
    prepared: [prepared],
    response: { status: 200, body: "{}" },
  });
  return prepared.record.id;
}

async function post(env: Env, url: string, gz: Uint8Array): Promise<string> {
  const local = settingsOf(env).local;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`${url} is not a URL`);
  }
  const verdict = checkEndpointUrl(parsed, local ? LOCAL_DEVELOPMENT : {});
  if (!verdict.ok) throw new Error(`refused by the SSRF guard: ${verdict.detail}`);
  const resolved = await resolvedTarget(env, url);
  if (resolved.kind !== "ok") throw new Error(resolved.reason);
  const res = await fetch(parsed.href, {
    method: "POST",
    headers: { "content-type": "application/tlsrpt+gzip" },
    body: gz,
    redirect: "manual",
  });
  void res.body?.cancel().catch(() => undefined);
  if (res.status < 200 || res.status >= 300) throw new Error(`HTTP ${res.status}`);
  return `HTTP ${res.status}`;
}

/** See the header. */
export async function sendTlsReports(
  env: Env,
  nowMs: number,
): Promise<{ reports: number; sent: number; failed: number }> {
  const s = settingsOf(env);
  const today = dayOf(nowMs);
  const due = (
    await env.DB.prepare(
      `SELECT DISTINCT c.day, c.domain FROM tlsrpt_counts c
      WHERE c.day < ?1 AND NOT EXISTS (SELECT 1 FROM tlsrpt_reports r WHERE r.day = c.day AND r.domain = c.domain) ORDER BY c.day, c.domain LIMIT ?2`,
    )
      .bind(today, MAX_REPORTS_PER_RUN)
      .all<{ day: string; domain: string }>()
  ).results;
  let sent = 0;
  let failed = 0;
  for (const { day, domain } of due) {
    const [rows, cached] = await Promise.all([
      env.DB.prepare("SELECT result, mx, ip, n FROM tlsrpt_counts WHERE day = ? AND domain = ?")
        .bind(day, domain)
        .all<CountRow>()
        .then((r) => r.results),
      env.DB.prepare("SELECT entry, rua FROM mta_sts_policies WHERE domain = ?")
        .bind(domain)
        .first<{ entry: string; rua: string | null }>(),
    ]);
    const entry = cached ? (JSON.parse(cached.entry) as StsInfo["entry"]) : null;
    const rua = cached?.rua ? (JSON.parse(cached.rua) as string[]) : [];
    const policy = entry?.policy ?? null;
    const reportId = crypto.randomUUID();
    const report = buildReport({
      organization: s.tlsrptOrg,
      contact: s.tlsrptFrom || s.tlsrptOrg,
      reportId,
      day,
      domain,
      policyType: policy ? "sts" : "no-policy-found",
      policyStrings: policy ? policyStrings(policy) : [],
      mxHosts: policy?.mx ?? [],
      rows,
    });
    const gz = await gzip(JSON.stringify(report));
    const outcomes: Record<string, string> = {};
    for (const uri of rua) {
      try {
        if (/^https:/i.test(uri)) outcomes[uri] = await post(env, uri, gz);
        else if (!s.tlsrptFrom) throw new Error("TLSRPT_FROM is not set: mailto reports are not sent");
        else {
          const file = reportFileName(s.tlsrptOrg, domain, day, reportId);
          outcomes[uri] =
            `queued ${await sendMail(env, decodeURIComponent(uri.slice(7)), s.tlsrptFrom, s.tlsrptOrg, domain, reportId, file, gz)}`;
        }
        sent++;
      } catch (e) {
        failed++;
        outcomes[uri] = `failed: ${e instanceof Error ? e.message : String(e)}`;
      }
    }
    await env.DB.prepare(
      "INSERT OR REPLACE INTO tlsrpt_reports (day, domain, report_id, report, outcome, sent_at) VALUES (?, ?, ?, ?, ?, ?)",
    )
      .bind(day, domain, reportId, JSON.stringify(report), JSON.stringify(outcomes), nowMs)
      .run();
  }
  const oldest = dayOf(nowMs - RETAIN_DAYS * 86_400_000);
  await env.DB.batch([
    env.DB.prepare("DELETE FROM tlsrpt_counts WHERE day < ?").bind(oldest),
    env.DB.prepare("DELETE FROM tlsrpt_reports WHERE day < ?").bind(dayOf(nowMs - 30 * 86_400_000)),
    // GET /metrics' accept refusals per day (worker/api/http/refusals.ts) are kept as long.
    env.DB.prepare("DELETE FROM accept_refusals WHERE day < ?").bind(dayOf(nowMs - 30 * 86_400_000)),
  ]);
  return { reports: due.length, sent, failed };
}
