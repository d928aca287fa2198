/**
 * Delivery outcomes in the Outbox's SQLite: the envelope the delivery stage sends and each
 * recipient's outcome (the message's end is finish.ts).
 *
 * DESCRIPTION
 *   readEnvelope         what the delivery stage sends (sender, size, recipients).
 *   applyOutcome(s)      the delivery stage's reports. The reports that finish their message
 *                        keep their events in the recipient rows they write
 *                        (`rcpt.pending_event`, or for a message's own recipient
 *                        `message.r_pending_event`, written with the finish: rcpt.ts) instead
 *                        of event rows: an event row is an insert
 *                        and, once forwarded, a delete; a finished message is found through the
 *                        index of finished messages instead (forward.ts).
 *   What comes back after delivery (a complaint, late bounce, unsubscribe) is after-delivery.ts;
 *   a message's end (finishIfDone, finishMessage) and the operator's cancel are finish.ts.
 *
 * INVARIANTS
 *   A final recipient never changes again. A message is `done` exactly when all its recipients
 *   are final.
 */
import { FINAL_STATUSES, type DeliveryEnvelope, type OutcomeReport, type RcptStatus } from "../../worker/model/message";
import { insertEvent, type KeptEvent } from "./events";
import { readHead, updateUnclassified, type MessageRow } from "./store";
import { RcptList, writeInline, type RcptWrite } from "./rcpt";
import { finishMessage } from "./finish";

const OUTCOME_EVENT: Record<OutcomeReport["status"], string | null> = {
  active: null,
  deferred: "email.delivery_delayed",
  delivered: "email.delivered",
  bounced: "email.bounced",
  expired: "email.failed",
};

/** The message's envelope for delivery, or null when unknown. */
export function readEnvelope(sql: SqlStorage, id: string): DeliveryEnvelope | null {
  // One statement: the recipients come as a JSON array of [idx, address, status, attempts].
  const m = sql
    .exec<{
      tenant: string;
      mail_from: string;
      size: number;
      body: string | ArrayBuffer | null;
      body_r2: number;
      return_path: string | null;
      rcpts: string;
    }>(
      `SELECT tenant, mail_from, size, body, body_r2, return_path, (SELECT json_group_array(json_array(idx, address, status, attempts))
       FROM (SELECT idx, address, status, attempts FROM rcpt_all WHERE message_id = ?1 ORDER BY idx)) AS rcpts FROM message WHERE id = ?1`,
      id,
    )
    .toArray()[0];
  if (!m) return null;
  const rcpts = (JSON.parse(m.rcpts) as [number, string, RcptStatus, number][]).map(
    ([idx, address, status, attempts]) => ({ idx, address, status, attempts }),
  );
  return {
    id,
    tenant: m.tenant,
    mailFrom: m.mail_from,
    size: m.size,
    rcpts,
    ...(m.body_r2 === 0 && m.body !== null ? { body: m.body } : {}),
    ...(m.return_path ? { returnPath: m.return_path } : {}),
  };
}

/**
 * Applies a delivery outcome; stale (older attempt) or post-final reports change nothing. An
 * `incoming` recipient whose decision is recorded may already be admitted, dispatched and
 * delivered while the classify stage's markReady is still on its way: its outcome counts (with
 * the email.queued markReady would have recorded first), and markReady then finds nothing to move.
 * An undecided `incoming` recipient cannot have been admitted: its report is refused.
 */
export function applyOutcome(sql: SqlStorage, id: string, r: OutcomeReport, nowMs: number, keepBody = false): boolean {
  return applyOutcomes(sql, id, [r], nowMs, keepBody).applied.length > 0;
}

/** Whether an outcome is one a `failed` notice reports (a bounce or an expiry). */
export function failsForDsn(r: { status: RcptStatus }): boolean {
  return r.status === "bounced" || r.status === "expired";
}

type OutcomeRcpt = {
  idx: number;
  status: RcptStatus;
  attempts: number;
  address: string;
  transport: string | null;
  nexthop: string | null;
};

/**
 * applyOutcome for several reports on one message, in order; returns those that applied, and
 * whether the message is done (now or before). The message, its recipients and its last event seq
 * are read once, and whether it finished is decided once at the end from the recipients in hand,
 * instead of for every report (a 50-recipient session's reports).
 */
export function applyOutcomes(
  sql: SqlStorage,
  id: string,
  reports: readonly OutcomeReport[],
  nowMs: number,
  keepBody = false,
): { applied: OutcomeReport[]; done: boolean; bodyLeft: boolean } {
  const m = readHead(sql, id);
  if (!m || reports.length === 0) return { applied: [], done: m?.state === "done", bodyLeft: false };
  const rcpts = new Map(
    sql
      .exec<OutcomeRcpt>(
        "SELECT idx, status, attempts, address, transport, nexthop FROM rcpt_all WHERE message_id = ?",
        id,
      )
      .toArray()
      .map((r) => [r.idx, r]),
  );
  const again = m.again === 1;
  let last = m.last_seq;
  let wasIncoming = false;
  const applied: OutcomeReport[] = [];
  let inlineWrite: RcptWrite | null = null;
  // Recipients kept as a list in the row (rcpt.ts): changed here, written once after the loop.
  const list = m.rcpts === null ? null : new RcptList(m.rcpts);
  let queuedKept: string | null = null;
  const finishing = finishes(m, rcpts, reports);
  for (const r of reports) {
    const cur = rcpts.get(r.idx);
    if (!applies(m, cur, r)) continue;
    if (cur.status === "incoming" && m.unclassified === 1) {
      // Not marked ready (admitted lazily, admit.ts, or reported first): email.queued comes now,
      // kept in the message row that this outcome writes for a message's own recipient.
      wasIncoming = true;
      // Released or requeued (`again`): email.queued was said already.
      const queued = { type: "email.queued", recipient: cur.address, created_at: nowMs };
      const data = { transport: cur.transport, nexthop: cur.nexthop };
      if (!again && m.inline === 1) {
        last = Math.max(last + 1, nowMs * 1000);
        queuedKept = JSON.stringify({ seq: last, ...queued, data } satisfies KeptEvent);
      } else if (!again) last = insertEvent(sql, { message_id: id, tenant: m.tenant, ...queued, data }, last);
    }
    const attempts = Math.max(cur.attempts, r.attempt);
    const type = OUTCOME_EVENT[r.status];
    const data = {
      attempt: r.attempt,
      response: r.response ?? null,
      ...(r.status === "expired" ? { reason: "expired" } : {}),
    };
    // The report that finishes its message keeps its event in the recipient row it writes anyway.
    let pending: string | null = null;
    if (type !== null && finishing && FINAL_STATUSES.includes(r.status)) {
      last = Math.max(last + 1, nowMs * 1000);
      pending = JSON.stringify({ seq: last, type, created_at: nowMs, data } satisfies KeptEvent);
    } else if (type !== null) {
      last = insertEvent(
        sql,
        { message_id: id, tenant: m.tenant, type, recipient: cur.address, created_at: nowMs, data },
        last,
      );
    }
    const write: RcptWrite = {
      status: r.status,
      attempts,
      next: r.status === "deferred" ? (r.nextAttemptAt ?? null) : null,
      response: r.response ? JSON.stringify(r.response) : (inlineWrite?.response ?? null),
      blockedBy: r.blockedBy ?? null,
      pending: pending ?? inlineWrite?.pending ?? null,
    };
    // A message's own recipient is written once, after the loop (with its finish when it finishes).
    if (m.inline === 1) inlineWrite = write;
    else if (list !== null) list.apply(r.idx, write, nowMs);
    else
      sql.exec(
        `UPDATE rcpt SET status = ?, attempts = ?, next_attempt_at = ?, last_response = COALESCE(?, last_response), blocked_by = ?, updated_at = ?,
         pending_event = COALESCE(?, pending_event) WHERE message_id = ? AND idx = ?`,
        write.status,
        write.attempts,
        write.next,
        write.response,
        write.blockedBy,
        nowMs,
        write.pending,
        id,
        r.idx,
      );
    rcpts.set(r.idx, { ...cur, status: r.status, attempts });
    if (r.throttled) {
      const t = r.throttled;
      last = insertEvent(
        sql,
        {
          message_id: id,
          tenant: m.tenant,
          type: "relay.destination.throttled",
          recipient: cur.address,
          created_at: nowMs,
          data: {
            attempt: r.attempt,
            rule: t.rule,
            action: t.action ?? "suspend",
            ...(t.rate ? { rate: t.rate } : {}),
            policy_key: t.key,
            suspended_until: t.until,
            response: r.response ?? null,
          },
        },
        last,
      );
    }
    applied.push(r);
  }
  // Every recipient is in `rcpts`, with what was applied: whether it finished needs no count.
  const finished = applied.length > 0 && [...rcpts.values()].every((r) => FINAL_STATUSES.includes(r.status));
  // With notices on, the body stays only for a message with a recipient a notice may report.
  const kept = finished && keepBody && [...rcpts.values()].some(failsForDsn);
  const listed = list !== null && applied.length > 0 ? list.text : null;
  if (finished) finishMessage(sql, id, nowMs, kept, inlineWrite, queuedKept, listed);
  else {
    if (inlineWrite !== null) writeInline(sql, id, inlineWrite, nowMs, queuedKept);
    if (listed !== null) sql.exec("UPDATE message SET rcpts = ? WHERE id = ?", listed, id);
    if (wasIncoming && queuedKept === null) updateUnclassified(sql, id);
  }
  return { applied, done: m.state === "done" || finished, bodyLeft: finished && (kept || m.body_r2 === 1) };
}

/**
 * Whether report `r` applies to recipient `cur`: not final, not an older attempt's, and not an
 * undecided `incoming` recipient (which cannot have been admitted).
 */
function applies(m: MessageRow, cur: OutcomeRcpt | undefined, r: OutcomeReport): cur is OutcomeRcpt {
  if (!cur || FINAL_STATUSES.includes(cur.status) || r.attempt < cur.attempts) return false;
  return !(cur.status === "incoming" && m.unclassified === 1 && cur.transport === null);
}

/** Whether applying `reports` in order leaves every recipient of the message final (it finishes). */
function finishes(m: MessageRow, rcpts: ReadonlyMap<number, OutcomeRcpt>, reports: readonly OutcomeReport[]): boolean {
  const after = new Map(rcpts);
  for (const r of reports) {
    const cur = after.get(r.idx);
    if (applies(m, cur, r)) after.set(r.idx, { ...cur, status: r.status, attempts: Math.max(cur.attempts, r.attempt) });
  }
  return m.state === "open" && [...after.values()].every((x) => FINAL_STATUSES.includes(x.status));
}
