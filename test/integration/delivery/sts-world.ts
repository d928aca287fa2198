/**
 * The MTA-STS and TLS-RPT world of the delivery tests (started by sink-setup.ts, in Node):
 *
 *   policy server  HTTPS on 127.0.0.1 (port provided as MTA_STS_PORT) with sts-policy.pem, a
 *                  certificate for mta-sts.<domain> of every test domain from the MTA-STS test CA
 *                  that NODE_EXTRA_CA_CERTS makes workerd trust; it answers
 *                  /.well-known/mta-sts.txt by Host and counts each fetch.
 *   rua receiver   HTTPS on 127.0.0.1 with trusted.pem (a certificate for 127.0.0.1): POST /tlsrpt
 *                  keeps each report (gunzipped) for GET /reports.
 *   MX sinks       on the SMTP sink's port (MX_PORT): 127.0.0.4 offers STARTTLS with sts-mx.pem
 *                  (valid for mx.sts-enforce.test and the other test MX names), 127.0.0.5 with
 *                  trusted.pem (a trusted CA, the wrong name), 127.0.0.6 no STARTTLS.
 *   DoH records    stsRecords(...): the MX, A and TXT (_mta-sts, _smtp._tls) answers of the test
 *                  domains, for doh-server.ts.
 *
 *   sts-enforce.test    enforce, mx *.sts-enforce.test → mx.sts-enforce.test (good certificate)
 *   sts-wrongname.test  enforce, mx mx.sts-wrongname.test → the wrong-name certificate
 *   sts-notls.test      enforce → an MX without STARTTLS
 *   sts-testing.test    testing → an MX without STARTTLS (delivered, the failure counted)
 *   sts-badmx.test      enforce, mx *.elsewhere.test: its MX matches no pattern
 * Each has a TLS-RPT record whose rua is mailto:tlsrpt@reports.test and the receiver's URL;
 * reports.test's MX is the SMTP sink.
 */
import { createServer, type Server } from "node:https";
import { readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import type { AddressInfo } from "node:net";
import { startScriptedSinks, type ScriptedSinks } from "./scripted-sinks";

const fixture = (name: string) => readFileSync(new URL(`../../fixtures/tls/${name}`, import.meta.url), "utf8");

/** The policy each test domain serves. */
export const STS_POLICIES: Record<string, string> = {
  "sts-enforce.test": "version: STSv1\r\nmode: enforce\r\nmx: *.sts-enforce.test\r\nmax_age: 86400\r\n",
  "sts-wrongname.test": "version: STSv1\nmode: enforce\nmx: mx.sts-wrongname.test\nmax_age: 86400\n",
  "sts-notls.test": "version: STSv1\nmode: enforce\nmx: *.sts-notls.test\nmax_age: 86400\n",
  "sts-testing.test": "version: STSv1\nmode: testing\nmx: mx.sts-testing.test\nmax_age: 86400\n",
  "sts-badmx.test": "version: STSv1\nmode: enforce\nmx: *.elsewhere.test\nmax_age: 86400\n",
};

/** Where each test domain's MX host is. */
const MX_ADDR: Record<string, string> = {
  "sts-enforce.test": "127.0.0.4",
  "sts-wrongname.test": "127.0.0.5",
  "sts-notls.test": "127.0.0.6",
  "sts-testing.test": "127.0.0.6",
  "sts-badmx.test": "127.0.0.4",
};

type Rr = { name: string; type: number; TTL: number; data: string };
type Answer = { Status: number; Answer?: Rr[] };

/** The DoH answers of the world (keys "name/TYPE", as doh-server.ts reads them). */
export function stsRecords(ruaUrl: string): Record<string, Answer> {
  const out: Record<string, Answer> = {};
  const one = (name: string, type: number, data: string): Answer => ({
    Status: 0,
    Answer: [{ name: `${name}.`, type, TTL: 300, data }],
  });
  for (const [domain, ip] of Object.entries(MX_ADDR)) {
    const mx = `mx.${domain}`;
    out[`${domain}/MX`] = one(domain, 15, `10 ${mx}.`);
    out[`${mx}/A`] = one(mx, 1, ip);
    out[`mta-sts.${domain}/A`] = one(`mta-sts.${domain}`, 1, "127.0.0.1");
    out[`_mta-sts.${domain}/TXT`] = one(`_mta-sts.${domain}`, 16, '"v=STSv1; id=20261128T000000;"');
    out[`_smtp._tls.${domain}/TXT`] = one(
      `_smtp._tls.${domain}`,
      16,
      `"v=TLSRPTv1; rua=mailto:tlsrpt@reports.test,${ruaUrl}"`,
    );
  }
  out["reports.test/MX"] = one("reports.test", 15, "10 localhost.");
  // The compliance test's domains (compliance.test.ts): one with a DMARC record (aspf strict, at
  // enforcement) and a BIMI record, one with neither; the walk ends at "test", which has none.
  const nx: Answer = { Status: 3 };
  out["_dmarc.comp-dmarc.test/TXT"] = one(
    "_dmarc.comp-dmarc.test",
    16,
    '"v=DMARC1; p=reject; aspf=s; rua=mailto:d@comp-dmarc.test"',
  );
  out["default._bimi.comp-dmarc.test/TXT"] = one(
    "default._bimi.comp-dmarc.test",
    16,
    '"v=BIMI1; l=https://comp-dmarc.test/logo.svg"',
  );
  out["_dmarc.comp-nodmarc.test/TXT"] = nx;
  out["default._bimi.comp-nodmarc.test/TXT"] = nx;
  out["_dmarc.test/TXT"] = nx;
  return out;
}

/** The running world. */
export interface StsWorld {
  policyPort: number;
  ruaUrl: string;
  /** GET: { fetches: {host: n}, reports: [report JSON] }. */
  statsUrl: string;
  sinks: ScriptedSinks;
  close(): Promise<void>;
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port));
  });
}

/** Starts the world; `smtpPort` is MX_PORT. */
export async function startStsWorld(smtpPort: number): Promise<StsWorld> {
  const fetches: Record<string, number> = {};
  const reports: unknown[] = [];
  const policy = createServer({ key: fixture("sts-policy-key.pem"), cert: fixture("sts-policy.pem") }, (req, res) => {
    const host = (req.headers.host ?? "").replace(/:\d+$/, "");
    fetches[host] = (fetches[host] ?? 0) + 1;
    const text = host.startsWith("mta-sts.") ? STS_POLICIES[host.slice(8)] : undefined;
    if (req.url !== "/.well-known/mta-sts.txt" || text === undefined) return void res.writeHead(404).end();
    res.writeHead(200, { "content-type": "text/plain", "content-length": Buffer.byteLength(text) }).end(text);
  });
  const rua = createServer({ key: fixture("trusted-key.pem"), cert: fixture("trusted.pem") }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method === "POST" && req.url === "/tlsrpt") {
        reports.push({
          contentType: req.headers["content-type"],
          report: JSON.parse(gunzipSync(Buffer.concat(chunks)).toString("utf8")),
        });
        return void res.writeHead(204).end();
      }
      if (req.url === "/stats")
        return void res
          .writeHead(200, { "content-type": "application/json" })
          .end(JSON.stringify({ fetches, reports }));
      res.writeHead(404).end();
    });
  });
  const [policyPort, ruaPort] = [await listen(policy), await listen(rua)];
  const sinks = await startScriptedSinks([
    {
      name: "stsGood",
      host: "127.0.0.4",
      port: smtpPort,
      tls: { key: fixture("sts-mx-key.pem"), cert: fixture("sts-mx.pem") },
    },
    {
      name: "stsWrongName",
      host: "127.0.0.5",
      port: smtpPort,
      tls: { key: fixture("trusted-key.pem"), cert: fixture("trusted.pem") },
    },
    { name: "stsNoTls", host: "127.0.0.6", port: smtpPort },
  ]);
  const stop = (s: Server) =>
    new Promise<void>((r) => {
      s.closeAllConnections();
      s.close(() => r());
    });
  return {
    policyPort,
    ruaUrl: `https://127.0.0.1:${ruaPort}/tlsrpt`,
    statsUrl: `https://127.0.0.1:${ruaPort}/stats`,
    sinks,
    close: async () => {
      await sinks.close();
      await stop(policy);
      await stop(rua);
    },
  };
}
