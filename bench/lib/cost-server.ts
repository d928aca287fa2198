/**
 * bench:cost's runtime: one private wrangler dev with the meter on, a scripted SMTP sink and a
 * webhook receiver, and the waits and readings a case needs.
 *
 * DESCRIPTION
 *   setup(vars, sink?)     the server (frozen bundle, operator key, --test-scheduled; SMARTHOST the
 *                          sink, scripted: `tempfail-…` recipients are greylisted once, or the sink
 *                          given), a receiver subscribed to every event and a DoH zone (receiving
 *                          domains verified through it). teardown(s) stops them.
 *   api(s, method, path, body?, headers?)  a JSON call with the server's key.
 *   waitDelivered(s, rcpts, what)  until the sink has `rcpts` recipients and the receiver two
 *                          events (sent, delivered) per recipient.
 *   waitEvents(s, type, n, what)  until the receiver has `n` distinct events of `type`.
 *   waitStill(s, what)     until the meter has not moved for QUIET_MS and no object is active
 *                          (do_busy_now 0); answers the snapshot.
 *   runCron(s)             the cron trigger (wrangler's /cdn-cgi/handler/scheduled).
 *   rowsLeft(s), waitPurged(s, what)  rows the message tables hold; until they hold none.
 *   cpuMs(s)               CPU ms the server's workerd processes have used so far (Linux /proc:
 *                          the processes of wrangler's process group named workerd).
 *   devRows(s)             GET /relay/dev/rows.
 */
import { readdirSync, readFileSync } from "node:fs";
import { startReceiver, type Receiver } from "../../test/integration/webhooks/receiver";
import { devFetch, startDevServer, type DevServer } from "../../scripts/lib/dev-server";
import { startCatcher, type Catcher } from "../../scripts/lib/smtp-catcher";
import { startDohZone, type DohZone } from "../../scripts/lib/doh-zone";
import type { MixCostWorld } from "../world/cost-mix";

export type Counts = Record<string, number>;

/** What GET /relay/dev/meter answers (the fields bench:cost reads). */
export interface Snapshot {
  worker_invocations: number;
  worker_invocations_by_kind: Counts;
  do_requests: number;
  do_requests_by_class: Counts;
  do_requests_by_method?: Counts;
  do_alarms_by_class: Counts;
  do_rows_read: number;
  do_rows_read_by_class: Counts;
  do_rows_written: number;
  do_rows_written_by_class: Counts;
  d1_rows_read: number;
  d1_rows_written: number;
  d1_statements: number;
  queue_ops: number;
  queue_ops_by_queue: Counts;
  queue_writes: Counts;
  queue_reads: Counts;
  queue_deletes: Counts;
  r2_class_a: number;
  r2_class_b: number;
  r2_deletes: number;
  rows_written_by_statement?: Counts;
  rows_read_by_statement?: Counts;
  runs_by_statement?: Counts;
  do_active_ms_by_class?: Counts;
  do_wakes_by_class?: Counts;
  do_active_objects_by_class?: Counts;
  do_busy_now?: number;
  do_bytes_by_class?: Counts;
  d1_bytes?: number;
  email_sends?: number;
}

export interface Setup {
  server: DevServer;
  catcher: Catcher;
  receiver: Receiver;
  doh: DohZone;
  /** The mail world the server delivers to, where a case runs in one (bench/world/cost-mix.ts). */
  world?: MixCostWorld;
}

const EVENTS = [
  "email.sent",
  "email.delivered",
  "email.delivery_delayed",
  "email.bounced",
  "email.failed",
  "email.suppressed",
  "email.canceled",
  "email.complained",
  "email.received",
];
const TIMEOUT_MS = 300_000;
const QUIET_MS = 3000;
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const running: Setup[] = [];

export async function api<T>(
  s: DevServer,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<T> {
  const all = { authorization: `Bearer ${s.key}`, "content-type": "application/json", ...headers };
  const res = await devFetch(`${s.url}${path}`, {
    method,
    headers: all,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

export async function setup(vars: Record<string, string>, sink?: Catcher): Promise<Setup> {
  const catcher = sink ?? (await startCatcher({ scripted: true }));
  const receiver = await startReceiver();
  const doh = await startDohZone();
  const server = await startDevServer({
    tenant: "bench",
    role: "operator",
    frozen: true,
    testScheduled: true,
    meter: true,
    vars: {
      SMARTHOST: `[127.0.0.1]:${catcher.smtpPort}`,
      RELAY_TLS: "off",
      COHORT_ENV: "development",
      DOH_RESOLVER_URL: doh.url,
      ...vars,
    },
  }).catch(async (e: unknown) => {
    await catcher.close();
    await receiver.close();
    await doh.close();
    throw e;
  });
  const s: Setup = { server, catcher, receiver, doh };
  running.push(s);
  await api(server, "POST", "/webhooks", { endpoint: `http://127.0.0.1:${receiver.port}/hook`, events: EVENTS });
  return s;
}

export async function teardown(s: Setup): Promise<void> {
  running.splice(running.indexOf(s), 1);
  await s.server.stop();
  await s.catcher.close();
  await s.receiver.close();
  await s.doh.close();
}

export const rcptsCaught = (c: Catcher) => c.messages.reduce((n, m) => n + m.rcptTo.length, 0);

export function distinctEvents(r: Receiver): Counts {
  const seen = new Set<string>();
  const byType: Counts = {};
  for (const d of r.log) {
    const id = d.headers["webhook-id"] ?? d.headers["svix-id"];
    if (d.status !== 200 || !id || seen.has(id)) continue;
    seen.add(id);
    const type = (JSON.parse(d.body) as { type: string }).type;
    byType[type] = (byType[type] ?? 0) + 1;
  }
  return byType;
}

export const total = (c: Counts) => Object.values(c).reduce((a, b) => a + b, 0);

/** Until the receiver has `n` distinct events of `type`. */
export async function waitEvents(s: Setup, type: string, n: number, what: string): Promise<void> {
  const t0 = Date.now();
  while ((distinctEvents(s.receiver)[type] ?? 0) < n) {
    if (Date.now() - t0 > TIMEOUT_MS) {
      throw new Error(
        `${what}: ${distinctEvents(s.receiver)[type] ?? 0}/${n} ${type} events after ${TIMEOUT_MS / 1000} s`,
      );
    }
    await sleep(250);
  }
}

/** Until every recipient is at the sink and the receiver has email.sent and email.delivered for each. */
export async function waitDelivered(s: Setup, rcpts: number, what: string): Promise<void> {
  const t0 = Date.now();
  const delivered = () => distinctEvents(s.receiver)["email.delivered"] ?? 0;
  while (
    rcptsCaught(s.catcher) < rcpts ||
    delivered() < rcpts ||
    (distinctEvents(s.receiver)["email.sent"] ?? 0) < rcpts
  ) {
    if (Date.now() - t0 > TIMEOUT_MS) {
      throw new Error(
        `${what}: ${rcptsCaught(s.catcher)}/${rcpts} recipients and ${delivered()}/${rcpts} delivered events after ${TIMEOUT_MS / 1000} s`,
      );
    }
    await sleep(250);
  }
}

/**
 * Until the meter stands still for QUIET_MS with no object active, or until `deadline` (ms since
 * the epoch, if given), whichever comes first; answers the snapshot then.
 */
export async function waitStill(s: Setup, what: string, deadline = Infinity): Promise<Snapshot> {
  const t0 = Date.now();
  const read = async () => api<Snapshot>(s.server, "GET", "/relay/dev/meter");
  let last = await read();
  let lastEvents = s.receiver.log.length;
  let stillSince = Date.now();
  for (;;) {
    await sleep(500);
    const now = await read();
    if (
      JSON.stringify(now) !== JSON.stringify(last) ||
      s.receiver.log.length !== lastEvents ||
      (now.do_busy_now ?? 0) > 0
    ) {
      last = now;
      lastEvents = s.receiver.log.length;
      stillSince = Date.now();
    } else if (Date.now() - stillSince >= QUIET_MS) {
      return now;
    }
    if (Date.now() >= deadline) return now;
    if (Date.now() - t0 > TIMEOUT_MS) throw new Error(`${what}: the meter did not stand still`);
  }
}

/** The Outbox's grace period on bench:cost's servers, seconds: the cron's wake arms every shard's sweep that far ahead. */
export const GRACE_S = 15;

/** Runs the cron handler once, and waits for the sweeps it arms (a grace period later) to have run. */
export async function runCron(s: Setup): Promise<void> {
  // wrangler 4 serves the cron trigger at /cdn-cgi/handler/scheduled (older: /__scheduled).
  let res = await devFetch(`${s.server.url}/cdn-cgi/handler/scheduled`);
  if (!res.ok) res = await devFetch(`${s.server.url}/__scheduled`);
  if (!res.ok) throw new Error(`scheduled trigger: ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
  await sleep(GRACE_S * 1000 + 3000);
}

export interface Rows {
  d1: Counts;
  outbox: Record<string, Counts>;
  transport: Record<string, Counts>;
  destination: Record<string, Counts>;
}

export const devRows = (s: Setup) => api<Rows>(s.server, "GET", "/relay/dev/rows");

/** Tables that hold per-message data (the others are configuration, keys, snapshots, feedback state). */
export const MESSAGE_TABLES = {
  d1: [
    "messages",
    "recipients",
    "event_log",
    "events",
    "event_feed",
    "message_tags",
    "webhook_delay_notices",
    "received_emails",
  ],
  outbox: ["message", "rcpt", "event", "idem", "dsn_pending", "control", "readmit", "complaint", "unsubscribe"],
  transport: [
    "rcpt",
    "finished",
    "admission",
    "admitted",
    "lease",
    "msg_meta",
    "final_rcpt",
    "retry_due",
    "incoming",
    "journal",
    "journal_ring",
  ],
};

/** Rows the server's message tables hold now, by "<store>.<table>". */
export async function rowsLeft(s: Setup): Promise<Counts> {
  const rows = await devRows(s);
  const tables: Counts = {};
  for (const t of MESSAGE_TABLES.d1) tables[`d1.${t}`] = rows.d1[t] ?? 0;
  for (const [kind, objs] of [
    ["outbox", rows.outbox],
    ["transport", rows.transport],
  ] as const) {
    for (const counts of Object.values(objs))
      for (const t of MESSAGE_TABLES[kind]) tables[`${kind}.${t}`] = (tables[`${kind}.${t}`] ?? 0) + (counts[t] ?? 0);
  }
  return tables;
}

/**
 * Until no message table holds a row (every message past its retention purged), or PURGE_WAIT_MS.
 * A message whose last recipient ended after the case's last delivery (a bounce, a late retry) is
 * purged later than the others; D1's rows and the Outboxes' go at a cron run (its wake of every
 * shard's sweeper), MESSAGE_RETENTION_DAYS after the message's last change. So while rows are
 * left, the cron runs again every CRON_AGAIN_MS, as production's does every 10 minutes. Rows
 * still held at the end are printed with what the index says of their messages.
 */
export async function waitPurged(s: Setup, what: string): Promise<void> {
  const t0 = Date.now();
  let cronAt = t0;
  for (let left = await rowsLeft(s); total(left) > 0; left = await rowsLeft(s)) {
    if (Date.now() - t0 > PURGE_WAIT_MS) {
      console.log(`${what}: rows still held after ${PURGE_WAIT_MS / 1000} s: ${JSON.stringify(left)}`);
      // What the index says of the messages it still holds (their last event decides the purge).
      const listed = await api<{ data: { id: string; last_event: string; created_at: string }[] }>(
        s.server,
        "GET",
        "/emails?limit=5",
      ).catch((e: unknown) => ({ data: [], error: String(e) }));
      for (const m of listed.data) {
        const full = await api<Record<string, unknown>>(s.server, "GET", `/emails/${m.id}`).catch((e: unknown) => ({
          error: String(e),
        }));
        console.log(`${what}: still in D1: ${JSON.stringify(m)} ${JSON.stringify(full).slice(0, 2000)}`);
      }
      return;
    }
    if (Date.now() - cronAt >= CRON_AGAIN_MS) {
      await runCron(s);
      cronAt = Date.now();
    } else await sleep(2000);
  }
}

const CRON_AGAIN_MS = 20_000;

const PURGE_WAIT_MS = 150_000;

const TICK_MS = 10; // Linux USER_HZ 100

/** CPU ms used so far by the workerd processes of this server's wrangler (see the header). */
export function cpuMs(s: Setup): number {
  const port = new URL(s.server.url).port;
  const stat = (pid: string) => {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = text.slice(text.lastIndexOf(")") + 2).split(" ");
    return {
      comm: text.slice(text.indexOf("(") + 1, text.lastIndexOf(")")),
      pgid: f[2]!,
      cpu: (Number(f[11]) + Number(f[12])) * TICK_MS,
    };
  };
  const pids = readdirSync("/proc").filter((p) => /^\d+$/.test(p));
  let group: string | null = null;
  for (const pid of pids) {
    try {
      const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      if (args.some((a) => a.includes("wrangler")) && args.includes("dev") && args[args.indexOf("--port") + 1] === port)
        group = stat(pid).pgid;
    } catch {
      /* gone */
    }
  }
  if (group === null) return 0;
  let ms = 0;
  for (const pid of pids) {
    try {
      const st = stat(pid);
      if (st.pgid === group && st.comm === "workerd") ms += st.cpu;
    } catch {
      /* gone */
    }
  }
  return ms;
}
