/**
 * The Outbox's alarm: the sweeper's full runs, and between them the forwarding of events that
 * waited too long for the delivery stage's index write.
 *
 * DESCRIPTION
 *   OutboxAlarm.run(now)  one alarm; returns when the next is due (ms), or null for none.
 *     A full run (the first after a start, then whenever nextSweepAt said, or when nothing waits
 *     for the sweeper: then it is a few probes and a purge of what is due): re-triggers
 *     classification of lost messages, sends pending notices, sweeps one page of orphan
 *     bodies and one of messages an accept did not admit (unadmitted.ts) when a listing is due
 *     (the cron's wake), purges finished messages past their
 *     retention (found at the cron's wake: no alarm waits for a retention to end), and forwards
 *     lagging events.
 *     Every run first marks ready the messages admitted without the mark (unmarked.ts) whose
 *     index lag has passed.
 *     Between full runs (armed by Outbox.classify at INDEX_LAG_SECONDS when it left a
 *     message's index write to the delivery stage, and by recordOutcomes when a message
 *     finished): only the lagging events are forwarded, those of event rows and those that
 *     finished messages keep in their recipient rows (outbox-forward.ts).
 *   Forwarding hands the message ids to the classify queue, whose consumer writes the index
 *   and events (a message is handed over at most once per grace period while this object
 *   lives; after a restart once more, which changes nothing twice).
 *
 * INVARIANTS
 *   Each step reads through an index or the small table of unforwarded events: nothing per
 *   run grows with the number of messages the shard retains (the orphan sweep pages R2).
 */
import { dueForClassify, markClassifySent, unindexed } from "./classify-state";
import { nextScheduledAt } from "./scheduled";
import { nextLagAt, nextSweepAt, orphansDue, purgeFinished, sweepOrphanBodies, waitingAny } from "./sweep";
import { UnadmittedScan } from "./unadmitted";
import { ForwardWalk } from "./forward";
import { UnmarkedAdmissions } from "./unmarked";
import { settingsOf } from "../../worker/settings/settings";

type AlarmEnv = {
  BODIES: R2Bucket;
  DB: D1Database;
  OUTBOX_GRACE_SECONDS?: string;
  INDEX_LAG_SECONDS?: string;
  MESSAGE_RETENTION_DAYS?: string;
};

export class OutboxAlarm {
  /** When the next full run is due (ms); null after a start, so the first alarm is a full run. */
  private sweepAt: number | null = null;
  /** Messages handed to the classify queue for forwarding, with when. */
  private readonly forwarding = new Map<string, number>();
  /** When the walk of finished messages must run again (outbox-forward.ts), or null. */
  private walkAt: number | null = null;
  /** The walk of finished messages, and its cursor. */
  private readonly walk: ForwardWalk;
  /** The scan for messages the accept stored and did not admit (unadmitted.ts). */
  private readonly unadmitted = new UnadmittedScan();

  constructor(
    private readonly sql: SqlStorage,
    private readonly env: AlarmEnv,
    private readonly enqueue: (ids: string[]) => Promise<void>,
    private readonly sendNotices: (now: number) => Promise<string[]>,
    private readonly unmarked = new UnmarkedAdmissions(),
  ) {
    this.walk = new ForwardWalk(sql);
  }

  /** The next alarm is a full run (the cron's wake). */
  fullRunNext(): void {
    this.sweepAt = null;
  }

  /** One alarm (see the header); returns the next alarm time, or null. */
  async run(now: number): Promise<number | null> {
    const { graceMs: grace, retentionMs, indexLagMs } = settingsOf(this.env);
    // Admitted and still not reported on at their index lag: marked ready now, their email.queued
    // dated at admission, so the forwarding below takes it (unmarked.ts).
    this.unmarked.markDue(this.sql, now, indexLagMs);
    const lagging = await this.lagging(now, grace);
    // A run that finds nothing waiting is a full run at once (a few probes), and arms no other: the
    // purge comes with the cron's wake (sweep.ts nextSweepAt). A lone message's alarm: its lag.
    if (this.sweepAt === null || now >= this.sweepAt || !waitingAny(this.sql)) {
      // At the cron's wake: a page of the scan for messages an accept stored and did not admit.
      if (orphansDue(this.sql)) this.unadmitted.sweep(this.sql, now);
      const due = dueForClassify(this.sql, now, grace, 500);
      markClassifySent(this.sql, due, now);
      await this.enqueue([...new Set([...due, ...lagging])]);
      const notices = await this.sendNotices(now);
      if (notices.length > 0) await this.enqueue(notices);
      const orphans = await sweepOrphanBodies(this.sql, this.env.BODIES, now, grace);
      const purged = await purgeFinished(this.sql, this.env.BODIES, now, retentionMs, this.walk.cursor);
      const next = nextSweepAt(this.sql, now, grace);
      // A full page (orphans listed, or purged) may have more behind it: come back after a grace period.
      const again = orphans.listed > 0 || purged.length >= 500 ? now + grace : null;
      this.sweepAt = Math.min(next ?? Infinity, again ?? Infinity);
    } else {
      await this.enqueue(lagging);
    }
    const at = Math.min(
      this.sweepAt,
      nextLagAt(this.sql, indexLagMs) ?? Infinity,
      this.unmarked.nextAt(indexLagMs) ?? Infinity,
      this.walkAt ?? Infinity,
      nextScheduledAt(this.sql, now) ?? Infinity,
    );
    return Number.isFinite(at) ? Math.max(at, now + 1000) : null;
  }

  /**
   * Messages with events older than the index lag, not handed over within the last grace period,
   * and finished messages whose kept events waited as long (the walk hands each over once).
   */
  private async lagging(now: number, grace: number): Promise<string[]> {
    for (const [id, at] of this.forwarding) if (at <= now - grace) this.forwarding.delete(id);
    const ids = unindexed(this.sql, now, settingsOf(this.env).indexLagMs, 500).filter((id) => !this.forwarding.has(id));
    for (const id of ids) this.forwarding.set(id, now);
    const { indexLagMs, retentionMs } = settingsOf(this.env);
    const finished = await this.walk.walk(this.env.DB, now, indexLagMs, retentionMs).catch((e: unknown) => {
      console.error(
        JSON.stringify({
          error: "outbox: the walk of finished messages could not read D1 (walked again later)",
          detail: e instanceof Error ? e.message : String(e),
        }),
      );
      return { ids: [], next: now + settingsOf(this.env).indexLagMs };
    });
    this.walkAt = finished.next;
    return [...new Set([...ids, ...finished.ids])];
  }
}
