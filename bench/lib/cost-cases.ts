/**
 * bench:cost's cases and how one is run over its mail's whole life.
 *
 * DESCRIPTION
 *   casesOf(opts)          the cases: 1rcpt, 10rcpt, batch100, trickle, deferred, spread (below).
 *   runCase(s, def, opts)  one case on a server whose retention is `retentionMs`:
 *     0. what the case needs in place (def.prepare: a template, a receiving domain) is made;
 *     1. the meter is reset with nothing running, and the bytes each store holds are read;
 *     2. the mail is sent (def.send) and waited for (def.done; by default every recipient at the
 *        sink, email.sent and email.delivered at the receiver), the meter still with no object
 *        active: `toDelivery`,
 *        with the bytes held then (`bytes`, per message) and the workerd CPU used since 1, over
 *        the idle rate of the server's workerd processes measured just before (IDLE_MS with
 *        nothing sent: the runtime's own background, which no invocation is billed for);
 *     3. retention passes (the last delivery + retentionMs + 2 s), the cron runs once (D1's
 *        retention), the sweepers' alarms purge until no message table holds a row, the meter
 *        stands still: `whole`, accept to purge;
 *     4. the meter is reset, the cron runs once more with nothing due, the meter stands still:
 *        `cron`, what a cron run costs whatever the mail (it runs every 10 minutes in production),
 *        taken off `whole`.
 *
 * CASES
 *   1rcpt     N one-recipient messages, POST /emails, 10 in flight, one destination.
 *   10rcpt    200 ten-recipient messages, 10 in flight, one destination.
 *   batch100  ten POST /emails/batch of 100 one-recipient messages.
 *   trickle   T one-recipient messages, one at a time, SPACING_MS apart, on a server of its own
 *             whose retention is TRICKLE_RETENTION_MS: longer than a message's whole life there, so
 *             every timer and alarm of one runs alone.
 *   deferred  100 one-recipient messages, 10 in flight, each greylisted (451) at its first
 *             attempt and delivered at the retry.
 *   spread    N one-recipient messages, 10 in flight, each request played as coming from one of
 *             16 isolates (X-Relay-Dev-Isolate, round robin), each of which sticks to an Outbox
 *             shard of its own as production's isolates do: the mail lands on every shard.
 *   template  200 one-recipient messages naming a stored template (rendered at accept).
 *   received  200 messages to a verified receiving domain through wrangler's /cdn-cgi/handler/email
 *             (the email() handler): kept and pushed as email.received.
 *   mix       M messages of real traffic to 1,000 domains by MX (world "mix", bench/world/cost-mix.ts:
 *             one at a time at 20 a second, some 10-recipient messages and batches; greylisting,
 *             session-limited, slow and flaky domains), on a server of its own.
 *   and, named in --cases only:
 *   compliance  200 one-recipient bulk messages (unsubscribe) to gmail.com: every rule of the
 *             compliance check at send time evaluated (it runs on every send; this case has the most).
 *   html      200 one-recipient messages of the size senders send: a 19 KB HTML receipt and its
 *             1 KB text part (cost-html.ts), 10 in flight, one destination.
 *   mx, mx-sts  200 one-recipient messages each to MX hosts (world "mx", bench/lib/mx-world.ts): a
 *             domain without MTA-STS, and one whose enforce policy the warm-up discovered and cached
 *             (each delivery then needs verified TLS and is counted for TLS-RPT).
 */
import { devFetch } from "../../scripts/lib/dev-server";
import { api, cpuMs, sleep, waitDelivered, waitEvents, waitStill, type Setup, type Snapshot } from "./cost-server";
import { runCron, waitPurged } from "./cost-retention";
import { htmlEmail } from "./cost-html";

export interface CaseDef {
  name: string;
  messages: number;
  rcptsPer: number;
  /** What the header of the case's table says about it. */
  about: string;
  /** Runs on a server of its own whose retention is this (ms). */
  retentionMs?: number;
  /** Ms from each accept's answer to the sink's receipt, where the case measures it (trickle). */
  latencies?: number[];
  /**
   * Stores hold bytes in pages of 4 KiB, so bytes per message are measured where many messages
   * are held at once; trickle's one message at a time prices the bytes `bytesOf` measured.
   */
  bytesOf?: string;
  /** Where its server delivers (default: the scripted sink as smarthost). */
  world?: "mx" | "mix";
  /** Runs before the meter is reset: what the case needs in place. */
  prepare?(s: Setup): Promise<void>;
  send(s: Setup): Promise<void>;
  /** Until the case's mail is done (default: every recipient delivered, waitDelivered). */
  done?(s: Setup): Promise<void>;
}

const CONCURRENCY = 10;
/** Trickle's spacing: longer than a message's whole life on its server (TRICKLE_RETENTION_MS, the sweeper's 15 s). */
export const TRICKLE_RETENTION_MS = 20_000;
export const SPACING_MS = 40_000;

/** The domain the cases send from (a verified sending domain: cost-worlds.ts verifySender). */
export const SENDER_DOMAIN = "acme.example";

export const email = (i: number, to: string[]) => ({
  from: `Bench <bench@${SENDER_DOMAIN}>`,
  to,
  subject: `Cost ${i}`,
  text: `Cost benchmark message ${i}.`,
});

type Request = { path: string; body: unknown; headers?: Record<string, string>; raw?: boolean };

/** Sends `n` requests produced by `make`, CONCURRENCY at a time (a `raw` one: its text as is, to wrangler's email handler). */
export async function sendAll(s: Setup, n: number, make: (i: number) => Request): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const r = make(next++);
      if (!r.raw) await api(s.server, "POST", r.path, r.body, r.headers);
      else if (!(await devFetch(`${s.server.url}${r.path}`, { method: "POST", body: r.body as string })).ok)
        throw new Error(`POST ${r.path} failed`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, n) }, worker));
}

/** A verified domain of the bench tenant that receives mail (records published in the server's DoH zone). */
export async function receivingDomain(s: Setup, name: string): Promise<void> {
  const d = await api<{ id: string; records: { name: string; type: string; value: string }[] }>(
    s.server,
    "POST",
    "/domains",
    { name, capabilities: { receiving: "enabled" } },
  );
  s.doh.publish(name, d.records);
  await api(s.server, "POST", `/domains/${d.id}/verify`);
}

/** A received message with a small attachment, as wrangler's email handler takes it. */
export const inbound = (i: number, domain: string): Request => ({
  path: `/cdn-cgi/handler/email?from=sender${i}%40outside.example&to=support%40${domain}`,
  raw: true,
  body: [
    `From: Sender ${i} <sender${i}@outside.example>`,
    `To: support@${domain}`,
    `Subject: Received ${i}`,
    `Message-ID: <in-${i}@outside.example>`,
    "MIME-Version: 1.0",
    'Content-Type: multipart/mixed; boundary="b"',
    "",
    "--b",
    "Content-Type: text/plain",
    "",
    `Received benchmark message ${i}.`,
    "--b",
    'Content-Type: text/plain; name="note.txt"',
    'Content-Disposition: attachment; filename="note.txt"',
    "",
    `note ${i}`,
    "--b--",
    "",
  ].join("\r\n"),
});

/** The template the template case sends (published by its prepare). */
const TEMPLATE = {
  name: "bench",
  alias: "bench",
  from: `Bench <bench@${SENDER_DOMAIN}>`,
  subject: "Cost {{{N}}}",
  html: "<p>Cost benchmark message {{{N}}} for {{{WHO}}}.</p>",
  variables: [
    { key: "N", type: "number" },
    { key: "WHO", type: "string", fallback_value: "you" },
  ],
};

export function casesOf(o: { messages: number; trickle: number; mixMessages: number }): CaseDef[] {
  const n = o.messages;
  return [
    {
      name: "1rcpt",
      messages: n,
      rcptsPer: 1,
      about: "one-recipient messages, 10 in flight, one destination",
      send: (s) => sendAll(s, n, (i) => ({ path: "/emails", body: email(i, [`r${i}@one.example`]) })),
    },
    {
      name: "10rcpt",
      messages: 200,
      rcptsPer: 10,
      about: "ten-recipient messages, 10 in flight, one destination",
      send: (s) =>
        sendAll(s, 200, (i) => ({
          path: "/emails",
          body: email(
            i,
            Array.from({ length: 10 }, (_, r) => `m${i}r${r}@ten.example`),
          ),
        })),
    },
    {
      name: "batch100",
      messages: 1000,
      rcptsPer: 1,
      about: "ten batches of 100 one-recipient messages, one destination",
      send: (s) =>
        sendAll(s, 10, (b) => ({
          path: "/emails/batch",
          body: Array.from({ length: 100 }, (_, k) => email(b * 100 + k, [`b${b}k${k}@batch.example`])),
        })),
    },
    {
      name: "trickle",
      messages: o.trickle,
      rcptsPer: 1,
      bytesOf: "1rcpt",
      retentionMs: TRICKLE_RETENTION_MS,
      about: `one-recipient messages one at a time, ${SPACING_MS / 1000} s apart (each one's timers and alarms run alone)`,
      latencies: [],
      async send(s) {
        for (let i = 0; i < o.trickle; i++) {
          const t = Date.now();
          await api(s.server, "POST", "/emails", email(i, [`t${i}@trickle.example`]));
          const answered = Date.now();
          await waitDelivered(s, i + 1, "trickle");
          this.latencies!.push(s.catcher.messages[i]!.receivedAt - answered);
          if (i < o.trickle - 1) await sleep(Math.max(0, t + SPACING_MS - Date.now()));
        }
      },
    },
    {
      name: "deferred",
      messages: 100,
      rcptsPer: 1,
      about: "one-recipient messages greylisted at the first attempt, delivered at the retry",
      send: (s) => sendAll(s, 100, (i) => ({ path: "/emails", body: email(i, [`tempfail-g${i}@grey.example`]) })),
    },
    {
      name: "spread",
      messages: n,
      rcptsPer: 1,
      about: "one-recipient messages from 16 played isolates, so on every Outbox shard",
      send: (s) =>
        sendAll(s, n, (i) => ({
          path: "/emails",
          body: email(i, [`s${i}@spread.example`]),
          headers: { "x-relay-dev-isolate": String(i % 16) },
        })),
    },
    {
      name: "template",
      messages: 200,
      rcptsPer: 1,
      about: "one-recipient messages naming a stored template, 10 in flight, one destination",
      prepare: async (s) => {
        await api(
          s.server,
          "POST",
          `/templates/${(await api<{ id: string }>(s.server, "POST", "/templates", TEMPLATE)).id}/publish`,
        );
      },
      send: (s) =>
        sendAll(s, 200, (i) => ({
          path: "/emails",
          body: { to: [`t${i}@template.example`], template: { id: "bench", variables: { N: i } } },
        })),
    },
    {
      name: "received",
      messages: 200,
      rcptsPer: 0,
      about: "messages received at a verified receiving domain, kept and pushed as email.received",
      prepare: (s) => receivingDomain(s, "in.bench.example"),
      send: (s) => sendAll(s, 200, (i) => inbound(i, "in.bench.example")),
      done: (s) => waitEvents(s, "email.received", 200, "received"),
    },
    {
      name: "mix",
      messages: o.mixMessages,
      rcptsPer: 1,
      world: "mix",
      about:
        "messages of real traffic one at a time to 1,000 domains by MX (greylisting, limits, slow and flaky hosts)",
      async send(s) {
        this.rcptsPer = (await s.world!.send((path, body) => api(s.server, "POST", path, body))) / this.messages;
      },
      done: (s) => s.world!.done(),
    },
    {
      name: "compliance",
      messages: 200,
      rcptsPer: 1,
      about: "one-recipient bulk messages (unsubscribe) to gmail.com, every compliance rule evaluated",
      send: (s) =>
        sendAll(s, 200, (i) => ({ path: "/emails", body: { ...email(i, [`c${i}@gmail.com`]), unsubscribe: true } })),
    },
    {
      name: "html",
      messages: 200,
      rcptsPer: 1,
      about: "one-recipient messages of a 19 KB HTML receipt and its text part, 10 in flight, one destination",
      send: (s) =>
        sendAll(s, 200, (i) => ({ path: "/emails", body: htmlEmail(i, [`h${i}@one.example`], SENDER_DOMAIN) })),
    },
    {
      name: "mx",
      messages: 200,
      rcptsPer: 1,
      world: "mx",
      about: "one-recipient messages to an MX host without MTA-STS",
      send: (s) => sendAll(s, 200, (i) => ({ path: "/emails", body: email(i, [`p${i}@plain.bench`]) })),
    },
    {
      name: "mx-sts",
      messages: 200,
      rcptsPer: 1,
      world: "mx",
      about: "one-recipient messages to an MX host of an MTA-STS enforce domain (policy cached)",
      send: (s) => sendAll(s, 200, (i) => ({ path: "/emails", body: email(i, [`s${i}@sts-enforce.test`]) })),
    },
  ];
}

/** What one case measured (see runCase). */
export interface Measured {
  seconds: number;
  toDelivery: Snapshot;
  whole: Snapshot;
  cron: Snapshot;
  /** Bytes each store held per message after delivery (D1, and by DO class). */
  bytes: { d1: number; do: Record<string, number> };
  /** CPU the mail caused: the server's workerd processes' CPU over their idle rate. */
  cpuMs: number;
  /** The same before the idle rate was taken off (an upper bound). */
  cpuRawMs: number;
}

/** How long the server's idle CPU rate is measured before a case, ms. */
const IDLE_MS = 10_000;

const levelsOf = (snap: Snapshot) => ({ d1: snap.d1_bytes ?? 0, do: snap.do_bytes_by_class ?? {} });

/** Runs a case over its whole life (see the header). */
export async function runCase(s: Setup, def: CaseDef, retentionMs: number): Promise<Measured> {
  if (def.prepare) {
    await def.prepare(s);
    await waitStill(s, `${def.name} preparation`);
  }
  await api(s.server, "POST", "/relay/dev/meter/reset");
  const before = levelsOf(await api<Snapshot>(s.server, "GET", "/relay/dev/meter"));
  s.catcher.messages.length = 0;
  s.receiver.log.length = 0;
  const idle0 = { at: Date.now(), cpu: cpuMs(s) };
  await sleep(IDLE_MS);
  const t0 = Date.now();
  const cpu0 = cpuMs(s);
  const idlePerMs = (cpu0 - idle0.cpu) / (t0 - idle0.at);
  await def.send(s);
  await (def.done ? def.done(s) : waitDelivered(s, def.messages * def.rcptsPer, def.name));
  const lastDelivery = Date.now();
  const cpuRaw = cpuMs(s) - cpu0;
  const cpu = Math.max(0, cpuRaw - idlePerMs * (lastDelivery - t0));
  // Taken before the first message caught can have been purged (its retention runs from its finish;
  // where the sink is not the catcher, from the first send at the earliest).
  const firstCaught = s.catcher.messages.length > 0 ? Math.min(...s.catcher.messages.map((m) => m.receivedAt)) : t0;
  const toDelivery = await waitStill(s, def.name, firstCaught + retentionMs - 3000);
  const seconds = (Date.now() - t0) / 1000;
  const after = levelsOf(toDelivery);
  const per = (a: number, b: number) => (a - b) / def.messages;
  const classes = new Set([...Object.keys(after.do), ...Object.keys(before.do)]);
  const bytes = {
    d1: per(after.d1, before.d1),
    do: Object.fromEntries([...classes].map((c) => [c, per(after.do[c] ?? 0, before.do[c] ?? 0)])),
  };
  // The whole life: retention passes, the cron purges D1, the sweepers purge the objects.
  await sleep(Math.max(0, lastDelivery + retentionMs + 2000 - Date.now()));
  await runCron(s);
  await waitPurged(s, def.name);
  const whole = await waitStill(s, `${def.name} retention`);
  await api(s.server, "POST", "/relay/dev/meter/reset");
  await runCron(s);
  const cron = await waitStill(s, `${def.name} cron`);
  return { seconds, toDelivery, whole, cron, bytes, cpuMs: cpu, cpuRawMs: cpuRaw };
}
