/**
 * bench:cost's view of retention: the cron run, and the rows a server's message tables still hold.
 *
 * DESCRIPTION
 *   runCron(s)             the cron trigger (wrangler's /cdn-cgi/handler/scheduled), then a grace
 *                          period for the sweeps it arms.
 *   devRows(s)             GET /relay/dev/rows.
 *   MESSAGE_TABLES         the tables that hold per-message data, by store.
 *   rowsLeft(s), waitPurged(s, what)  rows the message tables hold; until they hold none.
 */
import { api, sleep, total, type Counts, type Setup } from "./cost-server";
import { devFetch } from "../../scripts/lib/dev-server";

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
    "event_runs",
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
