/**
 * An accept's write in the Outbox's SQLite: the request's messages with their recipients and its
 * idempotency record, in one transaction, unless its bodies in R2 may already have been swept.
 *
 * DESCRIPTION
 *   storeAccepted(storage, req, nowMs, graceMs, token)   "stale" when a body in R2 was written
 *                 before the grace period (the sweeper may have taken it as an orphan); else
 *                 the idempotency record's answer when the key was seen (a replay of its
 *                 stored response, a mismatch, or one in flight), or "accepted" with every
 *                 message stored.
 *
 * INVARIANTS
 *   All or nothing: the messages, their recipients and the idempotency record are written in
 *   one transactionSync; the shard this object is (its bodies' key prefix) is remembered in the
 *   same write.
 */
import { shardOf } from "../../worker/model/ids";
import type { AcceptRequest, AcceptResult } from "../../worker/model/message";
import { checkIdempotency, completeIdempotency } from "./schema";
import { insertMessage } from "./store";
import { rememberShard } from "./sweep";

/** Stores a request's messages and idempotency record atomically, or says why not (stale bodies, a key seen). */
export function storeAccepted(
  storage: DurableObjectStorage,
  req: AcceptRequest,
  now: number,
  graceMs: number,
  token: string | undefined,
): AcceptResult {
  const sql = storage.sql;
  // A body in R2 written before the grace period may already have been swept as an orphan (a
  // body kept in the row cannot be): the time that counts is when the bodies were written, not
  // when the messages were composed, which for a large batch may be well before.
  const inR2 = req.messages.filter((m) => m.body === undefined);
  const writtenAt = req.bodiesAt ?? Math.min(...inR2.map((m) => m.createdAt));
  if (inR2.length > 0 && writtenAt < now - graceMs) return { kind: "stale" };
  return storage.transactionSync((): AcceptResult => {
    if (req.idempotency) {
      const seen = checkIdempotency(sql, req.tenant, req.idempotency, now, token);
      if (seen.kind !== "fresh") return seen;
      completeIdempotency(sql, req.tenant, req.idempotency, req.response, now);
    }
    // Decided at accept: Outbox.accept admits it before it answers (AdmissionBatch).
    for (const m of req.messages)
      insertMessage(sql, req.tenant, m, now, m.decisions !== undefined && m.scheduledAt === null);
    const first = req.messages[0];
    if (first) rememberShard(sql, shardOf(first.id));
    return { kind: "accepted" };
  });
}
