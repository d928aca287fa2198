/**
 * The Transport DO's read-only views for operators and the status API, from its core and its
 * SQLite (no command runs, nothing is written).
 *
 * DESCRIPTION
 *   explainWaits(qmgr, sql, messageId, now)  why each recipient of a message waits: in core
 *                                (every attempt of it), or in the incoming queue.
 *   inspectTransport(qmgr, sql, now)         qshape, deferred shape, destinations, policies.
 *   metricsOf(qmgr, sql, topN)               GET /metrics' view: in-core counts from memory, the
 *                                            incoming and deferred messages counted up to
 *                                            METRIC_COUNT_CAP (never a full scan), the topN
 *                                            busiest destinations and the rest summed.
 */
import { destinationsView, explainMessage, queueShape, type Qmgr, type ResolvedRecipient } from "../core";
import {
  METRIC_COUNT_CAP,
  type TransportInspect,
  type TransportMetrics,
  type WaitReason,
} from "../../worker/model/transport";
import { incomingCount, incomingOf, pendingRecipients } from "./delivery-state";
import { deferredShape } from "./retries";
import { admissionsOf } from "./admissions";
import { parseCoreId } from "../../worker/model/delivery";
import type { StoredRecipient } from "./sqlite-source";

/** Why each recipient of a message here waits. */
export function explainWaits(
  qmgr: Qmgr<StoredRecipient>,
  sql: SqlStorage,
  messageId: string,
  now: number,
): { entryId: number; rcpts: ResolvedRecipient[]; blockedBy: WaitReason }[] {
  const ids = [...qmgr.messages.keys()].filter((id) => parseCoreId(id).messageId === messageId);
  const queued = incomingOf(sql, messageId).map((coreId) => ({
    entryId: -1,
    rcpts: pendingRecipients(sql, coreId),
    blockedBy: { kind: "active_queue_full" as const },
  }));
  return [...ids.flatMap((id) => explainMessage(qmgr, id, now)), ...queued];
}

/** The operator's view of a transport. */
export function inspectTransport(qmgr: Qmgr<StoredRecipient>, sql: SqlStorage, now: number): TransportInspect {
  return {
    transport: qmgr.transports.keys().next().value ?? "",
    now,
    inflight: qmgr.busy.size,
    incoming: incomingCount(sql),
    qshape: queueShape(qmgr, now),
    deferred: deferredShape(sql, now),
    destinations: destinationsView(qmgr),
    policies: [...qmgr.policies.values()].map((c) => ({ key: c.key, rule: c.rule })),
  };
}

/** GET /metrics' view of a transport (see the header). */
export function metricsOf(qmgr: Qmgr<StoredRecipient>, sql: SqlStorage, topN: number): TransportMetrics {
  const capped = (table: string) =>
    sql.exec<{ n: number }>(`SELECT count(*) AS n FROM (SELECT 1 FROM ${table} LIMIT ${METRIC_COUNT_CAP})`).one().n;
  const all = destinationsView(qmgr);
  const top = all.slice(0, topN);
  const rest = all.slice(topN);
  return {
    transport: qmgr.transports.keys().next().value ?? "",
    inflight: qmgr.busy.size,
    todo: all.reduce((n, d) => n + d.todo, 0),
    incoming: capped("incoming"),
    deferred: Math.min(METRIC_COUNT_CAP, capped("retry_due") + admissionsOf(sql).retryCount), // rows and kept retries
    destinations: top.map((d) => ({ queue: d.queue, state: d.state, window: d.window, busy: d.busy, todo: d.todo })),
    other: {
      queues: rest.length,
      busy: rest.reduce((n, d) => n + d.busy, 0),
      todo: rest.reduce((n, d) => n + d.todo, 0),
    },
  };
}
