/**
 * bench:cost's `mix` case: what an email costs on real traffic, one at a time to many domains
 * (the mail world of bench/world/), counted by the meter like every other case of bench/cost.ts,
 * which passes its own server setup and pricing in.
 *
 * DESCRIPTION
 *   runMixCase(deps, messages)  a world of 1,000 domains (the default mix of awkward ones, but no
 *       dead or silent domain: their retries never end, and the meter must stand still), its DoH
 *       resolver and sink; a server of bench:cost's (deps.setup: meter on, webhooks subscribed)
 *       delivering by MX (EGRESS direct, MX_PORT the sink's, DOH_RESOLVER_URL the world's,
 *       back-off 5 s / 20 s as in bench:mix); 10 warm-up messages to the big domains; then, with
 *       the meter reset, `messages` messages of the arrival stream (single POST /emails at MIX_RATE
 *       a second, Poisson, some 10-recipient messages and batches), until the sink has every
 *       deliverable recipient and the meter has stood still for 3 s. deps.summarise prices it.
 */
import type { DevServer } from "../../scripts/lib/dev-server";
import { generateArrivals, type Arrival } from "./arrivals";
import { startWorldDoh } from "./doh";
import { deliverable } from "./phase";
import { startWorldSink } from "./sink";
import { MIX_FROM } from "./sides";
import { createWorld } from "./world";

/** Messages a second of the case's arrival stream. */
export const MIX_RATE = 20;

/** What bench/cost.ts lends the case. */
export interface MixCaseDeps<R> {
  setup(vars: Record<string, string>): Promise<{ server: DevServer }>;
  teardown(s: { server: DevServer }): Promise<void>;
  api<T>(s: DevServer, method: string, path: string, body?: unknown): Promise<T>;
  /** Prices the case: its messages and recipients, the meter's snapshot, the seconds it took. */
  summarise(messages: number, recipients: number, requests: number, snapshot: unknown, seconds: number): R;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Runs the case (see the header). */
export async function runMixCase<R>(deps: MixCaseDeps<R>, messages: number): Promise<R> {
  const world = createWorld({ domains: 1000, shares: { down: 0, timeout: 0 }, backAfterMs: 10_000 });
  const doh = await startWorldDoh(world);
  const sink = await startWorldSink(world).catch(async (e: unknown) => { await doh.close(); throw e; });
  try {
    const s = await deps.setup({
      SMARTHOST: "", DEFAULT_TRANSPORT: "smtp", EGRESS: "direct", MX_PORT: String(sink.port), DOH_RESOLVER_URL: doh.url,
      SCHEDULER_CONFIG: JSON.stringify({ minimal_backoff_time: 5, maximal_backoff_time: 20 }),
    });
    try {
      const email = (m: Arrival["messages"][number]) => ({
        from: `Mix <${MIX_FROM}>`, to: m.to, subject: `Cost mix ${m.id}`, text: `Cost benchmark message ${m.id}.`,
      });
      const big = world.domains.slice(0, world.config.bigDomains);
      for (let i = 0; i < 10; i++) await deps.api(s.server, "POST", "/emails", email({ id: `w${i}`, to: [`warm${i}@${big[i % big.length]!.name}`] }));
      await sink.waitFor((st) => st.delivered >= 10, 120_000);
      await still(deps, s.server);
      const arrivals = generateArrivals(world, { messages, ratePerSec: MIX_RATE, prefix: "c", seed: 11 });
      const wanted = arrivals.flatMap((a) => a.messages.flatMap((m) => m.to)).filter((r) => deliverable(world, r));
      await deps.api(s.server, "POST", "/relay/dev/meter/reset");
      sink.reset();
      sink.startClock();
      const t0 = Date.now();
      const sent: Promise<unknown>[] = [];
      for (const a of arrivals) {
        const wait = t0 + a.atMs - Date.now();
        if (wait > 1) await sleep(wait);
        const [path, body] = a.kind === "batch" ? ["/emails/batch", a.messages.map(email)] : ["/emails", email(a.messages[0]!)];
        sent.push(deps.api(s.server, "POST", path, body));
      }
      await Promise.all(sent);
      await sink.waitFor(() => wanted.every((r) => sink.deliveries().has(r)), 300_000);
      const snapshot = await still(deps, s.server);
      const recipients = arrivals.reduce((n, a) => n + a.messages.reduce((k, m) => k + m.to.length, 0), 0);
      return deps.summarise(messages, recipients, arrivals.length, snapshot, (Date.now() - t0) / 1000);
    } finally {
      await deps.teardown(s);
    }
  } finally {
    await sink.stop();
    await doh.close();
  }
}

/** Waits until the meter has stood still for 3 s (at most 3 minutes); returns its snapshot. */
async function still<R>(deps: MixCaseDeps<R>, server: DevServer): Promise<unknown> {
  let [last, since] = ["", Date.now()];
  for (const deadline = Date.now() + 180_000; Date.now() < deadline;) {
    await sleep(500);
    const now = JSON.stringify(await deps.api(server, "GET", "/relay/dev/meter"));
    if (now !== last) [last, since] = [now, Date.now()];
    else if (Date.now() - since >= 3000) return JSON.parse(now) as unknown;
  }
  throw new Error("mix: the meter did not stand still");
}
