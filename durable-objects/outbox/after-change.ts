/**
 * What follows a change to an Outbox's messages: pending notices sent, finished messages'
 * bodies deleted, the changed messages handed to the classify queue, and the alarm re-armed.
 *
 * DESCRIPTION
 *   afterChange(storage, env, now, touched, index, lagging)   the whole follow-up of a change.
 *   sendNotices(storage, env, now)    composes and stores pending notices (dsn.ts); logs and
 *                                     keeps them for the sweeper on failure.
 *   armSweep(storage, env, now)       the alarm at the next scheduled message, or one grace
 *                                     period or index lag from now, whichever is sooner.
 *   armAt(storage, at)                moves the alarm earlier to `at`, never later.
 *
 * INVARIANTS
 *   Only the messages named are looked at, by key: the work per change does not grow with the
 *   shard's backlog (the sweeper scans). A setAlarm is a billed write: it is written only when
 *   the alarm moves earlier.
 */
import { settingsOf } from "../../worker/settings/settings";
import { dueAmong, markClassifySent } from "./classify-state";
import { sendPendingDsns } from "./dsn";
import { nextScheduledAt } from "./scheduled";
import { deleteDoneBodies, enqueueForClassify } from "./sweep";

/**
 * After a change to the `touched` messages: send notices, delete the bodies of those now done,
 * hand `index` (and new notices) to the classify queue, re-arm (with `lagging`, by the index lag:
 * the delivery stage indexes messages admitted to an active queue; should it not do so soon, the
 * sweeper forwards their events). Only these messages are looked at, by key: the work per change
 * does not grow with the shard's backlog (the sweeper scans).
 */
export async function afterChange(
  storage: DurableObjectStorage,
  env: Env,
  now: number,
  touched: string[],
  index: string[] = touched,
  lagging = false,
): Promise<void> {
  const sql = storage.sql;
  const changed = [...index, ...(await sendNotices(storage, env, now))];
  await deleteDoneBodies(sql, env.BODIES, touched, now);
  markClassifySent(sql, dueAmong(sql, changed, now), now);
  await enqueueForClassify(env.CLASSIFY, changed);
  await armSweep(storage, env, now);
  if (lagging) await armAt(storage, now + settingsOf(env).indexLagMs);
}

/** Composes and stores pending notices as new messages (dsn.ts); logs and keeps them on failure. */
export async function sendNotices(storage: DurableObjectStorage, env: Env, now: number): Promise<string[]> {
  try {
    return await sendPendingDsns(storage, env.BODIES, settingsOf(env).heloName, now);
  } catch (e) {
    console.error(
      JSON.stringify({
        error: "outbox: sending a delivery status notice failed (kept for the sweeper)",
        detail: e instanceof Error ? e.message : String(e),
      }),
    );
    return [];
  }
}

/**
 * Arms the alarm at the next scheduled message, or one grace period or index lag from now
 * (whichever is sooner): a message admitted at once arms its lag anyway (afterChange), so the
 * accept's alarm is the same one, written once.
 */
export async function armSweep(storage: DurableObjectStorage, env: Env, now: number): Promise<void> {
  const { graceMs, indexLagMs } = settingsOf(env);
  await armAt(
    storage,
    Math.min(nextScheduledAt(storage.sql, now) ?? Infinity, now + Math.max(Math.min(graceMs, indexLagMs), 1000)),
  );
}

/** Moves the alarm earlier to `at` (a setAlarm is a billed write: only when it moves). */
export async function armAt(storage: DurableObjectStorage, at: number): Promise<void> {
  const cur = await storage.getAlarm();
  if (cur === null || at < cur) await storage.setAlarm(at);
}
