/**
 * The delivery stage's outcomes in the Outbox (Outbox.recordOutcomes): several messages of the
 * shard, one transaction.
 *
 * DESCRIPTION
 *   recordOutcomesIn(o, items, indexedByCaller, acks)   applies each message's reports
 *                 (outcomes.ts applyOutcomes; with DSN_NOTICES, a bounce notice planned in the same
 *                 transaction), counts them (tally.ts), lets them leave the inflow meter and the
 *                 unmarked admissions, then runs the change's follow-up (after-change.ts). Returns
 *                 per item how many reports applied, whether the message is done, and (with
 *                 `indexedByCaller`) the state to index.
 *
 * INVARIANTS
 *   `acks` (events written to D1) are forgotten first, as ackEventsMany would. A message that
 *   finished keeps its last events in its rows: the sweeper forwards them unless acknowledged in
 *   time.
 */
import { afterChange } from "./after-change";
import { planDsn } from "./dsn";
import { deleteEvents } from "./events";
import type { OutboxIntake } from "./intake";
import { applyOutcomes } from "./outcomes";
import type { OutcomeTally } from "./tally";
import type { EventAck, OutcomeReport, SyncState } from "../../worker/model/message";
import { settingsOf } from "../../worker/settings/settings";

/** What of the Outbox recording outcomes uses. */
export interface OutcomeSide {
  storage: DurableObjectStorage;
  /** Read at each call: the object's env, which tests may swap. */
  env: () => Env;
  tally: OutcomeTally;
  intake: OutboxIntake;
  syncState: (id: string, now: number) => SyncState | null;
}

export async function recordOutcomesIn(
  o: OutcomeSide,
  items: { id: string; reports: OutcomeReport[] }[],
  indexedByCaller: boolean,
  acks: EventAck[],
): Promise<{ applied: number; done: boolean; sync: SyncState | null }[]> {
  const now = Date.now();
  const sql = o.storage.sql;
  const dsn = settingsOf(o.env()).dsnNotices;
  deleteEvents(sql, acks); // ackEventsMany, riding along
  const results = o.storage.transactionSync(() =>
    items.map(({ id, reports }) => {
      const r = applyOutcomes(sql, id, reports, now, dsn);
      if (dsn) planDsn(sql, id, r.applied, now);
      return r;
    }),
  );
  const applied = results.map((r) => r.applied.length);
  for (const r of results) o.tally.count(r.applied);
  const doneIds = new Set(items.filter((_, i) => results[i]!.done).map((x) => x.id)); // an id twice: done after both
  const done = items.map(({ id }) => doneIds.has(id));
  o.intake.flow.leave(
    applied.reduce((n, a) => n + a, 0),
    Math.floor(now / 1000),
  );
  const touched = items.filter((_, i) => applied[i]! > 0).map((x) => x.id);
  for (const id of touched) o.intake.unmarked.forget(id); // marked by its outcome's write
  // Only a message that just finished with its body in R2 or kept for a notice has a body to delete.
  const bodies = items.filter((_, i) => results[i]!.bodyLeft).map((x) => x.id);
  if (touched.length > 0)
    await afterChange(
      o.storage,
      o.env(),
      now,
      bodies,
      indexedByCaller ? [] : touched,
      done.some((d, i) => d && applied[i]! > 0),
    );
  // The caller that indexes gets the state to index with the answer (no second call to read it).
  return items.map(({ id }, i) => ({
    applied: applied[i]!,
    done: done[i]!,
    sync: indexedByCaller && applied[i]! > 0 ? o.syncState(id, now) : null,
  }));
}
