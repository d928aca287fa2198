/**
 * The classify stage's bookkeeping in the Outbox's SQLite: which messages are due for
 * classification, the decisions recorded before admission, and incoming → ready once admitted.
 *
 * DESCRIPTION
 *   claimClassifyWork    a due, open message's still-`incoming` recipients and their decisions.
 *   recordDecisions      the classify stage's resolution, stored before admission; suppressed
 *                        recipients end `suppressed`.
 *   markReady            incoming → ready once admitted (the message's `unclassified` cleared,
 *                        email.queued kept in the same write, forward.ts; its decided
 *                        recipients read as ready). Both only ever move `incoming` recipients,
 *                        so a repeated classification changes nothing.
 *   dueAmong             which of some messages are due for classification now (after a change).
 *   dueForClassify / unindexed / markClassifySent   the sweeper's re-trigger lists: messages
 *                        never classified, and messages whose events never reached D1.
 *
 * INVARIANTS
 *   As store.ts: every status change writes its event in the same transaction.
 */
import { admissionId, controlOf } from "./control";
import { type ClassifyResult, type ClassifyWork } from "../../worker/model/message";
import { insertEvent, recordEvent, type KeptEvent } from "./events";
import { readHead, readMessage, readWithSummary, updateUnclassified } from "./store";
import { finishIfDone } from "./finish";
import { execRcpt } from "./rcpt";

/**
 * What classification and the Transport DO's pickup policies need of a message's summary: bulk
 * mail and its topic, the campaign tag, the tags. The summary may hold its text and HTML (up to
 * 256 KiB), so it is not parsed for a message that has neither unsubscribe nor tags (JSON.stringify
 * writes `"bulk":true` and `"tags":null` exactly so; inside a string value a quote is escaped);
 * otherwise SQLite reads the two fields.
 */
function policyFieldsOf(
  sql: SqlStorage,
  id: string,
  summary: string,
): Pick<ClassifyWork, "bulk" | "campaign" | "tags"> {
  const bulk = summary.includes('"bulk":true');
  if (!bulk && summary.includes('"tags":null')) return {};
  const row = sql
    .exec<{ topic: string | null; tags: string | null }>(
      "SELECT json_extract(summary, '$.unsubscribe_topic') AS topic, json_extract(summary, '$.tags') AS tags FROM message WHERE id = ?",
      id,
    )
    .one();
  const tags = row.tags === null ? [] : (JSON.parse(row.tags) as { name: string; value: string }[]);
  const campaign = tags.find((t) => t.name === "campaign")?.value;
  return {
    ...(bulk ? { bulk: { topic: row.topic } } : {}),
    ...(campaign !== undefined ? { campaign } : {}),
    ...(tags.length > 0 ? { tags } : {}),
  };
}

/** A due, open message's still-incoming recipients with any recorded decision, or null. */
export function claimClassifyWork(sql: SqlStorage, id: string, nowMs: number): ClassifyWork | null {
  const m = readWithSummary(sql, id);
  if (!m || m.state !== "open" || m.unclassified === 0 || (m.scheduled_at !== null && m.scheduled_at > nowMs))
    return null;
  if (controlOf(sql, id)?.action === "hold") return null; // held: nothing is admitted until released
  const rcpts = sql
    .exec<{ idx: number; address: string; transport: string | null; nexthop: string | null }>(
      "SELECT idx, address, transport, nexthop FROM rcpt_all WHERE message_id = ? AND status = 'incoming' ORDER BY idx",
      id,
    )
    .toArray();
  if (rcpts.length === 0) return null;
  const admitId = admissionId(sql, id);
  return {
    id,
    tenant: m.tenant,
    createdAt: m.created_at,
    mailFrom: m.mail_from,
    rcpts,
    ...(admitId !== id ? { admitId } : {}),
    ...policyFieldsOf(sql, id, m.summary),
  };
}

/**
 * Records the classify stage's decisions for undecided incoming recipients: suppressed ones end
 * `suppressed`; the rest keep `incoming` with their rewritten address, transport and nexthop, so
 * a retry admits exactly the same recipients to the same transports (qmail writes info/ and
 * remote/ before it deletes todo/). Returns whether the message finished (every recipient suppressed).
 */
export function recordDecisions(sql: SqlStorage, id: string, results: ClassifyResult[], nowMs: number): boolean {
  let tenant: string | null = null; // read only for a suppression's event
  let open = false; // a recipient decided `ready` here stays open: the message cannot finish
  for (const r of results) {
    if (r.status === "ready") {
      open =
        execRcpt(
          sql,
          "UPDATE {T} SET {address} = ?, {transport} = ?, {nexthop} = ?, {updated_at} = ? " +
            "WHERE {id} = ? AND {idx} = ? AND {status} = 'incoming' AND {transport} IS NULL",
          r.address,
          r.transport,
          r.nexthop,
          nowMs,
          id,
          r.idx,
        ) > 0 || open;
      continue;
    }
    const written = execRcpt(
      sql,
      "UPDATE {T} SET {status} = 'suppressed', {address} = ?, {blocked_by} = 'suppressed', {updated_at} = ? " +
        "WHERE {id} = ? AND {idx} = ? AND {status} = 'incoming' AND {transport} IS NULL",
      r.address,
      nowMs,
      id,
      r.idx,
    );
    if (written > 0)
      recordEvent(sql, {
        message_id: id,
        tenant: (tenant ??= readMessage(sql, id)!.tenant),
        type: "email.suppressed",
        recipient: r.address,
        created_at: nowMs,
        data: { reason: r.reason },
      });
  }
  updateUnclassified(sql, id);
  return !open && finishIfDone(sql, id, nowMs);
}

/**
 * incoming → ready for decided recipients admitted to their Transport DO; returns how many moved.
 * No recipient row is rewritten: the message's `unclassified` goes to 0 (one row, which the
 * index of unclassified messages needed anyway), and a decided `incoming` recipient of an
 * admitted message reads as `ready` (readView). `idxs` is the whole plan of claimClassifyWork,
 * so every decided recipient was admitted; an undecided one keeps the message unclassified.
 */
export function markReady(sql: SqlStorage, id: string, idxs: number[], nowMs: number): number {
  const m = readHead(sql, id);
  if (!m || m.unclassified === 0) return 0;
  const wanted = new Set(idxs);
  const again = m.again === 1; // released or requeued: email.queued was said already
  const moved = sql
    .exec<{ idx: number; address: string; transport: string; nexthop: string }>(
      "SELECT idx, address, transport, nexthop FROM rcpt_all WHERE message_id = ? AND status = 'incoming' AND transport IS NOT NULL ORDER BY idx",
      id,
    )
    .toArray()
    .filter((r) => wanted.has(r.idx));
  // One email.queued row for all of them; for more than one it names no recipient and lists them
  // (publication expands it to one email.sent each): a row per recipient was written and deleted again.
  // The message leaving `unclassified` keeps email.queued in that write (its row stays in the
  // index of waiting messages until the event is forwarded); else it is an event row.
  const [one] = moved;
  const e =
    !again && one
      ? {
          message_id: id,
          tenant: m.tenant,
          type: "email.queued",
          recipient: moved.length === 1 ? one.address : null,
          created_at: nowMs,
          data:
            moved.length === 1
              ? { transport: one.transport, nexthop: one.nexthop }
              : { recipients: moved.map((r) => r.address) },
        }
      : null;
  const last = m.last_seq;
  const kept = e
    ? JSON.stringify({
        seq: Math.max(last + 1, nowMs * 1000),
        type: e.type,
        created_at: nowMs,
        data: e.data,
        recipient: e.recipient,
      } satisfies KeptEvent)
    : null;
  // Keeping email.queued, the message must be waiting (in the index) until it is forwarded. One
  // the accept admitted (store.ts `admitting`) is not yet; an unclassified one otherwise is, and
  // `waiting` is not assigned then (assigning it, even unchanged, would rewrite the index entry).
  const set =
    kept === null
      ? "waiting = (queued_event IS NOT NULL)"
      : m.waiting === 1
        ? "queued_event = ?2"
        : "queued_event = ?2, waiting = 1";
  const ready =
    sql.exec(
      `UPDATE message SET unclassified = 0, ${set}
       WHERE id = ?1 AND unclassified = 1 AND NOT EXISTS (SELECT 1 FROM rcpt_all WHERE message_id = ?1 AND status = 'incoming' AND transport IS NULL)`,
      ...(kept !== null ? [id, kept] : [id]),
    ).rowsWritten > 0;
  if (e && !ready) insertEvent(sql, e, last);
  return moved.length;
}

/**
 * Puts messages the accept kept out of the index of waiting messages (store.ts `admitting`) into
 * it, when their admission failed: the sweeper then classifies them again after the grace period.
 */
export function keepWaiting(sql: SqlStorage, ids: readonly string[]): void {
  for (const id of ids)
    sql.exec("UPDATE message SET waiting = 1 WHERE id = ? AND waiting = 0 AND unclassified = 1 AND state = 'open'", id);
}

/** The condition "classification is due and was not triggered since ?1", for the two queries below. */
const DUE_FOR_CLASSIFY = `waiting = 1 AND unclassified = 1 AND state = 'open' AND (
       (scheduled_at IS NULL AND COALESCE(classify_sent_at, created_at) <= ?1)
       OR (scheduled_at IS NOT NULL AND scheduled_at <= ?2
           AND (classify_sent_at IS NULL OR classify_sent_at < scheduled_at OR classify_sent_at <= ?1)))`;

/** Open messages whose classification is due and was not triggered within `graceMs`. */
export function dueForClassify(sql: SqlStorage, nowMs: number, graceMs: number, limit: number): string[] {
  return sql
    .exec<{ id: string }>(
      `SELECT id FROM message WHERE ${DUE_FOR_CLASSIFY} ORDER BY created_at LIMIT ?3`,
      nowMs - graceMs,
      nowMs,
      limit,
    )
    .toArray()
    .map((r) => r.id);
}

/** Those of `ids` whose classification is due now (each looked up by its key, never a scan). */
export function dueAmong(sql: SqlStorage, ids: readonly string[], nowMs: number): string[] {
  return ids.filter(
    (id) =>
      sql.exec(`SELECT 1 FROM message WHERE id = ?3 AND ${DUE_FOR_CLASSIFY}`, nowMs, nowMs, id).toArray().length > 0,
  );
}

/**
 * Messages with events older than `graceMs` still not forwarded to D1 (their index is behind):
 * in event rows, or an open message's email.queued kept in its row (through the index of waiting
 * messages).
 */
export function unindexed(sql: SqlStorage, nowMs: number, graceMs: number, limit: number): string[] {
  const rows = sql
    .exec<{ message_id: string }>(
      "SELECT DISTINCT message_id FROM event WHERE created_at <= ? LIMIT ?",
      nowMs - graceMs,
      limit,
    )
    .toArray();
  const queued = sql
    .exec<{ message_id: string }>(
      "SELECT id AS message_id FROM message WHERE waiting = 1 AND queued_event IS NOT NULL AND json_extract(queued_event, '$.created_at') <= ? LIMIT ?",
      nowMs - graceMs,
      limit,
    )
    .toArray();
  return [...new Set([...rows, ...queued].map((r) => r.message_id))].slice(0, limit);
}

/** Records that classification of `ids` was triggered at `nowMs`. */
export function markClassifySent(sql: SqlStorage, ids: string[], nowMs: number): void {
  for (const id of ids) sql.exec("UPDATE message SET classify_sent_at = ? WHERE id = ?", nowMs, id);
}
