/**
 * The `deliver` Queue consumer (the delivery agent): each message is one entry the Transport
 * DO dispatched. The batch is grouped by nexthop and each group spread over up to its share of
 * the 6 sockets an invocation may hold (the platform limit), each session carrying several
 * entries with RSET between when there are more entries than sessions. Every entry's result
 * goes to the Transport DO (report, with the site failure for concurrency feedback) and to its
 * Outbox (per-recipient outcome); then each destination's reports go to its Destination DO, whose answer (window,
 * dead until) the Transport DO applies; the D1 index and events of every message touched are
 * written once, in one batch.
 *
 * DESCRIPTION
 *   handleDeliverBatch(batch, env)   the queue handler. Decisions live in deliver-plan.ts, the
 *                                    session in deliver-session.ts, the mx kind in deliver-mx.ts,
 *                                    the cf-email kind in deliver-cf-email.ts, the index in
 *                                    deliver-index.ts.
 *
 * INVARIANTS
 *   Each message is acked or retried on its own; one bad message never fails the batch. Reports
 *   are idempotent by entry id (Transport DO) and attempt (Outbox), so a redelivered message
 *   changes nothing twice; an entry no longer leased is not sent again, and recipients final in
 *   the Outbox are never sent again. An entry whose nexthop is not a relay (the `mx` kind, not wired yet)
 *   is acked without a report: its lease runs out and the Transport DO retries it.
 */
import { schedulerOf, type DeliverJob } from "../model/delivery";
import type { DeliveryEnvelope, SyncState } from "../model/message";
import { indexMessages } from "../indexing/writes";
import { finishParts, latestStates, type FinishItem } from "./finish";
import { groupByNexthop, parseJob, relayTarget, splitForSessions } from "./plan";
import type { MxResolution } from "../net/core/mx";
import {
  createMxLookup,
  egressIdOf,
  lookupFailureParts,
  mxSettingsOf,
  runMxSessions,
  type MxLookup,
  type MxSettings,
} from "./mx";
import { pool } from "../lib/pool";
import type { SessionCache } from "./session-cache";
import { hasWork, prepareJobs, readEnvelopes, runSession, unsentParts, type SessionPart } from "./session";
import { CF_EMAIL_NEXTHOP, sendViaEmailService } from "./cf-email";
import { matchProvider, shapeOf, type ProviderMatch } from "../net/core/providers";
import { providerRulesOf } from "../db/providers";
import { settingsOf } from "../settings/settings";
import { stsInfo } from "../tls-policy/sts";
import { TlsRptTally } from "../tls-policy/tlsrpt";
import { sendPooled } from "./pooled";

/** Simultaneous SMTP sessions per invocation (Workers allow 6 open sockets). */
const MAX_SOCKETS = 6;

type Item = { msg: Message<unknown>; job: DeliverJob };

function fail(msg: Message<unknown>, stage: string, e: unknown): void {
  console.error(
    JSON.stringify({
      error: `deliver ${stage} failed`,
      body: msg.body,
      detail: e instanceof Error ? e.message : String(e),
    }),
  );
  msg.retry({ delaySeconds: Math.min(2 ** Math.max(msg.attempts, 1), 300) });
}

/** The mx kind's settings and MX lookups of one invocation (created on first use). */
export interface MxContext {
  settings: MxSettings;
  lookup: MxLookup;
}

/** A queue message as a FinishItem: acked, or retried with back-off. */
function finishItem({ msg, job }: Item): FinishItem {
  return { job, ack: () => msg.ack(), retry: (stage, e) => fail(msg, stage, e) };
}

/** Acks the items whose entry is no longer leased; returns the others. */
async function liveItems(env: Env, items: Item[]): Promise<Item[]> {
  // Entries no longer leased were reported already (a redelivered queue message) or given up
  // as crashed and retried as a new attempt: nothing to send.
  // One request per Transport DO the items came from (a transport's shards hand over their own).
  const shards = settingsOf(env).transportShards;
  const byScheduler = new Map<string, Item[]>();
  for (const it of items)
    byScheduler.set(schedulerOf(it.job, shards), [...(byScheduler.get(schedulerOf(it.job, shards)) ?? []), it]);
  const answers = await Promise.all(
    [...byScheduler].map(([name, mine]) => env.TRANSPORT_QUEUE.getByName(name).leased(mine.map((i) => i.job.entryId))),
  );
  const live = new Set(answers.flat());
  for (const it of items) if (!live.has(it.job.entryId)) it.msg.ack();
  return items.filter((i) => live.has(i.job.entryId));
}

/**
 * The provider rule (worker/net/core/providers.ts) a resolved destination's MX hosts match, or
 * null; and the site its Destination DO is named after with DESTINATION_GROUPING = "site" (the
 * provider's, else the MX site), null otherwise. `stage` (the delivery agent, the invocation) shares
 * its read of the rules under way.
 */
export async function providerAndSite(
  env: Env,
  resolution: MxResolution | null,
  stage: object,
): Promise<{ provider: ProviderMatch | null; site: string | null }> {
  if (resolution?.kind !== "hosts") return { provider: null, site: null };
  const provider = matchProvider(
    await providerRulesOf(env, stage),
    resolution.hosts.map((h) => h.host),
  );
  return { provider, site: settingsOf(env).siteGrouping ? (provider?.rule.name ?? resolution.site) : null };
}

/** A domain nexthop's MX lookup (the mx kind); null for a relay nexthop. */
export async function lookupFor(nexthop: string, mx: () => MxContext): Promise<MxResolution | null> {
  return relayTarget(nexthop) || nexthop === CF_EMAIL_NEXTHOP ? null : mx().lookup(nexthop);
}

/** What a delivery stage (a consumer invocation, a delivery agent) keeps across its sessions: the TLS-RPT tally, and where background work goes. */
export interface StageExtras {
  tally: TlsRptTally;
  background(p: Promise<unknown>): void;
}

/** The MTA-STS and TLS-RPT context of an MX delivery (null without a stage to count in). */
async function stsContext(env: Env, domain: string, extras?: StageExtras) {
  if (!extras) return undefined;
  const info = await stsInfo(env, domain, extras, extras.background).catch((e: unknown) => {
    console.error(
      JSON.stringify({
        error: "MTA-STS lookup failed; delivering without a policy",
        domain,
        detail: e instanceof Error ? e.message : String(e),
      }),
    );
    return null;
  });
  return { info, tally: extras.tally };
}

/**
 * Sends the (leased) entries of one nexthop: to the relay kind's fixed host, or to MX hosts (with
 * the domain's MTA-STS policy); over a cached connection when the delivery agent passes its cache.
 */
export async function sendGroup(
  env: Env,
  jobs: DeliverJob[],
  resolution: MxResolution | null,
  mx: () => MxContext,
  known?: Map<string, DeliveryEnvelope | null>,
  cache?: SessionCache,
  provider?: ProviderMatch | null,
  extras?: StageExtras,
): Promise<SessionPart[]> {
  const nexthop = jobs[0]!.nexthop;
  const prepared = await prepareJobs(env, jobs, known);
  const target = relayTarget(nexthop);
  if (target) return runSession(env, target, prepared, cache ? { cache } : {});
  if (nexthop === CF_EMAIL_NEXTHOP) return sendViaEmailService(env, prepared);
  if (!resolution || !hasWork(prepared)) return unsentParts(prepared);
  if (resolution.kind !== "hosts") return lookupFailureParts(prepared, resolution);
  const sts = await stsContext(env, nexthop, extras);
  // An entry whose tenant, sending domain or provider has an egress pool leaves by it (pooled.ts).
  const pooled = await sendPooled(
    env,
    prepared,
    resolution.hosts,
    mx().settings,
    cache,
    provider?.rule,
    sts,
    extras?.background ?? ((p) => void p),
  );
  const parts =
    pooled ?? (await runMxSessions(env, resolution.hosts, prepared, mx().settings, cache, provider?.rule, sts));
  if (!provider) return parts;
  const shape = shapeOf(provider.rule);
  const egress = egressIdOf(env);
  return parts.map((p) => ({ ...p, provider: shape, egress: p.egress ?? egress }));
}

/**
 * Delivers one nexthop's entries in one session (per MX host tried) and records the results.
 * The MX lookup runs before the lease check, so an entry whose lease was taken back while the
 * resolver was slow is not sent.
 */
async function deliverGroup(
  env: Env,
  items: Item[],
  mx: () => MxContext,
  known: Map<string, DeliveryEnvelope | null> | undefined,
  extras: StageExtras,
): Promise<SyncState[]> {
  let parts: SessionPart[];
  let site: string | null = null;
  try {
    const resolution = await lookupFor(items[0]!.job.nexthop, mx);
    const found = await providerAndSite(env, resolution, extras);
    site = found.site;
    items = await liveItems(env, items);
    if (items.length === 0) return [];
    parts = await sendGroup(
      env,
      items.map((i) => i.job),
      resolution,
      mx,
      known,
      undefined,
      found.provider,
      extras,
    );
  } catch (e) {
    for (const it of items) fail(it.msg, "session", e);
    return [];
  }
  return finishParts(env, items.map(finishItem), parts, site);
}

/** The queue handler. */
export async function handleDeliverBatch(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const items: Item[] = [];
  for (const msg of batch.messages) {
    const job = parseJob(msg.body);
    if (job) items.push({ msg, job });
    else {
      console.error(JSON.stringify({ error: "deliver: malformed queue message", body: msg.body }));
      msg.ack();
    }
  }
  let mx: MxContext | null = null;
  const mxContext = (): MxContext => {
    if (mx) return mx;
    const settings = mxSettingsOf(env);
    mx = { settings, lookup: createMxLookup(settings) };
    return mx;
  };
  // Every envelope of the batch in one request per Outbox shard (not one per entry); should that
  // fail, each session reads its own and fails alone.
  const known = await readEnvelopes(
    env,
    items.map((i) => i.job.messageId),
  ).catch(() => undefined);
  const sessions = splitForSessions(groupByNexthop(items), MAX_SOCKETS);
  const later: Promise<unknown>[] = [];
  const extras: StageExtras = { tally: new TlsRptTally(), background: (p) => later.push(p) };
  const touched = await pool(
    sessions.map((g) => () => deliverGroup(env, g, mxContext, known, extras)),
    MAX_SOCKETS,
  );
  // The latest state of each message (a message may span sessions; the Outbox answered each).
  await Promise.all([
    indexMessages(env, latestStates(touched.flat())),
    extras.tally.flush(env),
    ...later.map((p) => p.catch(() => undefined)),
  ]);
}
