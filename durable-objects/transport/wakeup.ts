/**
 * When the Transport DO wakes, and what its alarm settles about the journal ring; read from the
 * core, the leases and its SQLite (nothing here sets an alarm).
 *
 * DESCRIPTION
 *   nextAlarmAt(qmgr, journal, leases, sql, env, done, armedAt)  the alarm time (ms) the shell
 *                 arms, or null: the earliest core wake-up, lease deadline, record to forget, idle
 *                 ring to empty, agent check or retry (an armed alarm shortly after a forget is
 *                 kept for it).
 *   settleRing(qmgr, journal, sql, env, done)     at an alarm: a checkpoint when finished
 *                 messages' records are due to go, the ring emptied with it when the queue is
 *                 idle, or an idle queue's ring emptied when nothing is left to forget.
 *
 * INVARIANTS
 *   No alarm is early: a core wake-up fires at the last millisecond of its second, and retries
 *   are due in ms. No command naming a finished message stays in the ring behind its records.
 */
import { nextWakeupAt, type Qmgr } from "../core";
import { settingsOf } from "../../worker/settings/settings";
import { nowSec } from "./delivery-state";
import { nextRetryDue } from "./retries";
import type { Journal } from "./journal";
import type { Leases } from "./leases";
import { admissionTtlSec, nextForgetAt, type StoredRecipient } from "./sqlite-source";
import type { DoneRecords } from "./done-records";

/**
 * When the next records are due to go (unix s): finished ones after their day, done ones after
 * their grace; or null. `grid`: the alarm for it, with the grace's end rounded up to the agent
 * check's grid (leases.ts nextCheck), so the alarm a dispatch arms for its agent check is the one
 * the grace needs too: a lone email's report does not move it (a setAlarm is a billed write).
 */
function forgetAt(sql: SqlStorage, env: Env, done: DoneRecords, grid = false): number | null {
  const finished = nextForgetAt(sql, admissionTtlSec(env));
  const step = grid ? settingsOf(env).agentCheckMs / 1000 : 0;
  const grace = done.nextAt === null || step === 0 ? done.nextAt : Math.ceil(done.nextAt / step) * step;
  return finished === null ? grace : grace === null ? finished : Math.min(finished, grace);
}

/**
 * The alarm time (ms) at the earliest core wake-up, lease deadline or retry, or null for none. A
 * core wake-up (a dead destination's revival, a rate's next token) fires at the last millisecond
 * of its second: the core counted it from the start of the second it decided in, so it is never
 * early. Records to forget are not urgent (they go at least their grace after they ended): an
 * alarm already armed (`armedAt`) no more than an agent check's step after their time is kept
 * for them, not moved earlier (a setAlarm is a billed write; a grace shorter than that step, as
 * a short retention makes it, moved a lone email's alarm at its report).
 */
export function nextAlarmAt(
  qmgr: Qmgr<StoredRecipient>,
  journal: Journal<StoredRecipient>,
  leases: Leases,
  sql: SqlStorage,
  env: Env,
  done: DoneRecords,
  armedAt: number | null = null,
): number | null {
  const check = settingsOf(env).agents ? leases.nextCheck(settingsOf(env).agentCheckMs) : null;
  const wake = nextWakeupAt(qmgr);
  const forget = forgetAt(sql, env, done, true);
  // Idle with rows in the ring and no record left to forget (the forget empties the ring): empty it in a minute.
  const idle = qmgr.messages.size === 0 && journal.dirty && forget === null ? nowSec() + 60 : null;
  // Seconds, but the retries' due times are in ms (a retry is never early).
  const urgent = [wake === null ? null : wake + 0.999, leases.nextUntil(), idle, check]
    .filter((t): t is number => t !== null)
    .map((t) => t * 1000);
  const retry = nextRetryDue(sql);
  if (retry !== null) urgent.push(retry);
  const first = urgent.length === 0 ? null : Math.round(Math.min(...urgent));
  if (forget === null) return first;
  const f = Math.round(forget * 1000);
  const step = settingsOf(env).agentCheckMs;
  const kept = armedAt !== null && armedAt >= f && armedAt - f <= step && (first === null || first >= armedAt);
  if (kept) return armedAt;
  return first === null ? f : Math.min(first, f);
}

/** At an alarm: checkpoints (or, idle, empties) the journal ring when finished messages' records are due to go. */
export function settleRing(
  qmgr: Qmgr<StoredRecipient>,
  journal: Journal<StoredRecipient>,
  sql: SqlStorage,
  env: Env,
  done: DoneRecords,
): void {
  // Finished messages' records are due to go: they go at a checkpoint (none is needed when no
  // command came after the last snapshot: journal.ts settle), and an idle queue's ring is emptied with it (no command naming a finished message stays behind its records).
  // Not on falling idle as such while a record waits to be forgotten: for mail that comes one
  // message at a time, that was a snapshot, the ring's deletes and an alarm per message, where
  // this checkpoint comes anyway. An idle queue with nothing left to forget empties its ring.
  const forget = forgetAt(sql, env, done);
  if (forget !== null && forget <= nowSec()) journal.settle(qmgr, qmgr.messages.size === 0);
  else if (forget === null && qmgr.messages.size === 0 && journal.dirty) journal.settle(qmgr, true);
}
