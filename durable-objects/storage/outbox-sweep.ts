/**
 * The Outbox sweeper's storage work: orphan bodies, bodies of finished messages, expired records.
 *
 * DESCRIPTION
 *   sweepOrphanBodies  lists one page of this shard's bodies in R2 (`mess/<hh>`, resuming from a
 *                      cursor kept in `meta`) and deletes those older than the grace period that
 *                      have no envelope: a request that stopped between the body write and the
 *                      envelope commit (qmail's mess/ without todo/).
 *   deleteDoneBodies   deletes the bodies of messages whose recipients are all final (every
 *                      such message, or only those `among` the given ids).
 *   purgeFinished      forgets finished messages past their retention, and expired idempotency
 *                      records.
 *   hasOpenWork        whether the shard still holds anything the sweeper must come back for.
 *
 * INVARIANTS
 *   A body is only deleted when its message is done, or when it is older than the grace period
 *   and no envelope references it; accept refuses envelopes whose body is older than that, so a
 *   deleted orphan can never gain an envelope afterwards.
 */
import { purgeIdempotency } from "./outbox-schema";
import { bodyKey, shardHex } from "./outbox-ids";

const PAGE = 500;

function getMeta(sql: SqlStorage, key: string): string | null {
  return sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = ?", key).toArray()[0]?.value ?? null;
}

function setMeta(sql: SqlStorage, key: string, value: string | null): void {
  if (value === null) sql.exec("DELETE FROM meta WHERE key = ?", key);
  else sql.exec("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", key, value);
}

/** Remembers which shard this object is (its bodies' key prefix). */
export function rememberShard(sql: SqlStorage, shard: number): void {
  if (getMeta(sql, "shard") === null) setMeta(sql, "shard", String(shard));
}

/** Deletes one page of orphan bodies; returns how many bodies the page listed. */
export async function sweepOrphanBodies(sql: SqlStorage, bucket: R2Bucket, nowMs: number, graceMs: number): Promise<{ listed: number; deleted: string[] }> {
  const shard = getMeta(sql, "shard");
  if (shard === null) return { listed: 0, deleted: [] };
  const cursor = getMeta(sql, "orphan_cursor");
  const page = await bucket.list({ prefix: `mess/${shardHex(Number(shard))}`, limit: PAGE, ...(cursor ? { cursor } : {}) });
  const deleted: string[] = [];
  for (const obj of page.objects) {
    if (obj.uploaded.getTime() > nowMs - graceMs) continue;
    const id = obj.key.slice("mess/".length);
    const known = sql.exec<{ n: number }>("SELECT count(*) AS n FROM message WHERE id = ?", id).one().n > 0;
    if (!known) deleted.push(obj.key);
  }
  if (deleted.length > 0) await bucket.delete(deleted);
  setMeta(sql, "orphan_cursor", page.truncated ? page.cursor : null);
  return { listed: page.objects.length, deleted };
}

/** Deletes the bodies of finished messages; returns the message ids whose bodies went. */
export async function deleteDoneBodies(sql: SqlStorage, bucket: R2Bucket, limit = 500, among: readonly string[] | null = null): Promise<string[]> {
  // A message with a notice still to send keeps its body: the notice quotes its headers.
  const DONE = "state = 'done' AND body_deleted = 0 AND id NOT IN (SELECT message_id FROM dsn_pending)";
  const ids = among === null
    ? sql.exec<{ id: string }>(`SELECT id FROM message WHERE ${DONE} LIMIT ?`, limit).toArray().map((r) => r.id)
    : among.filter((id) => sql.exec(`SELECT 1 FROM message WHERE id = ? AND ${DONE}`, id).toArray().length > 0).slice(0, limit);
  if (ids.length === 0) return ids;
  await bucket.delete(ids.map(bodyKey));
  for (const id of ids) sql.exec("UPDATE message SET body_deleted = 1 WHERE id = ?", id);
  return ids;
}

/** Forgets finished messages older than `retentionMs` and expired idempotency records. */
export function purgeFinished(sql: SqlStorage, nowMs: number, retentionMs: number): void {
  const old = sql.exec<{ id: string }>("SELECT id FROM message WHERE state = 'done' AND body_deleted = 1 AND done_at <= ? LIMIT 500", nowMs - retentionMs).toArray();
  for (const { id } of old) {
    sql.exec("DELETE FROM rcpt WHERE message_id = ?", id);
    sql.exec("DELETE FROM event WHERE message_id = ?", id);
    sql.exec("DELETE FROM message WHERE id = ?", id);
  }
  purgeIdempotency(sql, nowMs);
}

/** True while the shard holds open messages, unforwarded events or idempotency records. */
export function hasOpenWork(sql: SqlStorage): boolean {
  const q = `SELECT (SELECT count(*) FROM message WHERE state = 'open' OR body_deleted = 0)
           + (SELECT count(*) FROM event) + (SELECT count(*) FROM idem) + (SELECT count(*) FROM dsn_pending) AS n`;
  return sql.exec<{ n: number }>(q).one().n > 0;
}
