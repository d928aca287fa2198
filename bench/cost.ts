/**
 * npm run bench:cost [-- --messages N] [--cases 1rcpt,10rcpt,batch100] [--var NAME=value …] [--json] [--budget] [--no-retention]
 *
 * What one email costs on Cloudflare, counted, not estimated: every billable operation the mail
 * causes end to end under `wrangler dev`, read from the meter (worker/meter/meter.ts) through
 * GET /relay/dev/meter, priced with ../shared/design/cost.md.
 *
 * DESCRIPTION
 *   The cases run one after the other on one fresh private wrangler dev (scripts/lib/dev-server.ts,
 *   frozen bundle, operator key; one server, to keep the run short) whose default transport relays
 *   to a real SMTP sink (scripts/lib/smtp-catcher.ts, SMARTHOST "[127.0.0.1]:port", RELAY_TLS off),
 *   with a real webhook receiver on loopback (test/integration/webhooks/receiver.ts) subscribed to
 *   every event. Ten warm-up messages go first. Before each case, with the meter standing still
 *   after the previous phase, the meter is reset. Then:
 *     1rcpt     --messages (1,000) one-recipient messages, POST /emails, 10 in flight;
 *     10rcpt    200 ten-recipient messages, one domain;
 *     batch100  ten POST /emails/batch of 100 one-recipient messages;
 *     template  200 one-recipient POST /emails naming a stored template (rendered at accept);
 *     received  200 messages to a verified receiving domain through wrangler's
 *               /cdn-cgi/handler/email (the email() handler): kept and pushed as email.received.
 *     mix       --mix-messages (500) of real traffic to 1,000 domains by MX, on a server of its own
 *               (bench/world/cost-mix.ts: one at a time at 20 a second, some 10-recipient messages
 *               and batches; greylisting, session-limited, slow and flaky domains).
 *   and, when named in --cases (not by default):
 *     compliance  200 one-recipient bulk messages (unsubscribe) to gmail.com: every rule of the
 *               compliance check at send time evaluated (it runs on every send; this case has
 *               the most to check), compared with 1rcpt as a ratio when both run.
 *     mx, mx-sts  200 one-recipient messages each to MX hosts (bench/lib/mx-world.ts; one more
 *               wrangler dev, EGRESS direct): a domain without MTA-STS, and one whose enforce
 *               policy the warm-up discovered and cached (each delivery then needs verified TLS and
 *               is counted for TLS-RPT), with the DoH queries and policy fetches the case made and
 *               the ratio mx-sts / mx. One destination each.
 *   A case ends when the sink has every recipient, the receiver every event (email.sent and
 *   email.delivered per recipient; email.received per received message) and the meter has not
 *   moved for 3 s; then the meter is read. A case's `prepare` (a template, a receiving domain
 *   verified through a DoH fixture) runs before the meter is reset.
 *   The meter's own requests (/relay/dev/*) are not counted.
 *   Retention: a last server with MESSAGE_RETENTION_DAYS=0.0001 (8.6 s) and OUTBOX_GRACE_SECONDS=2
 *   gets 200 one-recipient messages; after delivery and retention it wakes the sweepers
 *   (/cdn-cgi/handler/scheduled, --test-scheduled), waits, and counts the rows still held in message-scoped
 *   tables (GET /relay/dev/rows): rows_left_after_retention; then it receives 20 messages, lets
 *   retention pass again and counts again (received mail's rows are in the count, not in the
 *   lifetime figure). The meter runs from the first accept to
 *   the end, so lifetime_rows_written_per_message is a message's whole life, the deletes of
 *   retention included (a delete is billed as a row written); a case's window ends at delivery and
 *   does not include them.
 *   Prices: list prices, free allowances ignored; Workers CPU and DO duration are not counted.
 *   --var overrides a wrangler.toml [vars] value for the whole run (e.g.
 *   CLASSIFY_AT_ACCEPT_MAX_RCPTS=10), printed with the figures.
 *   --budget: exits 1 when any per-message figure (or usd_per_million) of the 1rcpt case named there exceeds
 *   bench/cost-budget.json, or when retention (if run) left any row behind. CI runs it on 200
 *   messages.
 *
 * OUTPUT
 *   Tables per case; with --json the last line is one JSON object:
 *   {"cases":{"1rcpt":{"per_message":{…},"usd_per_million":N,…},…},"rows_left_after_retention":N}
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { startReceiver, type Receiver } from "../test/integration/webhooks/receiver";
import { devFetch, startDevServer, type DevServer } from "../scripts/lib/dev-server";
import { startCatcher, type Catcher } from "../scripts/lib/smtp-catcher";
import { startDohZone, type DohZone } from "../scripts/lib/doh-zone";
import { startMxWorld } from "./lib/mx-world";
import { runMixCase } from "./world/cost-mix";

const { values } = parseArgs({
  options: {
    messages: { type: "string", default: "1000" },
    cases: { type: "string", default: "1rcpt,10rcpt,batch100,template,received,mix" },
    "mix-messages": { type: "string", default: "500" },
    json: { type: "boolean", default: false },
    budget: { type: "boolean", default: false },
    "no-retention": { type: "boolean", default: false },
    "retention-messages": { type: "string", default: "200" },
    var: { type: "string", multiple: true, default: [] },
  },
});

/** --var NAME=value overrides of wrangler.toml [vars]. */
const VARS: Record<string, string> = Object.fromEntries(values.var.map((kv) => {
  const eq = kv.indexOf("=");
  if (eq < 1) throw new Error(`--var needs NAME=value, got ${kv}`);
  return [kv.slice(0, eq), kv.slice(eq + 1)];
}));

const CONCURRENCY = 10;
const TIMEOUT_MS = 240_000;
const QUIET_MS = 3000;
const EVENTS = ["email.sent", "email.delivered", "email.delivery_delayed", "email.bounced", "email.failed", "email.suppressed", "email.canceled", "email.complained", "email.received"];
/** $ per million operations (cost.md). */
const PRICES = { worker_invocations: 0.3, do_requests: 0.15, rows_written: 1.0, rows_read: 0.001, queue_ops: 0.4, r2_class_a: 4.5, r2_class_b: 0.36 } as const;

type Counts = Record<string, number>;
interface Snapshot {
  worker_invocations: number; worker_invocations_by_kind: Counts;
  do_requests: number; do_requests_by_class: Counts; do_requests_by_method?: Counts; do_alarms_by_class: Counts;
  do_rows_read: number; do_rows_read_by_class: Counts; do_rows_written: number; do_rows_written_by_class: Counts;
  d1_rows_read: number; d1_rows_written: number; d1_statements: number;
  queue_ops: number; queue_ops_by_queue: Counts; queue_writes: Counts; queue_reads: Counts; queue_deletes: Counts;
  r2_class_a: number; r2_class_b: number; r2_deletes: number; rows_written_by_statement?: Counts; rows_read_by_statement?: Counts; runs_by_statement?: Counts;
}

interface Setup { server: DevServer; catcher: Catcher; receiver: Receiver; doh: DohZone }
const running: Setup[] = [];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function api<T>(s: DevServer, method: string, path: string, body?: unknown): Promise<T> {
  const res = await devFetch(`${s.url}${path}`, { method, headers: { authorization: `Bearer ${s.key}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

async function setup(vars: Record<string, string> = {}, sink?: Catcher): Promise<Setup> {
  const catcher = sink ?? await startCatcher({});
  const receiver = await startReceiver();
  const doh = await startDohZone();
  const server = await startDevServer({
    tenant: "bench", role: "operator", frozen: true, testScheduled: true, meter: true,
    vars: { SMARTHOST: `[127.0.0.1]:${catcher.smtpPort}`, RELAY_TLS: "off", COHORT_ENV: "development", DOH_RESOLVER_URL: doh.url, ...VARS, ...vars },
  }).catch(async (e: unknown) => { await catcher.close(); await receiver.close(); await doh.close(); throw e; });
  const s = { server, catcher, receiver, doh };
  running.push(s);
  await api(server, "POST", "/webhooks", { endpoint: `http://127.0.0.1:${receiver.port}/hook`, events: EVENTS });
  return s;
}

async function teardown(s: Setup): Promise<void> {
  running.splice(running.indexOf(s), 1);
  await s.server.stop();
  await s.catcher.close();
  await s.receiver.close();
  await s.doh.close();
}

const rcptsCaught = (c: Catcher) => c.messages.reduce((n, m) => n + m.rcptTo.length, 0);
function distinctEvents(r: Receiver): Counts {
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
const total = (c: Counts) => Object.values(c).reduce((a, b) => a + b, 0);

/** Sends `n` requests produced by `make`, CONCURRENCY at a time (a `raw` one: its text as is, to wrangler's email handler). */
async function sendAll(s: DevServer, n: number, make: (i: number) => { path: string; body: unknown; raw?: boolean }): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const r = make(next++);
      if (!r.raw) await api(s, "POST", r.path, r.body);
      else if (!(await devFetch(`${s.url}${r.path}`, { method: "POST", body: r.body as string })).ok) throw new Error(`POST ${r.path} failed`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, n) }, worker));
}

/** Waits for every recipient at the sink, two events per recipient (or `events`), and a meter standing still. */
async function waitDone(s: Setup, rcpts: number, what: string, events = 2 * rcpts): Promise<{ events: Counts; snapshot: Snapshot }> {
  const t0 = Date.now();
  while (rcptsCaught(s.catcher) < rcpts || total(distinctEvents(s.receiver)) < events) {
    if (Date.now() - t0 > TIMEOUT_MS) throw new Error(`${what}: ${rcptsCaught(s.catcher)}/${rcpts} recipients and ${total(distinctEvents(s.receiver))}/${events} events after ${TIMEOUT_MS / 1000} s`);
    await sleep(250);
  }
  let last = JSON.stringify(await api<Snapshot>(s.server, "GET", "/relay/dev/meter"));
  let lastEvents = s.receiver.log.length;
  let stillSince = Date.now();
  for (;;) {
    await sleep(500);
    const now = JSON.stringify(await api<Snapshot>(s.server, "GET", "/relay/dev/meter"));
    if (now !== last || s.receiver.log.length !== lastEvents) {
      last = now;
      lastEvents = s.receiver.log.length;
      stillSince = Date.now();
    } else if (Date.now() - stillSince >= QUIET_MS) {
      return { events: distinctEvents(s.receiver), snapshot: JSON.parse(now) as Snapshot };
    }
    if (Date.now() - t0 > TIMEOUT_MS) throw new Error(`${what}: the meter did not stand still`);
  }
}

interface CaseDef {
  name: string; messages: number; rcptsPer: number; requests: number; make: (i: number) => { path: string; body: unknown; raw?: boolean };
  /** Runs before the meter is reset (what the case needs in place). */
  prepare?: (s: Setup) => Promise<void>;
  /** Events the receiver must get (default two per recipient). */
  events?: number;
}

const email = (i: number, to: string[]) => ({ from: "Bench <bench@acme.example>", to, subject: `Cost ${i}`, text: `Cost benchmark message ${i}.` });

/** A verified domain of the bench tenant that receives mail (records published in the DoH fixture). */
async function receivingDomain(s: Setup, name: string): Promise<void> {
  const d = await api<{ id: string; records: { name: string; type: string; value: string }[] }>(s.server, "POST", "/domains", { name, capabilities: { receiving: "enabled" } });
  s.doh.publish(name, d.records);
  await api(s.server, "POST", `/domains/${d.id}/verify`);
}

/** A received message with a small attachment, as wrangler's email handler takes it. */
const inbound = (i: number, domain: string) => ({
  path: `/cdn-cgi/handler/email?from=sender${i}%40outside.example&to=support%40${domain}`, raw: true,
  body: [`From: Sender ${i} <sender${i}@outside.example>`, `To: support@${domain}`, `Subject: Received ${i}`, `Message-ID: <in-${i}@outside.example>`, "MIME-Version: 1.0",
    "Content-Type: multipart/mixed; boundary=\"b\"", "", "--b", "Content-Type: text/plain", "", `Received benchmark message ${i}.`, "--b",
    "Content-Type: text/plain; name=\"note.txt\"", "Content-Disposition: attachment; filename=\"note.txt\"", "", `note ${i}`, "--b--", ""].join("\r\n"),
});

/** The template the template case sends (published once, before the meter is reset). */
const TEMPLATE = { name: "bench", alias: "bench", from: "Bench <bench@acme.example>", subject: "Cost {{{N}}}", html: "<p>Cost benchmark message {{{N}}} for {{{WHO}}}.</p>",
  variables: [{ key: "N", type: "number" }, { key: "WHO", type: "string", fallback_value: "you" }] };

function cases(messages: number): CaseDef[] {
  return [
    { name: "1rcpt", messages, rcptsPer: 1, requests: messages, make: (i) => ({ path: "/emails", body: email(i, [`r${i}@one.example`]) }) },
    { name: "10rcpt", messages: 200, rcptsPer: 10, requests: 200, make: (i) => ({ path: "/emails", body: email(i, Array.from({ length: 10 }, (_, r) => `m${i}r${r}@ten.example`)) }) },
    { name: "batch100", messages: 1000, rcptsPer: 1, requests: 10, make: (b) => ({ path: "/emails/batch", body: Array.from({ length: 100 }, (_, k) => email(b * 100 + k, [`b${b}k${k}@batch.example`])) }) },
    {
      name: "template", messages: 200, rcptsPer: 1, requests: 200, make: (i) => ({ path: "/emails", body: { to: [`t${i}@template.example`], template: { id: "bench", variables: { N: i } } } }),
      prepare: async (s) => { await api(s.server, "POST", `/templates/${(await api<{ id: string }>(s.server, "POST", "/templates", TEMPLATE)).id}/publish`); },
    },
    {
      name: "received", messages: 200, rcptsPer: 0, requests: 200, events: 200, make: (i) => inbound(i, "in.bench.example"),
      prepare: (s) => receivingDomain(s, "in.bench.example"),
    },
    // Bulk mail whose every compliance rule is evaluated (one-click unsubscribe, a Gmail recipient's limits).
    { name: "compliance", messages: 200, rcptsPer: 1, requests: 200, make: (i) => ({ path: "/emails", body: { ...email(i, [`c${i}@gmail.com`]), unsubscribe: true } }) },
  ];
}

/** The mx cases (bench/lib/mx-world.ts): 200 messages each to MX hosts, without and with a cached MTA-STS policy. */
function mxCases(): CaseDef[] {
  return [
    { name: "mx", messages: 200, rcptsPer: 1, requests: 200, make: (i) => ({ path: "/emails", body: email(i, [`p${i}@plain.bench`]) }) },
    { name: "mx-sts", messages: 200, rcptsPer: 1, requests: 200, make: (i) => ({ path: "/emails", body: email(i, [`s${i}@sts-enforce.test`]) }) },
  ];
}

interface CaseResult {
  messages: number; recipients: number; seconds: number; events: Counts;
  totals: Record<string, number>;
  per_message: Record<string, number>;
  per_recipient?: Record<string, number>;
  usd_per_million: number;
  usd_per_million_rcpts?: number;
  breakdown: {
    worker_invocations_by_kind: Counts; do_requests_by_class: Counts; do_requests_by_method: Counts; do_alarms_by_class: Counts;
    do_rows_written_by_class: Counts; do_rows_read_by_class: Counts; queue_ops_by_queue: Counts;
    queue_writes: Counts; queue_reads: Counts; queue_deletes: Counts; d1_statements: number; r2_deletes: number;
    rows_written_by_statement: Counts;
    rows_read_by_statement: Counts;
    /** DO SQL statements run per message (not billed: each costs the object's thread time). */
    do_sql_statements: number;
    runs_by_statement: Counts;
  };
}

const round = (n: number, d = 3) => Math.round(n * 10 ** d) / 10 ** d;
const perN = (c: Counts, n: number) => Object.fromEntries(Object.entries(c).sort().map(([k, v]) => [k, round(v / n)]));

function price(per: Record<string, number>): number {
  let usd = 0;
  for (const [k, p] of Object.entries(PRICES)) usd += (per[k] ?? 0) * p;
  return round(usd, 2);
}

function summarise(def: CaseDef, snap: Snapshot, events: Counts, seconds: number): CaseResult {
  const totals = {
    worker_invocations: snap.worker_invocations, do_requests: snap.do_requests,
    do_rows_written: snap.do_rows_written, do_rows_read: snap.do_rows_read,
    d1_rows_written: snap.d1_rows_written, d1_rows_read: snap.d1_rows_read,
    rows_written: snap.do_rows_written + snap.d1_rows_written, rows_read: snap.do_rows_read + snap.d1_rows_read,
    queue_ops: snap.queue_ops, r2_class_a: snap.r2_class_a, r2_class_b: snap.r2_class_b,
  };
  const recipients = def.messages * def.rcptsPer;
  const per_message = Object.fromEntries(Object.entries(totals).map(([k, v]) => [k, round(v / def.messages)]));
  const exact = Object.fromEntries(Object.entries(totals).map(([k, v]) => [k, v / def.messages]));
  const res: CaseResult = {
    messages: def.messages, recipients, seconds: round(seconds, 1), events, totals, per_message, usd_per_million: price(exact),
    breakdown: {
      worker_invocations_by_kind: perN(snap.worker_invocations_by_kind, def.messages), do_requests_by_class: perN(snap.do_requests_by_class, def.messages), do_requests_by_method: perN(snap.do_requests_by_method ?? {}, def.messages),
      do_alarms_by_class: perN(snap.do_alarms_by_class, def.messages), do_rows_written_by_class: perN(snap.do_rows_written_by_class, def.messages),
      do_rows_read_by_class: perN(snap.do_rows_read_by_class, def.messages), queue_ops_by_queue: perN(snap.queue_ops_by_queue, def.messages),
      queue_writes: perN(snap.queue_writes, def.messages), queue_reads: perN(snap.queue_reads, def.messages), queue_deletes: perN(snap.queue_deletes, def.messages),
      d1_statements: round(snap.d1_statements / def.messages), r2_deletes: round(snap.r2_deletes / def.messages),
      rows_written_by_statement: Object.fromEntries(Object.entries(snap.rows_written_by_statement ?? {})
        .sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, round(v / def.messages)])),
      rows_read_by_statement: Object.fromEntries(Object.entries(snap.rows_read_by_statement ?? {})
        .sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, round(v / def.messages)])),
      do_sql_statements: round(Object.values(snap.runs_by_statement ?? {}).reduce((a, v) => a + v, 0) / def.messages),
      runs_by_statement: Object.fromEntries(Object.entries(snap.runs_by_statement ?? {})
        .sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, round(v / def.messages)])),
    },
  };
  if (def.rcptsPer > 1) {
    res.per_recipient = Object.fromEntries(Object.entries(totals).map(([k, v]) => [k, round(v / recipients)]));
    // One transport's ceiling on Cloudflare is about 1,000 requests/s per object: recipients/s ≈ 1,000 / this.
    res.per_recipient.transport_do_requests = round((snap.do_requests_by_class.TransportQueue ?? 0) / recipients);
    res.usd_per_million_rcpts = price(Object.fromEntries(Object.entries(totals).map(([k, v]) => [k, v / recipients])));
  }
  return res;
}

/** Ten warm-up messages: start-up costs (migrations, first alarms, key look-ups; the mx cases' MTA-STS discovery) are not the mail's. */
async function warmUp(s: Setup, domain = "warm.example"): Promise<void> {
  await sendAll(s.server, 10, (i) => ({ path: "/emails", body: email(i, [`warm${i}@${domain}`]) }));
  await waitDone(s, 10, "warm-up");
}

async function runCase(s: Setup, def: CaseDef): Promise<CaseResult> {
  await def.prepare?.(s);
  if (def.prepare) await waitDone(s, 0, `${def.name} preparation`, 0);
  // The previous phase ended with the meter standing still, so nothing of it is counted here.
  await api(s.server, "POST", "/relay/dev/meter/reset");
  s.catcher.messages.length = 0;
  s.receiver.log.length = 0;
  const t0 = Date.now();
  await sendAll(s.server, def.requests, def.make);
  const { events, snapshot } = await waitDone(s, def.messages * def.rcptsPer, def.name, def.events);
  return summarise(def, snapshot, events, (Date.now() - t0) / 1000);
}

/** Tables that hold per-message data (the others are configuration, keys, snapshots, feedback state). */
const MESSAGE_TABLES = {
  d1: ["messages", "recipients", "event_log", "events", "event_feed", "message_tags", "webhook_delay_notices", "received_emails"],
  outbox: ["message", "rcpt", "event", "idem", "dsn_pending", "control", "readmit", "complaint", "unsubscribe"],
  transport: ["rcpt", "finished", "admission", "admitted", "lease", "msg_meta", "final_rcpt", "retry_due", "incoming", "journal", "journal_ring"],
};

interface Rows { d1: Counts; outbox: Record<string, Counts>; transport: Record<string, Counts>; destination: Record<string, Counts> }

async function runRetention(n: number): Promise<{ total: number; messages: number; tables: Counts; rowsWritten: number; byStatement: Counts }> {
  const s = await setup({ MESSAGE_RETENTION_DAYS: "0.0001", OUTBOX_GRACE_SECONDS: "2" });
  try {
    // Counted from the first accept to the last purge: a message's whole life, its deletes included
    // (and this server's start-up: its tables are created on first use).
    await api(s.server, "POST", "/relay/dev/meter/reset");
    await sendAll(s.server, n, (i) => ({ path: "/emails", body: email(i, [`keep${i}@retention.example`]) }));
    await waitDone(s, n, "retention");
    await sleep(10_000); // MESSAGE_RETENTION_DAYS 0.0001 = 8.64 s after the last message finished
    // wrangler 4 serves the cron trigger at /cdn-cgi/handler/scheduled (older: /__scheduled).
    let res = await devFetch(`${s.server.url}/cdn-cgi/handler/scheduled`);
    if (!res.ok) res = await devFetch(`${s.server.url}/__scheduled`);
    if (!res.ok) throw new Error(`scheduled trigger: ${res.status} ${await res.text()}`);
    await sleep(6_000); // the sweepers' alarms, one grace period (2 s) after the wake-up
    const spent = await api<Snapshot>(s.server, "GET", "/relay/dev/meter");
    // Received mail, after the lifetime figure was read: 20 messages, retention again.
    await receivingDomain(s, "in.retention.example");
    await sendAll(s.server, 20, (i) => inbound(i, "in.retention.example"));
    await waitDone(s, n, "received for retention", 2 * n + 20);
    await sleep(10_000);
    if (!(await devFetch(`${s.server.url}/cdn-cgi/handler/scheduled`)).ok) await devFetch(`${s.server.url}/__scheduled`);
    await sleep(3_000);
    const rows = await api<Rows>(s.server, "GET", "/relay/dev/rows");
    const tables: Counts = {};
    for (const t of MESSAGE_TABLES.d1) tables[`d1.${t}`] = rows.d1[t] ?? 0;
    for (const [kind, objs] of [["outbox", rows.outbox], ["transport", rows.transport]] as const) {
      for (const counts of Object.values(objs)) for (const t of MESSAGE_TABLES[kind]) tables[`${kind}.${t}`] = (tables[`${kind}.${t}`] ?? 0) + (counts[t] ?? 0);
    }
    const byStatement = Object.fromEntries(Object.entries(spent.rows_written_by_statement ?? {}).filter(([k]) => /: DELETE /.test(k))
      .sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, round(v / n)]));
    return { total: total(tables), messages: n, tables, rowsWritten: spent.do_rows_written + spent.d1_rows_written, byStatement };
  } finally {
    await teardown(s);
  }
}

function printCase(name: string, r: CaseResult): void {
  console.log(`\n== ${name}: ${r.messages} messages, ${r.recipients} recipients, ${r.seconds} s; events ${JSON.stringify(r.events)}${Object.keys(VARS).length > 0 ? `; --var ${JSON.stringify(VARS)}` : ""}`);
  const keys = Object.keys(r.totals);
  console.log(`${"".padEnd(20)}${"total".padStart(12)}${"per message".padStart(14)}${r.per_recipient ? "per rcpt".padStart(12) : ""}`);
  for (const k of keys) console.log(`${k.padEnd(20)}${String(r.totals[k]).padStart(12)}${String(r.per_message[k]).padStart(14)}${r.per_recipient ? String(r.per_recipient[k]).padStart(12) : ""}`);
  const b = r.breakdown;
  if (r.per_recipient?.transport_do_requests !== undefined) console.log(`  Transport DO requests per recipient: ${r.per_recipient.transport_do_requests}`);
  console.log(`  per message: DO requests by class ${JSON.stringify(b.do_requests_by_class)} (alarms ${JSON.stringify(b.do_alarms_by_class)})`);
  console.log(`               by method ${JSON.stringify(b.do_requests_by_method)}`);
  console.log(`               DO rows written by class ${JSON.stringify(b.do_rows_written_by_class)}; read ${JSON.stringify(b.do_rows_read_by_class)}`);
  console.log(`               queue ops by queue ${JSON.stringify(b.queue_ops_by_queue)} (writes ${JSON.stringify(b.queue_writes)}, reads ${JSON.stringify(b.queue_reads)}, deletes ${JSON.stringify(b.queue_deletes)})`);
  console.log(`               Worker invocations ${JSON.stringify(b.worker_invocations_by_kind)}; D1 statements ${b.d1_statements}; R2 deletes ${b.r2_deletes}`);
  console.log(`  rows written per message, by statement:`);
  for (const [k, v] of Object.entries(b.rows_written_by_statement)) if (v >= 0.01) console.log(`    ${String(v).padStart(8)}  ${k}`);
  console.log(`  rows read per message, by statement (the largest):`);
  for (const [k, v] of Object.entries(b.rows_read_by_statement).slice(0, 12)) if (v >= 0.5) console.log(`    ${String(v).padStart(8)}  ${k}`);
  console.log(`  DO SQL statements run per message: ${b.do_sql_statements} (not billed; each costs the object's thread), the most run:`);
  for (const [k, v] of Object.entries(b.runs_by_statement).slice(0, 8)) if (v >= 0.5) console.log(`    ${String(v).padStart(8)}  ${k}`);
  console.log(`  $ per million messages: ${r.usd_per_million}${r.usd_per_million_rcpts !== undefined ? `; per million recipients: ${r.usd_per_million_rcpts}` : ""} (list prices; CPU and DO duration not counted)`);
}

function checkBudget(r: CaseResult | undefined): string[] {
  if (!r) return ["--budget needs the 1rcpt case"];
  const budget = (JSON.parse(readFileSync(new URL("./cost-budget.json", import.meta.url), "utf8")) as Record<string, Record<string, number>>)["1rcpt"]!;
  const over: string[] = [];
  for (const k of Object.keys(budget)) {
    // usd_per_million is the case's price; every other key a per-message figure.
    const v = k === "usd_per_million" ? r.usd_per_million : r.per_message[k]!;
    if (v > budget[k]!) over.push(`1rcpt ${k}${k === "usd_per_million" ? "" : " per message"} ${v} > budget ${budget[k]}`);
  }
  return over;
}

async function main(): Promise<number> {
  const want = new Set(values.cases.split(",").map((c) => c.trim()).filter(Boolean));
  const out: { cases: Record<string, CaseResult>; rows_left_after_retention?: number; rows_left_by_table?: Counts; retention_messages?: number;
    lifetime_rows_written_per_message?: number } = { cases: {} };
  const t0 = Date.now();
  const defs = cases(Math.max(1, Number(values.messages))).filter((d) => want.has(d.name));
  if (defs.length > 0) {
    const s = await setup();
    try {
      await warmUp(s);
      for (const def of defs) {
        const r = await runCase(s, def);
        out.cases[def.name] = r;
        printCase(def.name, r);
      }
    } finally {
      await teardown(s);
    }
  }
  const mxDefs = mxCases().filter((d) => want.has(d.name));
  if (mxDefs.length > 0) {
    const world = await startMxWorld();
    const s = await setup(world.vars, world.catcher);
    try {
      for (const d of ["plain.bench", "sts-enforce.test"]) await warmUp(s, d);
      for (const def of mxDefs) {
        const before = await world.lookups();
        const r = await runCase(s, def);
        const after = await world.lookups();
        // What the case itself asked of DNS and of the policy server (the warm-up discovered the policy).
        const sts = Object.keys(after.queries).filter((k) => /mta-sts|smtp\._tls/.test(k)).reduce((n, k) => n + after.queries[k]! - (before.queries[k] ?? 0), 0);
        Object.assign(r, { sts_doh_queries: sts, policy_fetches: after.fetches - before.fetches });
        out.cases[def.name] = r;
        printCase(def.name, r);
        console.log(`  MTA-STS and TLS-RPT DoH queries during the case: ${sts}; policy fetches: ${after.fetches - before.fetches}`);
      }
    } finally {
      await teardown(s);
      await world.close();
    }
    const [base, sts] = [out.cases.mx, out.cases["mx-sts"]];
    if (base && sts) console.log(`\n== mx-sts / mx (same run): ${Object.keys(base.per_message).map((k) => `${k} ${base.per_message[k] ? round(sts.per_message[k]! / base.per_message[k]!, 2) : "-"}`).join(", ")}`);
  }
  const baseline = out.cases["1rcpt"];
  const comp = out.cases.compliance;
  if (baseline && comp) console.log(`\n== compliance / 1rcpt (same run): ${Object.keys(baseline.per_message).map((k) => `${k} ${baseline.per_message[k] ? round(comp.per_message[k]! / baseline.per_message[k]!, 2) : "-"}`).join(", ")}`);
  if (want.has("mix")) {
    const mix = await runMixCase({ setup, teardown, api, summarise: (messages, rcpts, requests, snap, seconds) =>
      summarise({ name: "mix", messages, rcptsPer: rcpts / messages, requests, make: () => ({ path: "", body: null }) }, snap as Snapshot, {}, seconds) }, Math.max(1, Number(values["mix-messages"])));
    out.cases.mix = mix;
    printCase("mix", mix);
  }
  if (!values["no-retention"]) {
    const ret = await runRetention(Math.max(1, Number(values["retention-messages"])));
    out.rows_left_after_retention = ret.total;
    out.rows_left_by_table = ret.tables;
    out.retention_messages = ret.messages;
    out.lifetime_rows_written_per_message = round(ret.rowsWritten / ret.messages);
    console.log(`\n== retention: ${ret.messages} one-recipient messages, MESSAGE_RETENTION_DAYS=0.0001, sweepers woken after retention`);
    for (const [t, n] of Object.entries(ret.tables)) console.log(`${t.padEnd(24)}${String(n).padStart(8)}`);
    console.log(`${"rows left".padEnd(24)}${String(ret.total).padStart(8)}  (${round(ret.total / ret.messages, 1)} per message)`);
    // Deleting is billed as writing: a message's whole life, from accept to purge, costs more rows
    // than a case's window shows, which ends when the mail is delivered.
    console.log(`rows written per message over its whole life, deletes included: ${out.lifetime_rows_written_per_message}; of them deletes:`);
    for (const [k, v] of Object.entries(ret.byStatement)) if (v >= 0.01) console.log(`    ${String(v).padStart(8)}  ${k}`);
  }
  console.log(`\n(${round((Date.now() - t0) / 1000, 0)} s in all)`);
  const over = values.budget ? checkBudget(out.cases["1rcpt"]) : [];
  // Retention, when measured, must leave nothing behind.
  if (values.budget && (out.rows_left_after_retention ?? 0) > 0) over.push(`rows left after retention ${out.rows_left_after_retention} > 0`);
  for (const o of over) console.log(`OVER BUDGET: ${o}`);
  if (values.json) console.log(JSON.stringify(out));
  return over.length > 0 ? 1 : 0;
}

process.once("SIGINT", () => void Promise.all(running.map(teardown)).then(() => process.exit(130)));
try {
  process.exitCode = await main();
} catch (e) {
  await Promise.all([...running].map(teardown));
  console.error(e instanceof Error ? e.stack ?? e.message : String(e));
  process.exitCode = 1;
}
