/**
 * The Transport DO's read-only views for operators and the status API, from its core and its
 * SQLite (no command runs, nothing is written).
 *
 * DESCRIPTION
 *   explainWaits(qmgr, sql, messageId, now)  why each recipient of a message waits: in core
 *                                (every attempt of it), or in the incoming queue.
 *   inspectTransport(qmgr, sql, now)         qshape, deferred shape, destinations, policies.
 */
import { destinationsView, explainMessage, queueShape, type Qmgr, type ResolvedRecipient } from "../core";
import type { TransportInspect, WaitReason } from "../../worker/model/transport";
import { deferredShape, incomingCount, incomingOf, pendingRecipients } from "./delivery-state";
import { parseCoreId } from "../../worker/model/delivery";
import type { StoredRecipient } from "./sqlite-source";

/** Why each recipient of a message here waits. */
export function explainWaits(qmgr: Qmgr<StoredRecipient>, sql: SqlStorage, messageId: string, now: number): { entryId: number; rcpts: ResolvedRecipient[]; blockedBy: WaitReason }[] {
  const ids = [...qmgr.messages.keys()].filter((id) => parseCoreId(id).messageId === messageId);
  const queued = incomingOf(sql, messageId).map((coreId) => ({ entryId: -1, rcpts: pendingRecipients(sql, coreId), blockedBy: { kind: "active_queue_full" as const } }));
  return [...ids.flatMap((id) => explainMessage(qmgr, id, now)), ...queued];
}

/** The operator's view of a transport. */
export function inspectTransport(qmgr: Qmgr<StoredRecipient>, sql: SqlStorage, now: number): TransportInspect {
  return {
    transport: qmgr.transports.keys().next().value ?? "", now, inflight: qmgr.busy.size, incoming: incomingCount(sql),
    qshape: queueShape(qmgr, now), deferred: deferredShape(sql, now), destinations: destinationsView(qmgr),
    policies: [...qmgr.policies.values()].map((c) => ({ key: c.key, rule: c.rule })),
  };
}
