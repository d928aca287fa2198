/**
 * bench:cost's `mix` case: what an email costs on real traffic, one at a time to many domains
 * (the mail world of bench/world/), counted over its whole life like every case of bench/cost.ts.
 *
 * DESCRIPTION
 *   startMixCostWorld(messages)  a world of 1,000 domains (the default mix of awkward ones, but no
 *       dead or silent domain: their retries never end, and the meter must stand still), its DoH
 *       resolver and sink. Its `vars` make a bench:cost server deliver by MX (EGRESS direct,
 *       MX_PORT the sink's, DOH_RESOLVER_URL the world's, back-off 5 s / 20 s as in bench:mix).
 *     warm(post)     10 messages to the big domains, until the sink has them;
 *     send(post)     `messages` messages of the arrival stream (single POST /emails at MIX_RATE a
 *                    second, Poisson, some 10-recipient messages and batches); answers the
 *                    recipients sent to;
 *     done()         until the sink has every deliverable recipient;
 *     publish(d, rs) puts a domain's records in the resolver's answers (the sender's domain);
 *     close()        stops the sink and the resolver.
 */
import { generateArrivals, type Arrival } from "./arrivals";
import { startWorldDoh } from "./doh";
import { publishRecords, zoneAnswer, type Zone } from "../../scripts/lib/doh-zone";
import { deliverable } from "./phase";
import { startWorldSink } from "./sink";
import { MIX_FROM } from "./sides";
import { createWorld } from "./world";

/** Messages a second of the case's arrival stream. */
export const MIX_RATE = 20;

/** A POST with the bench server's key (bench:cost's api). */
export type Post = (path: string, body: unknown) => Promise<unknown>;

export interface MixCostWorld {
  vars: Record<string, string>;
  /** Publishes a domain's records in the world's DNS (the sender's, verified as production requires). */
  publish(domain: string, records: readonly { name: string; type: string; value: string }[]): void;
  warm(post: Post): Promise<void>;
  send(post: Post): Promise<number>;
  done(): Promise<void>;
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const email = (m: Arrival["messages"][number]) => ({
  from: `Mix <${MIX_FROM}>`,
  to: m.to,
  subject: `Cost mix ${m.id}`,
  text: `Cost benchmark message ${m.id}.`,
});

/** See the header. */
export async function startMixCostWorld(messages: number): Promise<MixCostWorld> {
  const world = createWorld({ domains: 1000, shares: { down: 0, timeout: 0 }, backAfterMs: 10_000 });
  const zone: Zone = new Map();
  const doh = await startWorldDoh(world, { extra: (name, type) => zoneAnswer(zone, name, type) });
  const sink = await startWorldSink(world).catch(async (e: unknown) => {
    await doh.close();
    throw e;
  });
  const arrivals = generateArrivals(world, { messages, ratePerSec: MIX_RATE, prefix: "c", seed: 11 });
  const wanted = arrivals.flatMap((a) => a.messages.flatMap((m) => m.to)).filter((r) => deliverable(world, r));
  return {
    publish: (domain, records) => publishRecords(zone, domain, records),
    vars: {
      SMARTHOST: "",
      DEFAULT_TRANSPORT: "smtp",
      EGRESS: "direct",
      MX_PORT: String(sink.port),
      DOH_RESOLVER_URL: doh.url,
      SCHEDULER_CONFIG: JSON.stringify({ minimal_backoff_time: 5, maximal_backoff_time: 20 }),
    },
    async warm(post) {
      const big = world.domains.slice(0, world.config.bigDomains);
      for (let i = 0; i < 10; i++)
        await post("/emails", email({ id: `w${i}`, to: [`warm${i}@${big[i % big.length]!.name}`] }));
      await sink.waitFor((st) => st.delivered >= 10, 120_000);
    },
    async send(post) {
      sink.reset();
      sink.startClock();
      const t0 = Date.now();
      const sent: Promise<unknown>[] = [];
      for (const a of arrivals) {
        const wait = t0 + a.atMs - Date.now();
        if (wait > 1) await sleep(wait);
        sent.push(
          a.kind === "batch" ? post("/emails/batch", a.messages.map(email)) : post("/emails", email(a.messages[0]!)),
        );
      }
      await Promise.all(sent);
      return arrivals.reduce((n, a) => n + a.messages.reduce((k, m) => k + m.to.length, 0), 0);
    },
    async done() {
      await sink.waitFor(() => wanted.every((r) => sink.deliveries().has(r)), 300_000);
    },
    async close() {
      await sink.stop();
      await doh.close();
    },
  };
}
