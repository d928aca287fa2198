import { defineConfig } from "vitest/config";
import { readFileSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A CA bundle file with the extra CAs already configured (if any) plus the test CA, the one
 * self-signed certificate the delivery-tls tests choose to trust and the MTA-STS tests' CA
 * (test/fixtures/tls/README.md).
 */
function withTestCa(extra: string | undefined): string {
  let bundle = "";
  try {
    bundle = extra ? readFileSync(extra, "utf8") : "";
  } catch {
    /* an unreadable bundle adds nothing */
  }
  const file = join(tmpdir(), `cohort-test-ca-${process.getuid?.() ?? 0}.pem`);
  const fixture = (name: string) => readFileSync(new URL(`./test/fixtures/tls/${name}`, import.meta.url), "utf8");
  writeFileSync(file, `${bundle}\n${fixture("ca.pem")}\n${fixture("pinned.pem")}\n${fixture("sts-ca.pem")}`);
  return file;
}

// Trust for STARTTLS tests comes from NODE_EXTRA_CA_CERTS, which miniflare reads once at
// import time, so it must be set before the pool is loaded.
process.env.WRANGLER_SEND_METRICS ??= "false";
process.env.CLOUDFLARE_CF_FETCH_ENABLED ??= "false";
// The delivery-tls project's test CA and its pinned self-signed certificate (test/fixtures/tls/
// README.md) are added to the extra CAs workerd trusts, so STARTTLS to a certificate the CA
// signed, or to that self-signed one, verifies; any other self-signed certificate does not.
process.env.NODE_EXTRA_CA_CERTS = withTestCa(process.env.NODE_EXTRA_CA_CERTS);

const { cloudflareTest, readD1Migrations } = await import("@cloudflare/vitest-pool-workers");
const migrations = await readD1Migrations("./migrations");
// A throw-away Ed25519 DKIM key for the domain signed.test, so the accept path's signing runs.
const { generateKeyPairSync } = await import("node:crypto");
const dkimKey = generateKeyPairSync("ed25519").privateKey.export({ format: "pem", type: "pkcs8" }).toString();

// Shared by the projects where mail flows end to end (delivery, delivery-tls, webhooks): the
// Transport DOs dispatch on their own, back-off is 1–2 s so retries and revivals happen within a
// test, and the classify and deliver consumers and the Outbox's admission (ADMIT_BATCH_MS; the
// workers project keeps the default window, classify-at-accept.test.ts) run without batching delay.
// A message handed straight to delivery waits at most 2 s for the deliver consumer's index write.
// Accepts are never held back for inflow (IN_FLOW_DELAY_MS, Postfix's in_flow_delay): tests send
// bursts on purpose; core/flow.ts and the Transport DO's `over` answer have tests of their own,
// and the e2e project runs the wrangler.toml default. For the same reason these projects accept
// 64 send requests at once (ACCEPT_CONCURRENCY; the workers project keeps the default 4 and
// tests the 429 in accept-gate.test.ts).
// The Transport DOs ask their delivery agents after 2 s (AGENT_CHECK_SECONDS) whether they still
// hold an entry: every slower session is asked about, and an entry lost with its agent is retried
// within a test.
// The agents' feedback and index stages gather for 200 ms (AGENT_STAGE_MS, default 1000): with
// retries every 1–2 s, a second's gathering plus the acknowledgement's second kept a deferred
// recipient's newest event unacknowledged at every moment, and `settle` (helpers.ts) never saw
// the events drained.
const autoDispatch = {
  TEST_MIGRATIONS: migrations,
  COHORT_ENV: "test",
  DISPATCH: "auto",
  OUTBOX_SHARDS: "4",
  INDEX_LAG_SECONDS: "2",
  ADMIT_BATCH_MS: "0",
  IN_FLOW_DELAY_MS: "0",
  ACCEPT_CONCURRENCY: "64",
  AGENT_CHECK_SECONDS: "2",
  AGENT_STAGE_MS: "200",
};
const fastBackoff = { minimal_backoff_time: 1, maximal_backoff_time: 2 };
const immediateConsumers = {
  classify: { maxBatchTimeout: 0, maxBatchSize: 100 },
  "classify-bulk": { maxBatchTimeout: 0, maxBatchSize: 100 },
  deliver: { maxBatchTimeout: 0, maxBatchSize: 10 },
};

/** The delivery projects' egress pools: a gate then Dante, a gate alone, a smarthost (the sink), Email Service, direct. */
function egressPools(gates: Record<string, number>, socks: number, smtp: number): string {
  const pools = {
    failover: [`socks5://127.0.0.1:${gates.g1}`, `socks5://127.0.0.1:${socks}`],
    solo: [`socks5://127.0.0.1:${gates.g2}`],
    smarthost: [`smtp://[127.0.0.1]:${smtp}`],
    cf: ["cf-email"],
    direct: ["direct"],
  };
  return JSON.stringify({ pools, rules: Object.keys(pools).map((p) => ({ tenant: `pool-${p}`, pool: p })) });
}

/**
 * Delivery end to end, once per delivery agent (DELIVERY): the `deliver` queue consumer, and the
 * DeliveryAgent objects. The same tests run against both.
 */
function deliveryProject(
  name: string,
  delivery: "queue" | "agents",
  opts: { include?: string[]; bindings?: Record<string, string> } = {},
) {
  return {
    // Delivery end to end: the Transport DO dispatches on its own ("auto") to the deliver
    // consumer, which talks SMTP to a sink started by globalSetup.
    // The `mx` kind resolves through the fixture DoH server and reaches every MX host on the
    // sink's port through Dante (SOCKS5 with username/password); all are started by
    // globalSetup and read here with inject.
    plugins: [
      cloudflareTest(({ inject }) => ({
        wrangler: { configPath: "./wrangler.toml" },
        miniflare: {
          // Back-off of 1–2 s, so retries and dead-destination revival happen within a test.
          bindings: {
            ...autoDispatch,
            // The "limited" transport (concurrency.test.ts) learns with Postfix's classic 1/concurrency
            // positive feedback, as in the seed README's limiter experiment.
            // A small active queue (qmgr_message_active_limit 20), so bursts wait in the Transport DO's incoming queue.
            SCHEDULER_CONFIG: JSON.stringify({
              ...fastBackoff,
              qmgr_message_active_limit: 20,
              transports: { limited: { destination_concurrency_positive_feedback: "1/concurrency" } },
            }),
            DOH_RESOLVER_URL: inject("doh").url,
            MX_PORT: String(inject("sink").smtpPort),
            DSN_NOTICES: "on",
            DESTINATION_GROUPING: "site",
            DELIVERY: delivery,
            ...opts.bindings,
            EGRESS: `socks5://127.0.0.1:${inject("socks").port}`,
            EGRESS_USERNAME: inject("socks").username,
            EGRESS_PASSWORD: inject("socks").password,
            // The MTA-STS world (test/integration/delivery/sts-world.ts): policies on this port; TLS-RPT reports by mail from here.
            MTA_STS_PORT: String(inject("sts").policyPort),
            TLSRPT_FROM: "tlsrpt@cohort.test",
            TLSRPT_ORG: "cohort.test",
            // Egress pools (egress-pools.test.ts): only the pool-* tenants have one; everyone else leaves by EGRESS.
            EGRESS_POOLS: egressPools(inject("gates").ports, inject("socks").port, inject("sink").smtpPort),
            EGRESS_FAILURES: "2",
            EGRESS_SUSPEND_SECONDS: "2",
          },
          queueConsumers: {
            ...immediateConsumers,
          },
        },
      })),
    ],
    test: {
      name,
      include: opts.include ?? ["test/integration/delivery/**/*.test.ts"],
      exclude: ["test/integration/delivery/tls/**"],
      setupFiles: ["test/integration/apply-migrations.ts"],
      globalSetup: ["test/integration/delivery/sink-setup.ts"],
      testTimeout: 20_000,
    },
  };
}

export default defineConfig({
  test: {
    // Two test files at a time even on two cores (vitest's default, cores − 1, leaves one idle):
    // the workerd-backed files spend much of their time waiting on sockets, timers and workerd's
    // start-up. A test that races a fixed delay must leave the margin a busy machine needs.
    // Twice before, two at a time made a test fail that passed alone: leases.test.ts's "a
    // destination that dies" (it now waits on dies.test's 4 s answer), and the delivery-agents
    // eviction.test.ts, once (not all 60 recipients within 45 s of the Transport DO's abort). The
    // likely cause: the abort lost the answer that handed entries to an agent, and they filled the
    // window until their 15-min leases ended. The Transport DO now asks its agents about entries
    // leased for AGENT_CHECK_SECONDS (2 s here) and retries the lost ones (lost-agent.test.ts).
    maxWorkers: Math.max(2, availableParallelism()),
    projects: [
      {
        test: {
          name: "unit",
          environment: "node",
          include: ["test/unit/**/*.test.ts"],
        },
      },
      {
        plugins: [
          cloudflareTest({
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: {
              // Small limits and a 1 s sweeper grace period, so the limits and the crash recovery
              // can be exercised quickly; the queue consumer runs without batching delay.
              bindings: {
                TEST_MIGRATIONS: migrations,
                COHORT_ENV: "test",
                IN_FLOW_DELAY_MS: "0",
                // A request that finds every accept slot held waits 300 ms, not 10 s, before its 429 (accept-gate.test.ts).
                ACCEPT_WAIT_MS: "300",
                MAX_MESSAGE_BYTES: "200000",
                OUTBOX_GRACE_SECONDS: "1",
                OUTBOX_SHARDS: "4",
                // Checkpoint the Transport DO's journal often, so eviction tests cross snapshots,
                // and keep its ring small, so a test wraps it round.
                TRANSPORT_CHECKPOINT_EVERY: "7",
                TRANSPORT_JOURNAL_RING: "1024",
                // Journal every flush (no snapshot in its place for a tiny core), so these tests
                // see the ring; the delivery projects run the default.
                TRANSPORT_TINY_SNAPSHOT_CHARS: "0",
                // The scheduler tests drive dispatch through the RPC themselves.
                DISPATCH: "manual",
                // These tests look at bodies in R2; inline-body.test.ts covers bodies kept in the
                // Outbox row (the default, used by the delivery and webhook projects end to end).
                INLINE_BODY_BYTES: "0",
                DKIM_KEYS: JSON.stringify([
                  { domain: "signed.test", selector: "s1", algorithm: "ed25519-sha256", private_key: dkimKey },
                ]),
              },
              queueConsumers: {
                classify: { maxBatchTimeout: 0, maxBatchSize: 100 },
                "classify-bulk": { maxBatchTimeout: 0, maxBatchSize: 100 },
              },
            },
          }),
        ],
        test: {
          name: "workers",
          include: ["test/integration/**/*.test.ts"],
          exclude: ["test/integration/delivery/**", "test/integration/webhooks/**", "test/integration/shards/**"],
          setupFiles: ["test/integration/apply-migrations.ts"],
        },
      },
      deliveryProject("delivery", "queue"),
      deliveryProject("delivery-agents", "agents"),
      // A transport on three Transport DOs (TRANSPORT_SHARDS, docs/scale.md), end to end.
      deliveryProject("delivery-shards", "agents", {
        include: ["test/integration/shards/**/*.test.ts"],
        bindings: { TRANSPORT_SHARDS: "3" },
      }),
      {
        // STARTTLS and AUTH to a smarthost (the relay kind): TLS required, credentials as the
        // RELAY_USERNAME / RELAY_PASSWORD bindings; the servers are started by tls/tls-setup.ts.
        plugins: [
          cloudflareTest(() => ({
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: {
              bindings: {
                ...autoDispatch,
                SCHEDULER_CONFIG: JSON.stringify(fastBackoff),
                RELAY_TLS: "required",
                RELAY_USERNAME: "cohort",
                RELAY_PASSWORD: "s3cret-pass",
              },
              queueConsumers: {
                ...immediateConsumers,
              },
            },
          })),
        ],
        test: {
          name: "delivery-tls",
          include: ["test/integration/delivery/tls/**/*.test.ts"],
          setupFiles: ["test/integration/apply-migrations.ts"],
          globalSetup: ["test/integration/delivery/tls/tls-setup.ts"],
          testTimeout: 20_000,
        },
      },
      {
        // Webhooks end to end: mail flows to the scripted SMTP sink (auto dispatch), events are
        // published to the `webhooks` queue and POSTed to real HTTP receivers on loopback; the
        // sink and the receivers' control API are started by webhooks/setup.ts. The retry
        // schedule and endpoint back-off run at 1/10 000 of production (5 min → 30 ms; queue
        // delays round up to whole seconds), so the whole schedule fits in a test.
        plugins: [
          cloudflareTest(({ inject }) => ({
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: {
              bindings: {
                ...autoDispatch,
                SCHEDULER_CONFIG: JSON.stringify(fastBackoff),
                SMARTHOST: `[127.0.0.1]:${inject("webhookSink").smtpPort}`,
                RELAY_TLS: "off",
                WEBHOOK_RETRY_SCALE: "0.0001",
                WEBHOOK_TIMEOUT_MS: "5000",
              },
              queueConsumers: {
                ...immediateConsumers,
                webhooks: { maxBatchTimeout: 0, maxBatchSize: 50 },
                "webhooks-slow": { maxBatchTimeout: 0, maxBatchSize: 50 },
              },
            },
          })),
        ],
        test: {
          name: "webhooks",
          include: ["test/integration/webhooks/**/*.test.ts"],
          setupFiles: ["test/integration/apply-migrations.ts"],
          globalSetup: ["test/integration/webhooks/setup.ts"],
          testTimeout: 60_000,
        },
      },
      {
        test: {
          // The operator dashboard in Debian's Chromium (playwright-core) against a `wrangler dev`
          // with real traffic; screenshots go to test-artifacts/.
          name: "browser",
          environment: "node",
          include: ["test/browser/**/*.test.ts"],
          testTimeout: 60_000,
          hookTimeout: 180_000,
        },
      },
      {
        test: {
          // The README's examples against a real `wrangler dev` (started and stopped by the tests).
          name: "e2e",
          environment: "node",
          include: ["test/e2e/*.test.ts"],
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
