/**
 * npm run bench:webhooks [-- --messages <n>] [--rcpts <n>] [--concurrency <n>] [--json]
 *
 * Events pushed to a local webhook receiver per second, end to end under `wrangler dev`: it
 * starts a private wrangler dev (scripts/lib/dev-server.ts: free ports, fresh temporary state),
 * an SMTP catcher (scripts/lib/smtp-catcher.ts) that every recipient is routed to (a D1 route
 * "*" → the catcher, written with wrangler d1 execute), and a recording HTTP receiver
 * (test/integration/webhooks/receiver.ts) registered through POST /webhooks. Then it sends
 * `messages` emails of `rcpts` recipients each (default 100 × 5) over `concurrency` parallel
 * requests and waits until the receiver has every event: email.sent and email.delivered per
 * recipient, each counted once by webhook-id (repeats are counted apart). Every received
 * signature is checked with the standardwebhooks package.
 *
 * Then it replays every event to the same endpoint (POST /relay/webhooks/:id/replay, 1000 per
 * call) and times their arrival: the webhook path alone (queue → consumer → signed POST), with
 * no mail being accepted or delivered meanwhile.
 *
 * Prints the end-to-end rate (first POST /emails → last new event at the receiver), the push
 * phase alone (first → last event received) and the replay rate; with --json the last line is
 *   {"events_per_s":…,"push_phase_events_per_s":…,"replay_events_per_s":…,"events":…,"duplicates":…,"seconds":…}.
 * Everything it started is stopped, also on failure or Ctrl-C.
 */
import { execFile } from "node:child_process";
import { parseArgs } from "node:util";
import { promisify } from "node:util";
import { Webhook } from "standardwebhooks";
import { startReceiver, type Receiver } from "../test/integration/webhooks/receiver";
import { startDevServer, type DevServer, devFetch } from "../scripts/lib/dev-server";
import { WRANGLER_ENV } from "../scripts/lib/keys";
import { startCatcher, type Catcher } from "../scripts/lib/smtp-catcher";
import { commandLine } from "../scripts/lib/command-line";

const run = promisify(execFile);
const { values } = commandLine(import.meta.url, () =>
  parseArgs({
    options: {
      messages: { type: "string", default: "100" },
      rcpts: { type: "string", default: "5" },
      concurrency: { type: "string", default: "10" },
      json: { type: "boolean", default: false },
    },
  }),
);
const MESSAGES = Math.max(1, Number(values.messages));
const RCPTS = Math.max(1, Math.min(50, Number(values.rcpts)));
const CONCURRENCY = Math.max(1, Number(values.concurrency));
const TIMEOUT_MS = 300_000;

let server: DevServer | null = null;
let catcher: Catcher | null = null;
let receiver: Receiver | null = null;

async function stopAll(): Promise<void> {
  await server?.stop();
  await catcher?.close();
  await receiver?.close();
  server = null;
  catcher = null;
  receiver = null;
}

/** Routes every recipient to the catcher (D1 route "*"). */
async function routeToCatcher(state: string, smtpPort: number): Promise<void> {
  const sql =
    `INSERT INTO transports (name, nexthop) VALUES ('bench-sink', ` +
    `'[127.0.0.1]:${smtpPort}'); INSERT INTO routes (tenant_id, pattern, transport) VALUES ` +
    `(NULL, '*', 'bench-sink');`;
  await run("npx", ["wrangler", "d1", "execute", "DB", "--local", "--persist-to", state, "--command", sql], {
    env: WRANGLER_ENV,
  });
}

async function api<T>(s: DevServer, method: string, path: string, body: unknown): Promise<T> {
  const res = await devFetch(`${s.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${s.key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** Sends the messages with CONCURRENCY requests in flight. */
async function sendAll(s: DevServer): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < MESSAGES) {
      const i = next++;
      const to = Array.from({ length: RCPTS }, (_, r) => `m${i}r${r}@bench.example`);
      await api(s, "POST", "/emails", {
        from: "Bench <bench@acme.example>",
        to,
        subject: `Bench ${i}`,
        text: "Webhook benchmark",
      });
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
}

/** Waits until the receiver has `expected` distinct events; returns when the last new one came. */
async function waitForEvents(
  r: Receiver,
  expected: number,
  t0: number,
): Promise<{ lastAt: number; firstAt: number; distinct: number }> {
  for (;;) {
    const ids = new Map<string, number>();
    for (const d of r.log)
      if (d.status === 200 && !ids.has(d.headers["webhook-id"]!)) ids.set(d.headers["webhook-id"]!, d.at);
    if (ids.size >= expected) {
      const times = [...ids.values()];
      return { lastAt: Math.max(...times), firstAt: Math.min(...times), distinct: ids.size };
    }
    if (Date.now() - t0 > TIMEOUT_MS)
      throw new Error(`only ${ids.size} of ${expected} events arrived within ${TIMEOUT_MS / 1000} s`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** Replays every event to the endpoint; returns events/s from the first replay call to the last arrival. */
async function replayAll(s: DevServer, r: Receiver, endpointId: string, events: number): Promise<number> {
  const before = r.log.length;
  const t0 = Date.now();
  let after: string | null = null;
  let enqueued = 0;
  for (;;) {
    const page: { enqueued: number; has_more: boolean; last_event_id: string | null } = await api(
      s,
      "POST",
      `/relay/webhooks/${endpointId}/replay`,
      after ? { after } : { from: new Date(0).toISOString() },
    );
    enqueued += page.enqueued;
    if (!page.has_more || !page.last_event_id) break;
    after = page.last_event_id;
  }
  if (enqueued !== events) throw new Error(`replay enqueued ${enqueued} events, expected ${events}`);
  while (r.log.length - before < events) {
    if (Date.now() - t0 > TIMEOUT_MS)
      throw new Error(`only ${r.log.length - before} of ${events} replayed events arrived`);
    await new Promise((res) => setTimeout(res, 50));
  }
  const last = Math.max(...r.log.slice(before).map((d) => d.at));
  return events / Math.max(0.001, (last - t0) / 1000);
}

function verifyAll(r: Receiver, secret: string): number {
  const wh = new Webhook(secret);
  let bad = 0;
  for (const d of r.log) {
    try {
      wh.verify(d.body, {
        "webhook-id": d.headers["svix-id"]!,
        "webhook-timestamp": d.headers["svix-timestamp"]!,
        "webhook-signature": d.headers["svix-signature"]!,
      });
    } catch {
      bad++;
    }
  }
  return bad;
}

async function main(): Promise<void> {
  catcher = await startCatcher({});
  receiver = await startReceiver();
  server = await startDevServer({ tenant: "bench" });
  await routeToCatcher(server.state, catcher.smtpPort);
  const hook = await api<{ id: string; signing_secret: string }>(server, "POST", "/webhooks", {
    endpoint: `http://127.0.0.1:${receiver.port}/hook`,
    events: ["email.sent", "email.delivered"],
  });
  const expected = MESSAGES * RCPTS * 2;
  console.log(
    `${MESSAGES} emails × ${RCPTS} recipients over ${CONCURRENCY} parallel requests ` +
      `→ ${expected} events (email.sent + email.delivered) to one receiver on loopback, wrangler dev`,
  );
  const t0 = Date.now();
  await sendAll(server);
  const acceptedS = (Date.now() - t0) / 1000;
  const got = await waitForEvents(receiver, expected, t0);
  const seconds = (got.lastAt - t0) / 1000;
  const pushSeconds = Math.max(0.001, (got.lastAt - got.firstAt) / 1000);
  const duplicates = receiver.log.length - got.distinct;
  const replayRate = await replayAll(server, receiver, hook.id, got.distinct);
  const bad = verifyAll(receiver, hook.signing_secret);
  const rate = got.distinct / seconds;
  const pushRate = got.distinct / pushSeconds;
  console.log(`accepted all emails in ${acceptedS.toFixed(1)} s; last event at ${seconds.toFixed(1)} s`);
  console.log(
    `end to end   ${rate.toFixed(1).padStart(8)} events/s   (${got.distinct} events, ${duplicates} repeated deliveries, ${bad} bad signatures)`,
  );
  console.log(
    `push phase   ${pushRate.toFixed(1).padStart(8)} events/s   (first to last event at the receiver, ${pushSeconds.toFixed(1)} s)`,
  );
  console.log(
    `replay       ${replayRate.toFixed(1).padStart(8)} events/s   (every event replayed: queue → consumer → signed POST only)`,
  );
  if (bad > 0) throw new Error(`${bad} deliveries failed signature verification`);
  if (values.json) {
    const round = (n: number) => Math.round(n * 10) / 10;
    console.log(
      JSON.stringify({
        events_per_s: round(rate),
        push_phase_events_per_s: round(pushRate),
        replay_events_per_s: round(replayRate),
        events: got.distinct,
        duplicates,
        seconds: round(seconds),
      }),
    );
  }
}

process.once("SIGINT", () => void stopAll().then(() => process.exit(130)));
try {
  await main();
  await stopAll();
} catch (e) {
  await stopAll();
  console.error(e instanceof Error ? e.message : String(e));
  process.exit(1);
}
