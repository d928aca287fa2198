/**
 * The Outbox sweeper's storage work: orphan bodies, bodies of finished messages, expired records.
 *
 * DESCRIPTION
 *   sweepOrphanBodies  lists one page of this shard's bodies in R2 (`mess/<hh>`, resuming from a
 *                      cursor kept in `meta`) and deletes those older than the grace period that
 *                      have no envelope: a request that stopped between the body write and the
 *                      envelope commit (qmail's mess/ without todo/). Only when a listing is due:
 *                      the cron's wake (every 10 minutes, ensureSweep) asks for one (markOrphansDue),
 *                      and a listing cut into pages goes on page by page; a message's own alarms
 *                      never list (an R2 list is a class A operation, $4.50 per million: a lone
 *                      message's alarms listed twice, at the sweep after its grace period and at
 *                      its purge). Orphans are rare (a stop between two writes) and cost only
 *                      R2 storage while they wait for the next wake.
 *   markOrphansDue     asks the next full run for a listing.
 *   deleteDoneBodies   deletes the bodies of those `among` the given messages that finished at
 *                      `nowMs` (in the change just made) and have no notice pending. Nothing
 *                      is written: finishing marked the body for deletion (finishIfDone), a
 *                      notice deletes its original's body once sent (outbox-dsn.ts), and the
 *                      purge deletes it again, so a delete lost in a crash only delays it.
 *   purgeFinished      forgets finished messages past their retention (every row they left in
 *                      this shard, and their bodies), through the index of finished messages,
 *                      at most `limit` per run; and expired idempotency records.
 *   indexLagMsOf       INDEX_LAG_SECONDS in ms (default 15 s): how long the events of a message
 *                      whose index write was left to the delivery stage (Outbox.classify) may
 *                      wait for it before the sweeper forwards them itself.
 *   nextLagAt          when the oldest event not yet forwarded reaches that lag; null when none.
 *   enqueueForClassify hands messages to the classify queue (to classify or index them), 100
 *                      to a queue message: queue operations are billed per message.
 *   nextSweepAt        when the sweeper must run next: a grace period from now while anything
 *                      waits for it (unclassified messages, unforwarded events, idempotency
 *                      records, notices), else null. Finished messages past their retention
 *                      are purged by the full run of the cron's wake (every 10 minutes, as
 *                      D1's rows are): an alarm of its own per message's purge was a billed
 *                      setAlarm and a request per lone email.
 *
 * INVARIANTS
 *   A body is only deleted when its message is done, or when it is older than the grace period
 *   and no envelope references it; accept refuses envelopes whose body is older than that, so a
 *   deleted orphan can never gain an envelope afterwards. Nothing the sweeper does per run grows
 *   with the number of messages the shard retains.
 */
import { purgeIdempotency } from "./schema";
import { getMeta, setMeta } from "./meta";
import { bodyKey, shardHex } from "../../worker/model/ids";
import type { ClassifyJob } from "../../worker/model/message";
import type { ForwardCursor } from "./forward";

const PAGE = 500;

/** Hands messages to the classify queue, 100 to a queue message (see the header). */
export async function enqueueForClassify(queue: Queue, ids: string[]): Promise<void> {
  for (let i = 0; i < ids.length; i += 100) {
    const chunk = ids.slice(i, i + 100);
    await queue.send((chunk.length === 1 ? { id: chunk[0]! } : { ids: chunk }) satisfies ClassifyJob, {
      contentType: "json",
    });
  }
}

/** When the oldest unforwarded event (an event row, or an open message's kept email.queued) is `lagMs` old, or null. */
export function nextLagAt(sql: SqlStorage, lagMs: number): number | null {
  const at = sql
    .exec<{ at: number | null }>(
      `SELECT min(t) AS at FROM (SELECT min(created_at) AS t FROM event
       UNION ALL SELECT min(json_extract(queued_event, '$.created_at')) FROM message WHERE waiting = 1 AND queued_event IS NOT NULL)`,
    )
    .one().at;
  return at === null ? null : at + lagMs;
}

/**
 * The SQLite of objects whose shard was found in meta (it never changes), so that an accept does
 * not read it again. Found, not written: a write inside a transaction that rolls back is undone.
 */
const SHARD_KEPT = new WeakSet<SqlStorage>();

/** Remembers which shard this object is (its bodies' key prefix). */
export function rememberShard(sql: SqlStorage, shard: number): void {
  if (SHARD_KEPT.has(sql)) return;
  if (getMeta(sql, "shard") === null) setMeta(sql, "shard", String(shard));
  else SHARD_KEPT.add(sql);
}

/** Asks the next full run for a listing of this shard's bodies (the cron's wake). */
export function markOrphansDue(sql: SqlStorage): void {
  if (getMeta(sql, "orphans_due") === null) setMeta(sql, "orphans_due", "1");
}

/** Whether a listing of orphan bodies is due or under way (the cron's wake asked for one). */
export function orphansDue(sql: SqlStorage): boolean {
  return getMeta(sql, "orphans_due") !== null || getMeta(sql, "orphan_cursor") !== null;
}

/** Deletes one page of orphan bodies when a listing is due (see the header); returns how many bodies the page listed. */
export async function sweepOrphanBodies(
  sql: SqlStorage,
  bucket: R2Bucket,
  nowMs: number,
  graceMs: number,
): Promise<{ listed: number; deleted: string[] }> {
  const shard = getMeta(sql, "shard");
  const cursor = getMeta(sql, "orphan_cursor");
  if (shard === null || (cursor === null && getMeta(sql, "orphans_due") === null)) return { listed: 0, deleted: [] };
  const page = await bucket.list({
    prefix: `mess/${shardHex(Number(shard))}`,
    limit: PAGE,
    ...(cursor ? { cursor } : {}),
  });
  const deleted: string[] = [];
  for (const obj of page.objects) {
    if (obj.uploaded.getTime() > nowMs - graceMs) continue;
    const id = obj.key.slice("mess/".length);
    const known = sql.exec<{ n: number }>("SELECT count(*) AS n FROM message WHERE id = ?", id).one().n > 0;
    if (!known) deleted.push(obj.key);
  }
  if (deleted.length > 0) await bucket.delete(deleted);
  setMeta(sql, "orphan_cursor", page.truncated ? page.cursor : null);
  if (!page.truncated) setMeta(sql, "orphans_due", null);
  return { listed: page.objects.length, deleted };
}

/** Deletes the bodies of the messages among `among` that finished at `nowMs`; returns their ids. */
export async function deleteDoneBodies(
  sql: SqlStorage,
  bucket: R2Bucket,
  among: readonly string[],
  nowMs: number,
): Promise<string[]> {
  // A message with a notice still to send keeps its body: the notice quotes its headers.
  const done = among.flatMap((id) =>
    sql
      .exec<{ id: string; body_r2: number; kept: number }>(
        "SELECT id, body_r2, body IS NOT NULL AS kept FROM message WHERE id = ? AND state = 'done' AND done_at = ? " +
          "AND id NOT IN (SELECT message_id FROM dsn_pending)",
        id,
        nowMs,
      )
      .toArray(),
  );
  // A body kept in the row normally went with the write that finished the message; one kept for
  // a notice goes now.
  for (const m of done)
    if (m.body_r2 === 0 && m.kept === 1) sql.exec("UPDATE message SET body = NULL WHERE id = ?", m.id);
  const inR2 = done.filter((m) => m.body_r2 === 1).map((m) => m.id);
  if (inR2.length > 0) await bucket.delete(inR2.map(bodyKey));
  return done.map((m) => m.id);
}

/**
 * Forgets finished messages older than `retentionMs` (rows and bodies) and expired idempotency
 * records; only messages up to `forwarded` (the walk of outbox-forward.ts passed them: the events
 * they keep in their rows are in D1).
 */
export async function purgeFinished(
  sql: SqlStorage,
  bucket: R2Bucket,
  nowMs: number,
  retentionMs: number,
  forwarded: ForwardCursor,
  limit = 500,
): Promise<string[]> {
  const rows = sql
    .exec<{ id: string; body_r2: number }>(
      `SELECT id, body_r2 FROM message WHERE state = 'done' AND done_at <= ?1 AND (done_at, id) <= (?2, ?3)
       AND id NOT IN (SELECT message_id FROM dsn_pending) ORDER BY done_at LIMIT ?4`,
      nowMs - retentionMs,
      forwarded.at,
      forwarded.id,
      limit,
    )
    .toArray();
  const old = rows.map((r) => r.id);
  for (const id of old) {
    for (const table of ["rcpt", "event", "control", "readmit", "complaint", "unsubscribe"])
      sql.exec(`DELETE FROM ${table} WHERE message_id = ?`, id);
    sql.exec("DELETE FROM message WHERE id = ?", id);
  }
  const inR2 = rows.filter((r) => r.body_r2 === 1).map((r) => r.id);
  if (inR2.length > 0) await bucket.delete(inR2.map(bodyKey));
  purgeIdempotency(sql, nowMs);
  return old;
}

/** Whether anything waits for the sweeper: unclassified messages or unforwarded events, idempotency records, notices. */
export function waitingAny(sql: SqlStorage): boolean {
  return [
    "SELECT 1 FROM message WHERE waiting = 1 LIMIT 1",
    "SELECT 1 FROM event LIMIT 1",
    "SELECT 1 FROM idem LIMIT 1",
    "SELECT 1 FROM dsn_pending LIMIT 1",
  ].some((q) => sql.exec(q).toArray().length > 0);
}

/** When the sweeper must run next (see the header), or null. */
export function nextSweepAt(sql: SqlStorage, nowMs: number, graceMs: number): number | null {
  return waitingAny(sql) ? nowMs + graceMs : null;
}
