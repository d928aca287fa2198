/**
 * A Transport DO's deferred attempts waiting for their retry: as retry_due rows (delivery-state.ts
 * schema), or, for an attempt whose admission record is kept with a tiny core's snapshot, in that
 * record (admissions.ts `due`). Every reader takes both.
 *
 * DESCRIPTION
 *   retryDueMs(nextAttemptAt, now, nowMs)  when a deferred attempt is due, ms.
 *   scheduleRetry(sql, coreId, dueMs)      with the kept record, else as a row.
 *   dueRetries(sql, nowMs)                 attempts due (at most 100, earliest first).
 *   nextRetryDue(sql)                      the earliest due time, or null.
 *   flushRetries(sql, nowMs)               every retry due now (postqueue -f).
 *   retriesOf(sql, messageId)              a message's attempts waiting for a retry.
 *   dropWaiting(sql, messageId, now)       a message's attempts waiting outside the core taken out.
 *   deferredShape(sql, now)                the waiting recipients as qshape rows.
 */
import { shapeOf, type ShapeRow } from "../core";
import { parseCoreId } from "../../worker/model/delivery";
import { noteFinished } from "./sqlite-source";
import { admissionsOf, insertRetryRow } from "./admissions";
import { knownOf } from "./table-mins";
import { dropIncoming, forgetAttempt, incomingOf, pendingRecipients } from "./delivery-state";

/**
 * When a deferred attempt is due, ms: the core decided `nextAttemptAt` (whole seconds) at its
 * clock `now` (the second of `nowMs`), so the back-off it chose is counted from `nowMs` itself.
 */
export function retryDueMs(nextAttemptAt: number, now: number, nowMs: number): number {
  return Math.max(nextAttemptAt * 1000, nowMs + (nextAttemptAt - now) * 1000);
}

/** Schedules the next attempt of a deferred core message (due in ms): with its kept record, else as a row. */
export function scheduleRetry(sql: SqlStorage, coreId: string, dueMs: number): void {
  const kept = admissionsOf(sql);
  if (kept.defer(coreId, dueMs)) return;
  kept.materialize(sql, coreId); // the retry reads its record, and its final recipients, as rows
  insertRetryRow(sql, coreId, dueMs);
}

/** Core messages whose next attempt is due at `nowMs` (at most 100, earliest first). */
export function dueRetries(sql: SqlStorage, nowMs: number): string[] {
  const rows = sql
    .exec<{ core_id: string; due: number }>(
      "SELECT core_id, due FROM retry_due WHERE due <= ? ORDER BY due LIMIT 100",
      nowMs,
    )
    .toArray();
  const kept = admissionsOf(sql)
    .retries()
    .filter((r) => r.due! <= nowMs)
    .map((r) => ({ core_id: r.coreId, due: r.due! }));
  return [...rows, ...kept]
    .sort((a, b) => a.due - b.due)
    .slice(0, 100)
    .map((r) => r.core_id);
}

/** The earliest retry due time (ms), or null (rows through their index, or as known: table-mins.ts; and kept ones). */
export function nextRetryDue(sql: SqlStorage): number | null {
  const row = knownOf(sql).min(
    "retry_due",
    () => sql.exec<{ due: number }>("SELECT due FROM retry_due ORDER BY due LIMIT 1").toArray()[0]?.due ?? null,
    Date.now(),
  );
  const kept = admissionsOf(sql).nextDue();
  return kept === null ? row : row === null ? kept : Math.min(kept, row);
}

/** Makes every scheduled retry due now (postqueue -f; `nowMs` in ms). */
export function flushRetries(sql: SqlStorage, nowMs: number): void {
  sql.exec("UPDATE retry_due SET due = ? WHERE due > ?", nowMs, nowMs);
  knownOf(sql).changed("retry_due");
  admissionsOf(sql).flushDue(nowMs);
}

/** The core message ids of a message's attempts waiting for a retry. */
export function retriesOf(sql: SqlStorage, messageId: string): string[] {
  const rows = sql
    .exec<{ core_id: string }>("SELECT core_id FROM retry_due WHERE core_id = ?1 OR core_id LIKE ?1 || '#%'", messageId)
    .toArray()
    .map((r) => r.core_id);
  const kept = admissionsOf(sql)
    .retries()
    .map((r) => r.coreId)
    .filter((id) => parseCoreId(id).messageId === messageId);
  return [...rows, ...kept];
}

/**
 * Takes a message's attempts that wait outside the core (for room, or for a retry) out, for
 * hold and requeue: returns their open addresses and the highest attempt number among them.
 */
export function dropWaiting(sql: SqlStorage, messageId: string, now: number): { waiting: string[]; attempt: number } {
  const waiting: string[] = [];
  let attempt = 0;
  for (const coreId of [...incomingOf(sql, messageId), ...retriesOf(sql, messageId)]) {
    attempt = Math.max(attempt, parseCoreId(coreId).attempt);
    waiting.push(...pendingRecipients(sql, coreId).map((r) => r.address));
    dropIncoming(sql, coreId);
    forgetAttempt(sql, coreId);
    noteFinished(sql, coreId, now);
  }
  return { waiting, attempt };
}

/** Recipients waiting for a retry, by nexthop and message age, as qshape rows (TOTAL first). */
export function deferredShape(sql: SqlStorage, now: number): ShapeRow[] {
  // Recipients are rcpt rows, or JSON in the admission row (sqlite-source.ts recordAdmission).
  const rows = sql
    .exec<{ nexthop: string; create_time: number; n: number }>(
      `WITH r AS (
       SELECT d.core_id, r.idx, r.nexthop FROM retry_due d JOIN rcpt r ON r.message_id = d.core_id
       UNION ALL
       SELECT d.core_id, CAST(j.key AS INTEGER) AS idx, json_extract(j.value, '$.nexthop') AS nexthop
         FROM retry_due d JOIN admission a ON a.core_id = d.core_id, json_each(a.rcpts) j WHERE a.rcpts IS NOT NULL)
     SELECT r.nexthop AS nexthop, m.create_time AS create_time, count(*) AS n FROM r
       JOIN admission m ON m.core_id = r.core_id
       WHERE r.idx NOT IN (SELECT idx FROM final_rcpt f WHERE f.core_id = r.core_id)
       GROUP BY r.nexthop, m.create_time`,
    )
    .toArray();
  const kept = admissionsOf(sql)
    .retries()
    .flatMap((r) =>
      pendingRecipients(sql, r.coreId).map((p) => ({
        destination: p.nexthop,
        ageSec: Math.max(0, now - r.createTime),
        n: 1,
      })),
    );
  return shapeOf([
    ...rows.map((r) => ({ destination: r.nexthop, ageSec: Math.max(0, now - r.create_time), n: r.n })),
    ...kept,
  ]);
}
