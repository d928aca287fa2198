/**
 * bench:cost's cases and how one is run over its mail's whole life.
 *
 * DESCRIPTION
 *   casesOf(opts)          the cases: 1rcpt, 10rcpt, batch100, trickle, deferred, spread (below).
 *   runCase(s, def, opts)  one case on a server whose retention is `retentionMs`:
 *     1. the meter is reset with nothing running, and the bytes each store holds are read;
 *     2. the mail is sent (def.send) and waited for: every recipient at the sink, email.sent and
 *        email.delivered at the receiver, the meter still with no object active: `toDelivery`,
 *        with the bytes held then (`bytes`, per message) and the workerd CPU used since 1;
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
 */
import { api, cpuMs, runCron, sleep, waitDelivered, waitPurged, waitStill, type Setup, type Snapshot } from "./cost-server";

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
  send(s: Setup): Promise<void>;
}

const CONCURRENCY = 10;
/** Trickle's spacing: longer than a message's whole life on its server (TRICKLE_RETENTION_MS, the sweeper's 15 s). */
export const TRICKLE_RETENTION_MS = 20_000;
export const SPACING_MS = 40_000;

export const email = (i: number, to: string[]) => ({ from: "Bench <bench@acme.example>", to, subject: `Cost ${i}`, text: `Cost benchmark message ${i}.` });

/** Sends `n` requests produced by `make`, CONCURRENCY at a time. */
export async function sendAll(s: Setup, n: number, make: (i: number) => { path: string; body: unknown; headers?: Record<string, string> }): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const r = make(next++);
      await api(s.server, "POST", r.path, r.body, r.headers);
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, n) }, worker));
}

export function casesOf(o: { messages: number; trickle: number }): CaseDef[] {
  const n = o.messages;
  return [
    { name: "1rcpt", messages: n, rcptsPer: 1, about: "one-recipient messages, 10 in flight, one destination",
      send: (s) => sendAll(s, n, (i) => ({ path: "/emails", body: email(i, [`r${i}@one.example`]) })) },
    { name: "10rcpt", messages: 200, rcptsPer: 10, about: "ten-recipient messages, 10 in flight, one destination",
      send: (s) => sendAll(s, 200, (i) => ({ path: "/emails", body: email(i, Array.from({ length: 10 }, (_, r) => `m${i}r${r}@ten.example`)) })) },
    { name: "batch100", messages: 1000, rcptsPer: 1, about: "ten batches of 100 one-recipient messages, one destination",
      send: (s) => sendAll(s, 10, (b) => ({
        path: "/emails/batch", body: Array.from({ length: 100 }, (_, k) => email(b * 100 + k, [`b${b}k${k}@batch.example`])),
      })) },
    { name: "trickle", messages: o.trickle, rcptsPer: 1, bytesOf: "1rcpt", retentionMs: TRICKLE_RETENTION_MS,
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
      } },
    { name: "deferred", messages: 100, rcptsPer: 1, about: "one-recipient messages greylisted at the first attempt, delivered at the retry",
      send: (s) => sendAll(s, 100, (i) => ({ path: "/emails", body: email(i, [`tempfail-g${i}@grey.example`]) })) },
    { name: "spread", messages: n, rcptsPer: 1, about: "one-recipient messages from 16 played isolates, so on every Outbox shard",
      send: (s) => sendAll(s, n, (i) => ({ path: "/emails", body: email(i, [`s${i}@spread.example`]), headers: { "x-relay-dev-isolate": String(i % 16) } })) },
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
  cpuMs: number;
}

const levelsOf = (snap: Snapshot) => ({ d1: snap.d1_bytes ?? 0, do: snap.do_bytes_by_class ?? {} });

/** Runs a case over its whole life (see the header). */
export async function runCase(s: Setup, def: CaseDef, retentionMs: number): Promise<Measured> {
  await api(s.server, "POST", "/relay/dev/meter/reset");
  const before = levelsOf(await api<Snapshot>(s.server, "GET", "/relay/dev/meter"));
  s.catcher.messages.length = 0;
  s.receiver.log.length = 0;
  const t0 = Date.now();
  const cpu0 = cpuMs(s);
  await def.send(s);
  await waitDelivered(s, def.messages * def.rcptsPer, def.name);
  const lastDelivery = Date.now();
  const cpu = cpuMs(s) - cpu0;
  // Taken before the first message caught can have been purged (its retention runs from its finish).
  const firstCaught = Math.min(...s.catcher.messages.map((m) => m.receivedAt));
  const toDelivery = await waitStill(s, def.name, firstCaught + retentionMs - 3000);
  const seconds = (Date.now() - t0) / 1000;
  const after = levelsOf(toDelivery);
  const per = (a: number, b: number) => (a - b) / def.messages;
  const classes = new Set([...Object.keys(after.do), ...Object.keys(before.do)]);
  const bytes = { d1: per(after.d1, before.d1), do: Object.fromEntries([...classes].map((c) => [c, per(after.do[c] ?? 0, before.do[c] ?? 0)])) };
  // The whole life: retention passes, the cron purges D1, the sweepers purge the objects.
  await sleep(Math.max(0, lastDelivery + retentionMs + 2000 - Date.now()));
  await runCron(s);
  await waitPurged(s, def.name);
  const whole = await waitStill(s, `${def.name} retention`);
  await api(s.server, "POST", "/relay/dev/meter/reset");
  await runCron(s);
  const cron = await waitStill(s, `${def.name} cron`);
  return { seconds, toDelivery, whole, cron, bytes, cpuMs: cpu };
}

