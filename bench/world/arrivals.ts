/**
 * The arrival stream of bench:mix: what a transactional sender submits, when. Mostly single
 * one-recipient messages, each its own request, with Poisson arrivals; some 10-recipient messages
 * across domains; some batches of one-recipient messages in one request. Recipient domains are
 * drawn by the world's Zipf weights.
 *
 * DESCRIPTION
 *   generateArrivals(world, config)  the requests in time order, each with its offset from the
 *       stream's start (atMs) and its messages; every recipient address is distinct in the stream
 *       (<prefix><n>@<domain>, or nosuch<prefix><n>@<domain> for an unknown user of a strict
 *       domain), so a delivery at the sink names the one recipient it belongs to.
 *   DEFAULT_ARRIVALS                 the shares: 5 % of requests are 10-recipient messages, 3 %
 *       batches of 10–50 messages, the rest single messages; 20 % of the recipients drawn at a
 *       strict domain are unknown users.
 *   streamStats(arrivals)            counts: requests, messages, recipients, distinct domains.
 *
 * INVARIANTS
 *   The stream has exactly `messages` messages; arrivals form a Poisson process of requests whose
 *   mean message rate is `ratePerSec` (rate 0: all at offset 0). The same world, configuration and
 *   seed always give the same stream.
 */
import { createRng } from "../../test/chaos/lib/rng";
import type { Domain, World } from "./world";

/** One message of the stream. */
export interface MixMessage {
  /** Distinct in the stream. */
  id: string;
  to: string[];
}

/** One request: a single message, a multi-recipient message, or a batch. */
export interface Arrival {
  /** Offset from the stream's start, ms. */
  atMs: number;
  kind: "single" | "multi" | "batch";
  messages: MixMessage[];
}

/** How the stream is drawn. */
export interface ArrivalConfig {
  messages: number;
  /** Mean messages per second (0: everything at once). */
  ratePerSec: number;
  seed: number;
  /** Prefix of local parts and message ids, distinct per stream when several go to one sink. */
  prefix: string;
  /** Share of requests that are multi-recipient messages. */
  multiShare: number;
  multiRcpts: number;
  /** Share of requests that are batches. */
  batchShare: number;
  batchSize: [number, number];
  /** Share of recipients at strict domains that are unknown users. */
  unknownShare: number;
}

/** The default shares (see the header). */
export const DEFAULT_ARRIVALS: Omit<ArrivalConfig, "messages" | "ratePerSec" | "prefix"> = {
  seed: 7,
  multiShare: 0.05,
  multiRcpts: 10,
  batchShare: 0.03,
  batchSize: [10, 50],
  unknownShare: 0.2,
};

/** A sampler of domains by weight (inverse CDF over the cumulative weights). */
function zipfSampler(world: World): (u: number) => Domain {
  const cdf: number[] = [];
  let acc = 0;
  for (const d of world.domains) cdf.push((acc += d.weight));
  return (u) => {
    const x = u * acc;
    let [lo, hi] = [0, cdf.length - 1];
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid]! > x) hi = mid;
      else lo = mid + 1;
    }
    return world.domains[lo]!;
  };
}

/** Draws the stream (see the header). */
export function generateArrivals(
  world: World,
  partial: Partial<ArrivalConfig> & Pick<ArrivalConfig, "messages" | "ratePerSec" | "prefix">,
): Arrival[] {
  const c: ArrivalConfig = { ...DEFAULT_ARRIVALS, ...partial };
  const rng = createRng(c.seed);
  const draw = zipfSampler(world);
  const meanBatch = (c.batchSize[0] + c.batchSize[1]) / 2;
  const perRequest = c.multiShare + c.batchShare * meanBatch + (1 - c.multiShare - c.batchShare);
  const meanGapMs = c.ratePerSec > 0 ? (1000 * perRequest) / c.ratePerSec : 0;
  let [n, rcpt, at] = [0, 0, 0];
  const address = () => {
    const d = draw(rng.next());
    const unknown = d.rejectsUnknown && rng.next() < c.unknownShare;
    return `${unknown ? "nosuch" : ""}${c.prefix}${rcpt++}@${d.name}`;
  };
  const message = (to: string[]): MixMessage => ({ id: `${c.prefix}m${n++}`, to });
  const out: Arrival[] = [];
  while (n < c.messages) {
    const u = rng.next();
    const left = c.messages - n;
    let arrival: Arrival;
    if (u < c.batchShare && left > 1) {
      const size = Math.min(left, rng.int(c.batchSize[0], c.batchSize[1]));
      arrival = { atMs: at, kind: "batch", messages: Array.from({ length: size }, () => message([address()])) };
    } else if (u < c.batchShare + c.multiShare) {
      arrival = { atMs: at, kind: "multi", messages: [message(Array.from({ length: c.multiRcpts }, address))] };
    } else {
      arrival = { atMs: at, kind: "single", messages: [message([address()])] };
    }
    out.push(arrival);
    // Exponential gaps: a Poisson process of requests.
    if (meanGapMs > 0) at += -Math.log(1 - rng.next()) * meanGapMs;
  }
  return out;
}

/** Counts of a stream. */
export function streamStats(arrivals: readonly Arrival[]): {
  requests: number;
  messages: number;
  recipients: number;
  domains: number;
  spanMs: number;
} {
  const domains = new Set<string>();
  let [messages, recipients] = [0, 0];
  for (const a of arrivals) {
    for (const m of a.messages) {
      messages++;
      recipients += m.to.length;
      for (const t of m.to) domains.add(t.slice(t.indexOf("@") + 1));
    }
  }
  return { requests: arrivals.length, messages, recipients, domains: domains.size, spanMs: arrivals.at(-1)?.atMs ?? 0 };
}
