/**
 * npm run bench:accept [-- --duration <s>] [--connections <n>] [--json]
 *
 * For each case it starts its own `wrangler dev` (127.0.0.1, free ports, fresh temporary state, so
 * one case's backlog does not slow the next), creates an API key and drives POST /emails with
 * autocannon over loopback: a 2 KB message (the composed RFC 5322 text, calibrated with the
 * relay's own composer) to 1 and to 10 recipients, after a short warm-up and for a bounded time
 * (default 10 s). The whole relay runs meanwhile: the classify consumer and the Transport DOs
 * share the one local workerd process with the accept path. Prints accepted messages/s (2xx only) and p50/p99
 * latency; with --json the last line is
 *   {"accept_per_s":{"1rcpt":…,"10rcpt":…},"latency_ms":{"1rcpt":{"p50":…,"p99":…},"10rcpt":{…}}}.
 * Everything it started is stopped, also on failure or Ctrl-C.
 */
import autocannon from "autocannon";
import { parseArgs } from "node:util";
import { compose } from "../worker/mail/compose";
import { startDevServer, type DevServer, devFetch } from "../scripts/lib/dev-server";
import { commandLine } from "../scripts/lib/command-line";

const { values } = commandLine(import.meta.url, () =>
  parseArgs({
    options: {
      duration: { type: "string", default: "10" },
      connections: { type: "string", default: "10" },
      json: { type: "boolean", default: false },
    },
  }),
);
const DURATION_S = Math.max(1, Number(values.duration));
const CONNECTIONS = Math.max(1, Number(values.connections));
const TARGET_BYTES = 2048;

/** A send request whose composed message is TARGET_BYTES (± a few) long. */
function messageFor(rcpts: number): string {
  const to = Array.from({ length: rcpts }, (_, i) => `user${i}@example.com`);
  const base = { from: "Bench <bench@acme.example>", to, subject: "Accept benchmark" };
  const size = (text: string) => compose({ ...base, text }, { now: new Date(0), messageId: "0".repeat(36) }).raw.length;
  let text = "";
  while (size(text) < TARGET_BYTES) text += text.length % 72 === 71 ? "\n" : "x";
  return JSON.stringify({ ...base, text });
}

type Case = {
  acceptPerS: number;
  p50: number;
  p99: number;
  total: number;
  failed: number;
  bytes: number;
  drainS: number | null;
};

/**
 * Seconds until a message sent right after the load is classified (its recipients left
 * `incoming`): how far classification lagged behind accepting. Null after 120 s.
 */
async function classifyLag(server: DevServer, body: string): Promise<number | null> {
  const auth = { authorization: `Bearer ${server.key}` };
  const t0 = Date.now();
  const res = await devFetch(`${server.url}/emails`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body,
  });
  const { id } = (await res.json()) as { id: string };
  while (Date.now() - t0 < 120_000) {
    const email = (await (await devFetch(`${server.url}/emails/${id}`, { headers: auth })).json()) as {
      recipients: { status: string }[];
    };
    if (email.recipients.every((r) => r.status !== "incoming")) return (Date.now() - t0) / 1000;
    await new Promise((r) => setTimeout(r, 100));
  }
  return null;
}

async function runCase(rcpts: number): Promise<Case> {
  server = await startDevServer({ tenant: "bench" });
  try {
    return await measure(server, rcpts);
  } finally {
    await stop();
  }
}

async function measure(server: DevServer, rcpts: number): Promise<Case> {
  const body = messageFor(rcpts);
  const opts = {
    url: `${server.url}/emails`,
    method: "POST",
    body,
    connections: CONNECTIONS,
    headers: { authorization: `Bearer ${server.key}`, "content-type": "application/json" },
  };
  await autocannon({ ...opts, duration: 2 }); // warm-up: isolates, Durable Objects, caches
  const r = await autocannon({ ...opts, duration: DURATION_S });
  const drainS = await classifyLag(server, body);
  return {
    acceptPerS: r["2xx"] / r.duration,
    p50: r.latency.p50,
    p99: r.latency.p99,
    total: r.requests.total,
    failed: r.non2xx + r.errors + r.timeouts,
    bytes: body.length,
    drainS,
  };
}

function describe(name: string, c: Case): string {
  const lag = c.drainS === null ? "not within 120 s" : `${c.drainS.toFixed(1)} s`;
  return (
    `${name.padEnd(13)} ${c.acceptPerS.toFixed(0).padStart(6)} accepted/s   ` +
    `p50 ${c.p50.toFixed(1).padStart(6)} ms   p99 ${c.p99.toFixed(1).padStart(6)} ms   ` +
    `(${c.total} requests, ${c.failed} not accepted; classification caught up ${lag} after the load)`
  );
}

let server: DevServer | null = null;
const stop = async () => {
  await server?.stop();
  server = null;
};
process.once("SIGINT", () => void stop().then(() => process.exit(130)));

try {
  console.log(
    `POST /emails over loopback, ${TARGET_BYTES}-byte message, ${CONNECTIONS} connections, ${DURATION_S} s per case (autocannon), fresh wrangler dev per case`,
  );
  const one = await runCase(1);
  console.log(describe("1 recipient", one));
  const ten = await runCase(10);
  console.log(describe("10 recipients", ten));
  if (values.json) {
    const round = (n: number) => Math.round(n * 10) / 10;
    console.log(
      JSON.stringify({
        accept_per_s: { "1rcpt": round(one.acceptPerS), "10rcpt": round(ten.acceptPerS) },
        latency_ms: { "1rcpt": { p50: one.p50, p99: one.p99 }, "10rcpt": { p50: ten.p50, p99: ten.p99 } },
      }),
    );
  }
} catch (e) {
  await stop();
  console.error(e instanceof Error ? e.message : String(e));
  process.exit(1);
}
