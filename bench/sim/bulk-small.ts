/*
 * NAME
 *   bulk-small - scenario "bulk-small": small messages behind a bulk job, with and without
 *   preemption (spec §5; Postfix SCHEDULER_README "How does the preemption work")
 * DESCRIPTION
 *   runBulkSmall() injects one bulk message of 10,000 recipients at t = 0, then 200
 *   single-recipient messages as a Poisson process (mean gap 2 s, seeded), and measures
 *   each small message's latency from arrival to delivery. It runs twice on the same
 *   arrivals: preemption on (delivery_slot_cost 5, the default) and off (cost 0; the core
 *   disables preemption for any cost below 2).
 *
 *   Why these numbers. Preemption matters only when the transport is the bottleneck, so:
 *   - process_limit is 10 while the bulk recipients are spread over 100 destinations, each
 *     with an unlimited server and a window of at least 5: 500+ entries could be in flight
 *     by the windows, only 10 are, and the bulk job always has a selectable entry. (With
 *     one bulk destination its window, not the transport, would be the bottleneck, and
 *     small messages to other destinations would go at once either way.)
 *   - Small messages go to 10 other destinations, so their own windows never delay them:
 *     what they wait for is a free delivery agent, i.e. their turn in the job list.
 *   - destination_recipient_limit 2 and 0.5 s per recipient make the bulk job 5000 short
 *     entries (about 1 s each, ±20 %): about 10 entries per second, 500 s in all. The
 *     bulk job earns one preemption slot per delivery_slot_cost (5) selected entries and
 *     each single-entry small job costs 5 of its counter, so preemption can serve about
 *     10/6 small messages per second; 0.5 per second arrive, over ≈ 400 s, i.e. all while
 *     the bulk job is being delivered. (Fewer, longer entries — the default recipient
 *     limit of 50 — would leave preemption too little capacity for this arrival rate.)
 *   Without preemption a small job sits behind the bulk job in the job list and is
 *   selected only once every bulk entry has been (FIFO); with it, it preempts the bulk
 *   job at the next free agent.
 * INVARIANTS
 *   See engine.ts; every recipient is delivered exactly once in each run.
 * ERRORS
 *   None; invariant violations are in each run's audit.
 */
import type { Audit } from "./audit";
import { DEFAULT_DESTINATION } from "./destination";
import { runSimulation, type SimMessage } from "./engine";
import { createRng, deriveSeed, exponentialWithMean } from "./rng";
import { summarize, type Summary } from "./stats";

/** Scenario parameters (defaults in BULK_SMALL_DEFAULTS). */
export interface BulkSmallOptions {
  bulkRecipients: number;
  bulkDestinations: number;
  smallMessages: number;
  smallDestinations: number;
  /** Mean gap between small-message arrivals (seconds). */
  smallMeanGapSec: number;
  processLimit: number;
  recipientLimit: number;
  perRcptLatencySec: number;
  jitter: number;
  seed: number;
}

/** The scenario as documented in the module header. */
export const BULK_SMALL_DEFAULTS: BulkSmallOptions = {
  bulkRecipients: 10_000,
  bulkDestinations: 100,
  smallMessages: 200,
  smallDestinations: 10,
  smallMeanGapSec: 2,
  processLimit: 10,
  recipientLimit: 2,
  perRcptLatencySec: 0.5,
  jitter: 0.2,
  seed: 1,
};

/** Results of one run (preemption on or off). */
export interface BulkSmallRun {
  preemption: boolean;
  /** Small-message latency, arrival → delivered (seconds). */
  smallLatency: Summary;
  /** When the bulk message's last recipient was delivered (seconds). */
  bulkDoneSec: number;
  attempts: number;
  audit: Audit;
}

/** Both runs plus the arrival span. */
export interface BulkSmallReport {
  opts: BulkSmallOptions;
  on: BulkSmallRun;
  off: BulkSmallRun;
  lastSmallArrivalSec: number;
}

/** The messages of the scenario: the bulk message, then the seeded Poisson small ones. */
export function bulkSmallMessages(opts: BulkSmallOptions): SimMessage[] {
  const bulk = Array.from({ length: opts.bulkRecipients }, (_, i) => {
    const nexthop = `bulk${i % opts.bulkDestinations}.example`;
    return { address: `b${i}@${nexthop}`, nexthop };
  });
  const out: SimMessage[] = [{ id: "bulk", arriveAt: 0, rcpts: bulk }];
  const rng = createRng(deriveSeed(opts.seed, 1));
  let t = 0;
  for (let k = 0; k < opts.smallMessages; k++) {
    t += exponentialWithMean(rng, opts.smallMeanGapSec);
    const nexthop = `small${k % opts.smallDestinations}.example`;
    out.push({ id: `small${k}`, arriveAt: t, rcpts: [{ address: `s${k}@${nexthop}`, nexthop }] });
  }
  return out;
}

/** Runs the scenario once, with preemption on or off. */
export function runBulkSmallOnce(preemption: boolean, opts: BulkSmallOptions = BULK_SMALL_DEFAULTS): BulkSmallRun {
  const messages = bulkSmallMessages(opts);
  const spec = { ...DEFAULT_DESTINATION, perRcptLatencySec: opts.perRcptLatencySec, jitter: opts.jitter };
  const r = runSimulation({
    config: {
      default_process_limit: opts.processLimit,
      default_destination_recipient_limit: opts.recipientLimit,
      default_delivery_slot_cost: preemption ? 5 : 0,
    },
    messages,
    destinationFor: () => spec,
    seed: deriveSeed(opts.seed, 2),
  });
  const latencies: number[] = [];
  for (const m of messages) {
    if (m.id === "bulk") continue;
    const done = r.store.completedAt(m.id);
    if (done !== null) latencies.push(done - m.arriveAt);
  }
  return {
    preemption,
    smallLatency: summarize(latencies),
    bulkDoneSec: r.store.completedAt("bulk") ?? NaN,
    attempts: r.attempts.length,
    audit: r.audit,
  };
}

/** Runs the scenario with preemption on and off, on the same arrivals. */
export function runBulkSmall(opts: BulkSmallOptions = BULK_SMALL_DEFAULTS): BulkSmallReport {
  const messages = bulkSmallMessages(opts);
  const last = messages[messages.length - 1]?.arriveAt ?? 0;
  return { opts, on: runBulkSmallOnce(true, opts), off: runBulkSmallOnce(false, opts), lastSmallArrivalSec: last };
}
