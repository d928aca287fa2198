/**
 * The world of bench:cost's mx cases (bench/cost.ts --cases mx,mx-sts): mail to MX hosts instead
 * of the smarthost, resolved through the fixture DoH server of the delivery tests.
 *
 *   plain.bench        MX mx.plain.bench (127.0.0.1), no MTA-STS or TLS-RPT record: the baseline.
 *   sts-enforce.test   MX mx.sts-enforce.test (127.0.0.4), an MTA-STS policy in enforce and a
 *                      TLS-RPT record: every delivery needs STARTTLS with a certificate valid for
 *                      the MX name (test/fixtures/tls/sts-mx.pem, from the MTA-STS test CA that
 *                      NODE_EXTRA_CA_CERTS makes wrangler dev trust), and is counted for TLS-RPT.
 * Both MX hosts are one smtp-server each on the same port (MX_PORT), feeding one message list
 * that bench/cost.ts counts as it counts the smarthost sink's; the policy is served over HTTPS
 * (sts-policy.pem). Connections go out directly (EGRESS direct: local runs only).
 */
import { createServer } from "node:https";
import { readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo, Server as NetServer } from "node:net";
import { SMTPServer } from "smtp-server";
import { startDohServer } from "../../test/integration/delivery/doh-server";
import { WRANGLER_ENV } from "../../scripts/lib/keys";
import type { Catcher, CaughtMessage } from "../../scripts/lib/smtp-catcher";

const fixture = (name: string) => readFileSync(new URL(`../../test/fixtures/tls/${name}`, import.meta.url), "utf8");
const POLICY = "version: STSv1\nmode: enforce\nmx: *.sts-enforce.test\nmax_age: 86400\n";

type Rr = { name: string; type: number; TTL: number; data: string };
const one = (name: string, type: number, data: string) => ({
  Status: 0,
  Answer: [{ name: `${name}.`, type, TTL: 300, data }] as Rr[],
});

function sink(messages: CaughtMessage[], tls: boolean): SMTPServer {
  const s = new SMTPServer({
    logger: false,
    disableReverseLookup: true,
    authOptional: true,
    closeTimeout: 50,
    ...(tls ? { key: fixture("sts-mx-key.pem"), cert: fixture("sts-mx.pem") } : { disabledCommands: ["STARTTLS"] }),
    onData: (stream, session, callback) => {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        messages.push({
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          rcptTo: session.envelope.rcptTo.map((r) => r.address),
          body: "",
          receivedAt: Date.now(),
        });
        callback();
      });
    },
  });
  s.on("error", () => undefined);
  return s;
}

const listen = (server: NetServer, host: string, port: number) =>
  new Promise<number>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
  });

/** The running world: the vars for wrangler dev, the sink as a Catcher, and the lookups made so far. */
export interface MxWorld {
  vars: Record<string, string>;
  catcher: Catcher;
  /** DoH queries by "name/type" and MTA-STS policy fetches, so far. */
  lookups(): Promise<{ queries: Record<string, number>; fetches: number }>;
  close(): Promise<void>;
}

export async function startMxWorld(): Promise<MxWorld> {
  // wrangler dev trusts the MTA-STS test CA, as the delivery tests' workerd does (vitest.config.ts).
  const bundle = join(tmpdir(), `cohort-bench-ca-${process.getuid?.() ?? 0}.pem`);
  writeFileSync(bundle, fixture("sts-ca.pem"));
  (WRANGLER_ENV as Record<string, string>).NODE_EXTRA_CA_CERTS = bundle;
  const messages: CaughtMessage[] = [];
  const secure = sink(messages, true);
  const port = await listen(secure.server, "127.0.0.4", 0);
  const plain = sink(messages, false);
  await listen(plain.server, "127.0.0.1", port);
  let fetches = 0;
  const policy = createServer({ key: fixture("sts-policy-key.pem"), cert: fixture("sts-policy.pem") }, (req, res) => {
    fetches++;
    res.writeHead(200, { "content-type": "text/plain", "content-length": Buffer.byteLength(POLICY) }).end(POLICY);
  });
  const policyPort = await listen(policy, "127.0.0.1", 0);
  const nx = { Status: 3 };
  const doh = await startDohServer(
    {},
    {
      "plain.bench/MX": one("plain.bench", 15, "10 mx.plain.bench."),
      "mx.plain.bench/A": one("mx.plain.bench", 1, "127.0.0.1"),
      "_mta-sts.plain.bench/TXT": nx,
      "_smtp._tls.plain.bench/TXT": nx,
      "sts-enforce.test/MX": one("sts-enforce.test", 15, "10 mx.sts-enforce.test."),
      "mx.sts-enforce.test/A": one("mx.sts-enforce.test", 1, "127.0.0.4"),
      "_mta-sts.sts-enforce.test/TXT": one("_mta-sts.sts-enforce.test", 16, '"v=STSv1; id=bench1;"'),
      "_smtp._tls.sts-enforce.test/TXT": one(
        "_smtp._tls.sts-enforce.test",
        16,
        '"v=TLSRPTv1; rua=mailto:tlsrpt@plain.bench"',
      ),
      "mta-sts.sts-enforce.test/A": one("mta-sts.sts-enforce.test", 1, "127.0.0.1"),
    },
  );
  const catcher: Catcher = {
    smtpPort: port,
    httpPort: 0,
    messages,
    close: async () => {
      await Promise.all([
        new Promise<void>((r) => secure.close(() => r())),
        new Promise<void>((r) => plain.close(() => r())),
      ]);
    },
  };
  return {
    vars: {
      SMARTHOST: "",
      DOH_RESOLVER_URL: doh.url,
      MX_PORT: String(port),
      MTA_STS_PORT: String(policyPort),
      EGRESS: "direct",
    },
    catcher,
    lookups: async () => ({
      queries: (await (await fetch(doh.url.replace("/dns-query", "/queries"))).json()) as Record<string, number>,
      fetches,
    }),
    close: async () => {
      await doh.close();
      await new Promise<void>((r) => {
        policy.closeAllConnections();
        policy.close(() => r());
      });
    },
  };
}
