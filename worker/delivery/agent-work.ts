/**
 * The work of one delivery agent object (worker/delivery/delivery-agent.ts, DELIVERY = "agents"):
 * the Transport DO hands it entries directly, of any of the destinations that share it (agentName),
 * and each starts its SMTP transaction at once, over a cached connection to its host when one is
 * idle (session-cache.ts; at most AGENT_SESSIONS connections open, idle ones included), instead of
 * waiting in the `deliver` queue for a batch to fill. An agent runs at most AGENT_SESSIONS
 * sessions at a time (a Durable Object may hold 6 outgoing connections; the rest are for its
 * Outbox, Transport, Destination, D1 and R2 calls); the Transport DO gives each agent no more
 * entries than that, so "in flight" means inside an SMTP session, as in Postfix.
 *
 * A report goes with reportAndTake: the Transport DO answers with the entries it gives this agent
 * next, so under load an agent is fed by its own reports, with no call per hand-off.
 *
 * Calls are batched adaptively across the agent's sessions (worker/lib/coalesce.ts): the
 * envelopes of the entries given in one answer are read in one request when they arrive, and
 * finished entries are recorded and reported at once when the agent is quiet, and together when
 * sessions finish while a call is out or within FINISH_LINGER_MS of each other. The Destination
 * DOs' feedback and the D1 index (with the webhook publication) are two more stages behind the
 * reports, each batching what arrives while it runs, so a report never waits for them; while other
 * sessions of the agent run they also wait AGENT_STAGE_MS to gather more, and an agent with nothing
 * else running writes at once unless the stage wrote less than AGENT_STAGE_MS ago (then at the end
 * of that interval): no timer keeps a lone email's agent awake. The index stage's acks to the
 * Outbox ride on the agent's next request to the same shard (pending-acks.ts).
 *
 * DESCRIPTION
 *   new AgentWork(env, keepAlive)   keepAlive(p) keeps the object alive until p settles.
 *   take(jobs)                      starts the entries (returns at once).
 *   holding(entryIds)               those of the entries this agent holds (held-entries.ts), and
 *                                   logs those held in one step for STUCK_LOG_MS. The Transport DO
 *                                   asks about entries leased for long and retries those nobody holds.
 *   idleSessions()                  cached connections held (tests and the dev view).
 *
 * INVARIANTS
 *   Each entry is reported once by this agent (Transport reports are idempotent by entry id,
 *   Outbox outcomes by attempt). An entry whose work fails before its outcome is recorded is left
 *   to its lease: the Transport DO reports it as crashed when the lease runs out and retries it,
 *   and recipients final in the Outbox are never sent again. A finish that fails is tried again
 *   FINISH_TRIES times, 2^n seconds apart, then left to the lease.
 */
import type { DeliveryEnvelope } from "../model/message";
import { AGENT_SESSIONS, type DeliverJob } from "../model/delivery";
import { Coalescer } from "../lib/coalesce";
import { lookupFor, providerAndSite, sendGroup, type MxContext, type StageExtras } from "./consumer";
import { TlsRptTally } from "../tls-policy/tlsrpt";
import { feedDestinations, finishAll, latestStates, type FinishItem, type Finished, type ReportVia } from "./finish";
import { indexMessages } from "../indexing/writes";
import { PendingAcks } from "../indexing/pending-acks";
import type { SyncState } from "../model/message";
import { createMxLookup, mxSettingsOf } from "./mx";
import { readEnvelopes, type SessionPart } from "./session";
import { SessionCache } from "./session-cache";
import { settingsOf } from "../settings/settings";
import { Ewma } from "../lib/ewma";
import { HeldEntries, STUCK_LOG_MS } from "./held-entries";

/** Times a failed finish is tried again before the entry is left to its lease. */
const FINISH_TRIES = 5;
/**
 * How long a finished entry waits for the agent's other sessions before it is recorded and
 * reported, ms, when one of them is likely to finish soon: the oldest still running has lasted
 * within twice that of the agent's typical session (a moving average of their lengths). Else the
 * entry goes at once (none running, or none about to finish: the wait would only hold the
 * server's session idle). Sessions that started together, as a burst's do, finish together and
 * go in one Outbox and one Transport request; it holds a session's next entry back by at most
 * this much. Shorter makes more, emptier requests (more CPU and DO requests per email); much
 * longer holds sessions idle (docs/delivery.md has the measurements). Against a server that paces
 * its replies (700 ms per RCPT, 7 sessions, so staggered) a wait whenever another session ran
 * made the server's session idle 60 ms between two transactions at the median, Postfix's 2 ms
 * (docs/real-traffic.md).
 */
const FINISH_LINGER_MS = 50;
/** How long MX answers are reused, ms. */
const MX_TTL_MS = 60_000;

interface Done {
  job: DeliverJob;
  part: SessionPart;
  site: string | null;
  tries: number;
}

export class AgentWork {
  private readonly cache = new SessionCache(Date.now, AGENT_SESSIONS);
  /** Event acks riding on this agent's next Outbox request to their shard (pending-acks.ts). */
  private readonly acks: PendingAcks;
  private readonly envelopes: Coalescer<string, DeliveryEnvelope | null>;
  private readonly finisher: Coalescer<Done, null>;
  /** The Destination DOs' feedback and the D1 index run behind the reports, in batches of their own. */
  private readonly feedback: Coalescer<{ finished: Finished[]; site: string | null }, null>;
  private readonly index: Coalescer<SyncState[], null>;
  private active = 0;
  /** Entries taken and not yet reported, given up or left to their lease, and where each waits. */
  private readonly held = new HeldEntries();
  private readonly waiting: (() => void)[] = [];
  private mx: (MxContext & { at: number }) | null = null;
  /** TLS-RPT counts, written with the feedback stage. */
  private readonly extras: StageExtras;
  /** How long this agent's sessions last lately, ms, and when each running one started. */
  private readonly sessionMs = new Ewma();
  private readonly running = new Map<number, number>();
  private runs = 0;

  constructor(
    private readonly env: Env,
    private readonly keepAlive: (p: Promise<unknown>) => void,
  ) {
    // Idle means no session running and no connection kept for more: then no request is coming.
    const stageMs = settingsOf(env).agentStageMs;
    this.extras = { tally: new TlsRptTally(), background: keepAlive };
    // Nagle's rule for the stages: while other sessions run (more is coming) a stage gathers for
    // stageMs; an idle agent's stage writes at once if it has not written within stageMs, else at
    // the end of that interval (a stream of lone retries writes once per interval, a lone email at once).
    const last = { feedback: -Infinity, index: -Infinity };
    const gather = (stage: keyof typeof last) => () => {
      const wait = this.active > 0 ? stageMs : Math.max(0, last[stage] + stageMs - Date.now());
      last[stage] = Date.now() + wait;
      return wait;
    };
    this.acks = new PendingAcks(env, keepAlive, () => this.active > 0 || this.cache.size() > 0);
    this.envelopes = new Coalescer(async (ids) => {
      const found = await readEnvelopes(env, [...new Set(ids)], this.acks);
      return ids.map((id) => found.get(id) ?? null);
    });
    this.finisher = new Coalescer(
      async (done) => {
        await this.finish(done);
        return done.map(() => null);
      },
      () => (this.finishSoon(Date.now()) ? FINISH_LINGER_MS : 0),
    );
    this.feedback = new Coalescer(async (batches) => {
      const bySite = new Map<string | null, Finished[]>();
      for (const b of batches) bySite.set(b.site, [...(bySite.get(b.site) ?? []), ...b.finished]);
      for (const [site, finished] of bySite) await feedDestinations(env, finished, site);
      await this.extras.tally.flush(env);
      return batches.map(() => null);
    }, gather("feedback"));
    this.index = new Coalescer(async (batches) => {
      await indexMessages(env, latestStates(batches.flat()), this.acks);
      return batches.map(() => null);
    }, gather("index"));
  }

  /** Starts the entries; each runs on its own session slot. */
  take(jobs: DeliverJob[]): void {
    for (const job of jobs) {
      this.held.take(job.entryId);
      // Asked for now, all of them in this tick: one Outbox request for the jobs of one answer.
      const envelope = this.envelopes.add(job.messageId);
      envelope.catch(() => undefined); // awaited (and its failure handled) in run
      this.keepAlive(this.run(job, envelope));
    }
  }

  holding(entryIds: readonly number[]): number[] {
    const held = entryIds.filter((id) => this.held.has(id));
    for (const s of this.held.stuck(held, STUCK_LOG_MS))
      console.warn(JSON.stringify({ warning: "agent: entry held in one step for long", ...s }));
    return held;
  }

  /** Cached connections held now. */
  idleSessions(): number {
    return this.cache.size();
  }

  private async run(job: DeliverJob, envelope: Promise<DeliveryEnvelope | null>): Promise<void> {
    await this.acquire();
    const [run, started] = [++this.runs, Date.now()];
    this.running.set(run, started);
    const step = (name: string) => this.held.step(job.entryId, name);
    let done: Done;
    try {
      step("mx lookup");
      const resolution = await lookupFor(job.nexthop, () => this.mxContext());
      step("provider rules");
      const { provider, site } = await providerAndSite(this.env, resolution, this);
      step("envelope");
      const known = new Map([[job.messageId, await envelope]]);
      step("session");
      const [part] = await sendGroup(
        this.env,
        [job],
        resolution,
        () => this.mxContext(),
        known,
        this.cache,
        provider,
        this.extras,
      );
      done = { job, part: part!, site, tries: 0 };
    } catch (e) {
      console.error(
        JSON.stringify({
          error: "agent: delivery failed (left to its lease)",
          entryId: job.entryId,
          detail: e instanceof Error ? e.message : String(e),
        }),
      );
      this.held.drop(job.entryId);
      return;
    } finally {
      this.running.delete(run);
      this.release();
    }
    this.sessionMs.add(Date.now() - started);
    step("finish");
    await this.finisher.add(done).catch((e: unknown) => this.again(done, "finish", e));
  }

  /**
   * Records and reports finished entries (the Transport DO can dispatch again as soon as this
   * returns); their destination feedback and index writes are handed to stages of their own.
   */
  private async finish(done: Done[]): Promise<void> {
    const bySite = new Map<string | null, Done[]>();
    for (const d of done) bySite.set(d.site, [...(bySite.get(d.site) ?? []), d]);
    for (const [site, group] of bySite) {
      const items: FinishItem[] = group.map((d) => ({
        job: d.job,
        ack: () => this.held.drop(d.job.entryId),
        retry: (stage, e) => this.again(d, stage, e),
      }));
      // The Transport DO answers with the entries it gives this agent next: no call of their own.
      const agent = group[0]!.job.agent;
      const report: ReportVia = async (transport, reports) => {
        const { answers, jobs } = await transport.reportAndTake(reports, agent);
        this.take(jobs);
        return answers;
      };
      const { finished, changed } = await finishAll(
        this.env,
        items,
        group.map((d) => d.part),
        report,
        this.acks,
      );
      // Both never reject (each logs its own failure; the index hands its writes to the classify queue).
      this.keepAlive(this.feedback.add({ finished, site }));
      if (changed.length > 0) this.keepAlive(this.index.add(changed));
    }
  }

  /** A finish that failed goes again later, FINISH_TRIES times at most. */
  private again(d: Done, stage: string, e: unknown): void {
    const detail = e instanceof Error ? e.message : String(e);
    if (d.tries >= FINISH_TRIES) {
      console.error(
        JSON.stringify({ error: `agent: ${stage} failed, left to the lease`, entryId: d.job.entryId, detail }),
      );
      this.held.drop(d.job.entryId);
      return;
    }
    console.error(JSON.stringify({ error: `agent: ${stage} failed, tried again`, entryId: d.job.entryId, detail }));
    const next = { ...d, tries: d.tries + 1 };
    this.held.step(d.job.entryId, `finish, try ${next.tries + 1}`);
    this.keepAlive(
      new Promise<void>((resolve) =>
        setTimeout(
          () => {
            this.finisher
              .add(next)
              .catch((err: unknown) => this.again(next, "finish", err))
              .finally(resolve);
          },
          1000 * 2 ** d.tries,
        ),
      ),
    );
  }

  /** Whether a running session is likely to finish soon: within twice FINISH_LINGER_MS of its typical length (see there). */
  private finishSoon(nowMs: number): boolean {
    if (this.running.size === 0) return false;
    let oldest = nowMs;
    for (const t of this.running.values()) oldest = Math.min(oldest, t);
    return this.sessionMs.value() - (nowMs - oldest) <= 2 * FINISH_LINGER_MS;
  }

  private mxContext(): MxContext {
    if (this.mx && Date.now() - this.mx.at < MX_TTL_MS) return this.mx;
    const settings = mxSettingsOf(this.env, this);
    this.mx = { settings, lookup: createMxLookup(settings), at: Date.now() };
    return this.mx;
  }

  private async acquire(): Promise<void> {
    if (this.active < AGENT_SESSIONS) {
      this.active++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.active--;
  }
}
