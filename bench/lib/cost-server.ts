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
 *   cpuMs(s)               CPU ms the server's workerd processes have used so far (Linux /proc:
 *                          the processes of wrangler's process group named workerd).
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
