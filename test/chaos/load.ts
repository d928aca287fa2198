/**
 * Load campaign: sustained submission at the measured accept ceiling while one destination
 * flaps between dead and alive; queue growth, runtime memory, and small-message latency under a
 * concurrent bulk job against idle, measured side by side in the same run.
 *
 * DESCRIPTION
 *   runLoad({ seconds, log })  one wrangler dev, D1 routes steady.chaos and other.chaos to two
 *       catchers and flap.chaos to a sink that stops listening (connection refused) and starts
 *       again every FLAP_S seconds. Phases:
 *       1. idle latency: PROBES small messages to steady.chaos, one a second, each timed from
 *          the POST to its arrival at the sink;
 *       2. bulk latency: a bulk job (150 or 300 messages × 50 recipients at steady.chaos) is
 *          submitted, and from its first POST until it has drained the same probes are timed
 *          again; ratio = p50 bulk / p50 idle (target ≤ 2, or a p50 under bulk within
 *          BULK_P50_BOUND_MS: with no fixed delay an idle probe is delivered at once, and the bulk
 *          job's deliveries share the local runtime's one thread, so a ratio to the idle p50
 *          measures that thread's queue; the bound is issue 41's p99 for well-behaved mail). The
 *          probes are sent by a tenant of
 *          their own (chaos-probe), a transactional sender beside the bulk sender. From the bulk
 *          job's own tenant, with 4 accept slots (a tenant holding at most 3) since 2026-11-28,
 *          a probe competed with the job's 4 workers for its tenant's slots and waited out 429s:
 *          in one quick run its POST alone took 5,149 ms (p50) and the ratio was 6.04; that is
 *          back-pressure on a sender at its limit, not the scheduling latency measured here;
 *       3. accept ceiling: 10 s of closed-loop POST /emails with 16 workers;
 *       4. sustained: POST /emails paced at that ceiling for `seconds`, 1–3 recipients over the
 *          three domains; every 5 s a sample of accepted and arrived recipients (the queue is
 *          their difference) and of the summed RSS of wrangler + workerd;
 *       5. drain: the flapping destination comes back for good, and up to 3 minutes (20 s in
 *          --quick) pass for the queue to empty; the delivery rate during and after the load, the
 *          time left to drain, and the backlog by state (GET /relay/queue, operator key) are
 *          reported. The flapping stops first, as Postfix's rules would make a stall check over
 *          flips fail with nothing wrong: a failure late in a closed spell marks the destination
 *          dead (minimal_backoff_time) past the flip, the recipients it defers wait the maximal
 *          back-off (FLAP_S s), and so come back in the next closed spell (CI at 7dc8c4d: 42
 *          recipients, all deferred there, none delivered in a 20 s drain spent half open).
 *
 * ERRORS
 *   Everything started is stopped. The campaign fails when the latency ratio exceeds 2 with the
 *   p50 under bulk above BULK_P50_BOUND_MS, when the
 *   client offered under 80 % of the ceiling, when a POST fails with 5xx, or when nothing
 *   arrives any more during the drain (delivery stalled). A POST the relay refuses with 429
 *   (back-pressure at accept: nothing queued) is counted as refused, not sent again: the pacing
 *   is open-loop, each POST a sender of its own. A sustained POST whose pooled
 *   connection closed before any answer is sent again under its Idempotency-Key (at most
 *   twice, reported with the cause); one that still has no answer fails the campaign.
 */
import { startCatcher, type Catcher } from "../../scripts/lib/smtp-catcher";
import { request, sleep } from "./lib/api";
import { startFaultSink, type FaultSink } from "./lib/fault-sink";
import { headerOf, rawOf } from "./lib/mail";
import type { CampaignResult } from "./lib/report";
import { createRng } from "./lib/rng";
import { createRuntime, type Runtime } from "./lib/runtime";
import { createKey } from "../../scripts/lib/keys";

/** Load options. */
export interface LoadOptions {
  seconds: number;
  log: (line: string) => void;
}

const FLAP_S = 10;
const PROBES = 15;
const PROBE_EVERY_MS = 1000;
const DOMAINS = ["steady.chaos", "other.chaos", "flap.chaos"];
/** A p50 under the bulk job within this passes whatever the ratio (see the header). */
const BULK_P50_BOUND_MS = 500;

/** Load messages submitted and recipients accepted (all, and at the flapping destination). */
interface Counter {
  seq: number;
  rcpts: number;
  flap: number;
  /** bulk and probe recipients */ earlier: number;
}

interface Sinks {
  steady: Catcher;
  other: Catcher;
  flap: FaultSink;
}

function arrived(s: Sinks): number {
  const n = (list: { rcptTo: string[] }[]) => list.reduce((a, m) => a + m.rcptTo.length, 0);
  return n(s.steady.messages) + n(s.other.messages) + n(s.flap.received.filter((m) => !m.dropped));
}

function pct(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

/**
 * Sends `count` probe messages, one every PROBE_EVERY_MS without waiting for the previous one
 * (stopping early when `until()` says so), and returns their POST→sink latencies (ms).
 */
async function probe(
  rt: Pick<Runtime, "url" | "key">,
  sinks: Sinks,
  tag: string,
  count: number,
  sent: { probes: number },
  until?: () => boolean,
  accepts: number[] = [],
): Promise<number[]> {
  const started = new Map<string, number>();
  const out: number[] = [];
  let seen = sinks.steady.messages.length;
  const scan = () => {
    const msgs = sinks.steady.messages;
    for (; seen < msgs.length; seen++) {
      const id = headerOf(rawOf(msgs[seen]!), "X-Probe");
      const t0 = id === null ? undefined : started.get(id);
      if (t0 !== undefined) {
        out.push(msgs[seen]!.receivedAt - t0);
        started.delete(id!);
      }
    }
  };
  for (let i = 0; i < count && !(until?.() ?? false); i++) {
    const id = `${tag}-${i}`;
    const t0 = Date.now();
    const a = await request(
      rt,
      "POST",
      "/emails",
      JSON.stringify({
        from: "Probe <probe@sender.example>",
        to: [`probe-${id}@steady.chaos`],
        subject: `probe ${id}`,
        text: "small",
        headers: { "X-Probe": id },
      }),
    );
    if (a.status === 200) {
      sent.probes++;
      started.set(id, t0);
      accepts.push(Date.now() - t0);
    }
    scan();
    await sleep(Math.max(0, PROBE_EVERY_MS - (Date.now() - t0)));
  }
  const deadline = Date.now() + 180_000;
  while (started.size > 0 && Date.now() < deadline) {
    scan();
    await sleep(20);
  }
  return out;
}

async function bulkJob(rt: Runtime, messages: number): Promise<number> {
  let accepted = 0;
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < messages) {
        const m = next++;
        const to = Array.from({ length: 50 }, (_, j) => `bulk-${m}-${j}@steady.chaos`);
        const a = await request(
          rt,
          "POST",
          "/emails",
          JSON.stringify({ from: "Bulk <bulk@sender.example>", to, subject: `bulk ${m}`, text: "bulk ".repeat(200) }),
        );
        if (a.status === 200) accepted += to.length;
      }
    }),
  );
  return accepted;
}

function loadBody(seq: number, rng: ReturnType<typeof createRng>): { body: string; rcpts: number; flap: number } {
  const n = rng.int(1, 3);
  const to = Array.from({ length: n }, (_, j) => `load-${seq}-${j}@${DOMAINS[(seq + j) % DOMAINS.length]}`);
  const flap = to.filter((a) => a.endsWith("@flap.chaos")).length;
  return {
    body: JSON.stringify({
      from: "Load <load@sender.example>",
      to,
      subject: `load ${seq}`,
      text: `load ${seq} ${"z".repeat(400)}`,
      headers: { "X-Load-Seq": String(seq) },
    }),
    rcpts: n,
    flap,
  };
}

/** Closed loop for `ms` with `workers`: accepted messages/s. */
async function ceiling(
  rt: Runtime,
  ms: number,
  workers: number,
  rng: ReturnType<typeof createRng>,
  counter: Counter,
): Promise<number> {
  const end = Date.now() + ms;
  let ok = 0;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (Date.now() < end) {
        const { body, rcpts, flap } = loadBody(counter.seq++, rng);
        const a = await request(rt, "POST", "/emails", body);
        if (a.status === 200) {
          ok++;
          counter.rcpts += rcpts;
          counter.flap += flap;
        }
      }
    }),
  );
  return ok / (ms / 1000);
}

interface Sample {
  t: number;
  accepted: number;
  arrived: number;
  queue: number;
  rssMb: number;
}

/** Paced submission at `rate`/s for `seconds`, sampling every 5 s. */
async function sustain(
  rt: Runtime,
  sinks: Sinks,
  rate: number,
  seconds: number,
  rng: ReturnType<typeof createRng>,
  counter: Counter,
  log: (l: string) => void,
) {
  const t0 = Date.now();
  const end = t0 + seconds * 1000;
  let sent = 0,
    ok = 0,
    refused = 0,
    fiveXx = 0,
    inFlight = 0;
  const errors: string[] = [];
  const samples: Sample[] = [];
  const sampler = (async () => {
    while (Date.now() < end) {
      await sleep(5000);
      const s = {
        t: Math.round((Date.now() - t0) / 1000),
        accepted: counter.rcpts + counter.earlier,
        arrived: arrived(sinks),
        queue: 0,
        rssMb: Math.round((await rt.rssKb()) / 1024),
      };
      s.queue = s.accepted - s.arrived;
      samples.push(s);
      log(
        `  t=${s.t}s accepted ${s.accepted} rcpts, arrived ${s.arrived}, queue ${s.queue}, RSS ${s.rssMb} MB, ${inFlight} POSTs in flight`,
      );
    }
  })();
  const posts: Promise<void>[] = [];
  while (Date.now() < end) {
    const due = t0 + (sent / rate) * 1000;
    if (Date.now() < due) {
      await sleep(Math.min(50, due - Date.now()));
      continue;
    }
    // Room for a second of POSTs at the ceiling and more: while mail arrives faster than it is
    // delivered the relay holds each answer back (IN_FLOW_DELAY_MS, 1 s), and this pacing is
    // open-loop, so the rate stays the ceiling's (bench:backlog measures the closed-loop effect).
    if (inFlight >= 512) {
      await sleep(5);
      continue;
    }
    const seq = counter.seq++;
    const { body, rcpts, flap } = loadBody(seq, rng);
    sent++;
    inFlight++;
    posts.push(
      request(rt, "POST", "/emails", body, { "idempotency-key": `load-${seq}` }, 30_000, true, false).then((a) => {
        inFlight--;
        if (a.status === 200) {
          ok++;
          counter.rcpts += rcpts;
          counter.flap += flap;
        }
        if (a.status === 429) refused++;
        if (a.status === 0 || a.status >= 500) {
          fiveXx++;
          if (errors.length < 5)
            errors.push(`${a.status} after ${Math.round(a.ms)} ms: ${JSON.stringify(a.body).slice(0, 200)}`);
        }
      }),
    );
  }
  await Promise.all(posts);
  await sampler;
  return { sent, ok, refused, fiveXx, errors, rate: ok / seconds, offered: sent / seconds, samples };
}

/** Runs the load campaign. */
export async function runLoad(o: LoadOptions): Promise<CampaignResult> {
  const sinks: Sinks = {
    steady: await startCatcher(),
    other: await startCatcher(),
    flap: await startFaultSink({ fault: "healthy" }),
  };
  const rt = await createRuntime({
    tenant: "chaos-load",
    vars: {
      SCHEDULER_CONFIG: JSON.stringify({ minimal_backoff_time: 5, maximal_backoff_time: 10 }),
      DELIVERY_LEASE_SECONDS: "60",
      OUTBOX_GRACE_SECONDS: "30",
    },
    routes: [
      { pattern: "steady.chaos", transport: "load", nexthop: `[127.0.0.1]:${sinks.steady.smtpPort}` },
      { pattern: "other.chaos", transport: "load", nexthop: `[127.0.0.1]:${sinks.other.smtpPort}` },
      { pattern: "flap.chaos", transport: "load", nexthop: `[127.0.0.1]:${sinks.flap.port}` },
    ],
  });
  let flapping = true;
  let flaps = 0;
  let flip: Promise<void> = Promise.resolve();
  const flapper = (async () => {
    while (flapping) {
      await sleep(FLAP_S * 1000);
      if (!flapping) break;
      flaps++;
      flip = flaps % 2 === 1 ? sinks.flap.close() : sinks.flap.open();
      await flip;
    }
  })();
  /** Stops the flapping with the destination listening (a flip under way ends first). */
  const settle = async () => {
    flapping = false;
    await flip;
    await sinks.flap.open();
  };
  try {
    await rt.start();
    return await campaign(rt, sinks, o, () => flaps, settle);
  } finally {
    await settle();
    await flapper;
    await rt.dispose();
    await Promise.all([sinks.steady.close(), sinks.other.close(), sinks.flap.close()]);
  }
}

async function campaign(
  rt: Runtime,
  sinks: Sinks,
  o: LoadOptions,
  flaps: () => number,
  settle: () => Promise<void>,
): Promise<CampaignResult> {
  const quick = o.seconds < 120;
  const rng = createRng(7);
  const sent = { probes: 0 };
  const counter: Counter = { seq: 0, rcpts: 0, flap: 0, earlier: 0 };
  // The probes come from a tenant of their own, a transactional sender beside the bulk sender
  // (see the header).
  const prober = { url: rt.url, key: await createKey({ tenant: "chaos-probe", name: "probe", persistTo: rt.state }) };
  await probe(prober, sinks, "warm", 3, sent);
  const idleAccepts: number[] = [];
  const idle = await probe(prober, sinks, "idle", PROBES, sent, undefined, idleAccepts);
  o.log(
    `  idle small-message latency: p50 ${pct(idle, 50)} ms, p90 ${pct(idle, 90)} ms (${idle.length} probes; the POST alone p50 ${pct(idleAccepts, 50)} ms)`,
  );
  const bulkMessages = quick ? 150 : 300;
  // The probes start with the bulk job's first POST: its 50-recipient messages go out one SMTP
  // transaction each, and the relay now delivers them about as fast as they are accepted, so
  // probes started after the last POST found the job drained (0 probes, a NaN ratio).
  const bulkStart = arrived(sinks);
  let bulkRcpts = -1; // known once every POST of the job is answered
  const job = bulkJob(rt, bulkMessages).then((n) => {
    bulkRcpts = n;
  });
  const bulkDone = () => bulkRcpts >= 0 && arrived(sinks) - bulkStart >= bulkRcpts;
  const busyAccepts: number[] = [];
  const busy = await probe(prober, sinks, "bulk", PROBES, sent, bulkDone, busyAccepts);
  await job;
  const ratio = pct(busy, 50) / pct(idle, 50);
  o.log(
    `  under a ${bulkRcpts}-recipient bulk job: p50 ${pct(busy, 50)} ms, ` +
      `p90 ${pct(busy, 90)} ms (${busy.length} probes, one a second from the bulk job's first ` +
      `POST until it drained; the POST alone p50 ${pct(busyAccepts, 50)} ms) → ` +
      `ratio ${ratio.toFixed(2)}`,
  );
  while (!bulkDone()) await sleep(1000);
  counter.earlier = bulkRcpts + sent.probes;
  const ceil = await ceiling(rt, 10_000, 16, rng, counter);
  o.log(`  accept ceiling: ${ceil.toFixed(0)} messages/s (16 workers, 10 s)`);
  const s = await sustain(rt, sinks, ceil, o.seconds, rng, counter, o.log);
  await settle();
  const drainStart = Date.now();
  const drainLimit = (quick ? 20 : 180) * 1000;
  const total = () => counter.rcpts + bulkRcpts + sent.probes;
  const arrivedAtStop = arrived(sinks);
  while (arrived(sinks) < total() && Date.now() - drainStart < drainLimit) await sleep(2000);
  const left = total() - arrived(sinks);
  const drainS = (Date.now() - drainStart) / 1000;
  const drainRate = (arrived(sinks) - arrivedAtStop) / drainS;
  const first = s.samples[0],
    last = s.samples[s.samples.length - 1];
  const deliverRate = first && last && last.t > first.t ? (last.arrived - first.arrived) / (last.t - first.t) : 0;
  const flapAccepted = counter.flap,
    flapArrived = sinks.flap.received.filter((m) => !m.dropped).reduce((a, m) => a + m.rcptTo.length, 0);
  // Where the backlog sits (incoming = not classified yet, ready/active/deferred = scheduled).
  const queue = await request({ url: rt.url, key: rt.operatorKey }, "GET", "/relay/queue");
  const states = queue?.status === 200 ? ((queue.body as { counts?: unknown }).counts ?? null) : null;
  if (states) o.log(`  backlog by state after the drain: ${JSON.stringify(states).slice(0, 600)}`);
  const rss = s.samples.map((x) => x.rssMb);
  const maxQueue = Math.max(0, ...s.samples.map((x) => x.queue));
  const lastQ = s.samples[s.samples.length - 1]?.queue ?? 0;
  const growth =
    s.samples.length > 1 ? (lastQ - s.samples[0]!.queue) / (s.samples[s.samples.length - 1]!.t - s.samples[0]!.t) : 0;
  const failures: string[] = [];
  if (!(ratio <= 2) && !(pct(busy, 50) <= BULK_P50_BOUND_MS))
    failures.push(
      `small-message latency under bulk ${ratio.toFixed(2)}× idle (target ≤ 2×, or p50 ≤ ${BULK_P50_BOUND_MS} ms): ` +
        `p50 ${pct(busy, 50)} ms vs ${pct(idle, 50)} ms`,
    );
  // The client must keep offering at the ceiling; what the relay refuses with 429 (back-pressure,
  // nothing queued) is reported beside what it accepted.
  if (s.offered < 0.8 * ceil)
    failures.push(`offered ${s.offered.toFixed(0)}/s, under 80 % of the ${ceil.toFixed(0)}/s ceiling`);
  if (s.fiveXx > 0) failures.push(`${s.fiveXx} POSTs failed with 5xx or a connection error: ${s.errors.join(" | ")}`);
  // Delivery runs far below the accept ceiling locally, so the backlog cannot drain within the
  // campaign; what must hold is that it keeps draining.
  if (left > 0 && drainRate <= 0)
    failures.push(
      `delivery stalled: nothing arrived in the ${drainS.toFixed(0)} s after the load stopped (${left} recipients queued)`,
    );
  return {
    campaign: "load",
    tried:
      `${o.seconds} s of POST /emails paced at the measured ceiling (1–3 rcpts over 3 ` +
      `destinations), one destination refusing/accepting every ${FLAP_S} s until the drain (${flaps()} flips); ` +
      `small-message latency idle vs under a ${bulkRcpts}-recipient bulk job to the same destination`,
    result: failures.length === 0 ? "pass" : "fail",
    figures:
      `ceiling ${ceil.toFixed(0)}/s, offered ${s.offered.toFixed(0)}/s, ` +
      `accepted ${s.rate.toFixed(0)}/s (${s.ok}/${s.sent}, ${s.refused} refused with ` +
      `429, ${s.fiveXx} 5xx); delivery ${deliverRate.toFixed(0)} rcpts/s under ` +
      `load, ${drainRate.toFixed(0)} rcpts/s after; ` +
      `queue max ${maxQueue} rcpts, growth ${growth.toFixed(0)} rcpts/s, ${left} still queued ` +
      `after a ${drainS.toFixed(0)} s drain ` +
      `(≈ ${drainRate > 0 ? Math.round(left / drainRate / 60) : "∞"} min more); flapping ` +
      `destination ${flapArrived}/${flapAccepted} delivered; ` +
      `RSS ${Math.min(...rss)}→${Math.max(...rss)} MB; latency p50 idle ${pct(idle, 50)} ms, ` +
      `under bulk ${pct(busy, 50)} ms = ${ratio.toFixed(2)}× (p90 ${pct(idle, 90)} ` +
      `/ ${pct(busy, 90)} ms)`,
    failures,
    details: {
      ceiling_per_s: Math.round(ceil),
      sustained_per_s: Math.round(s.rate),
      offered_per_s: Math.round(s.offered),
      sent: s.sent,
      accepted: s.ok,
      refused: s.refused,
      five_xx: s.fiveXx,
      five_xx_examples: s.errors,
      runtime_errors: rt.errors().slice(-20),
      samples: s.samples,
      flaps: flaps(),
      latency_ms: { idle, bulk: busy, ratio_p50: Math.round(ratio * 100) / 100 },
      bulk_recipients: bulkRcpts,
      undelivered_after_drain: left,
      drain_s: Math.round(drainS),
      delivery_rcpts_per_s_under_load: Math.round(deliverRate),
      delivery_rcpts_per_s_after: Math.round(drainRate),
      flap_accepted: flapAccepted,
      flap_arrived: flapArrived,
      backlog_states: states,
    },
  };
}
