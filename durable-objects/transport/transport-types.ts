/**
 * The Transport DO's own shapes: a dispatched entry, and how it becomes a delivery job
 * (worker/model/delivery.ts). What others exchange with the object is worker/model/transport.ts.
 */
import type { Entry } from "../core";
import { parseCoreId, type DeliverJob } from "../../worker/model/delivery";
import type { StoredRecipient } from "./sqlite-source";

/** A selected delivery request, as handed to the delivery stage. */
export interface DispatchedEntry {
  entryId: number;
  messageId: string;
  transport: string;
  nexthop: string;
  rcpts: StoredRecipient[];
  /** The transport's process_limit, which sizes its pool of agents (agentPool). */
  processLimit: number;
}

/** A core entry as handed to the delivery stage. */
export function toDispatched(e: Entry<StoredRecipient>): DispatchedEntry {
  return {
    entryId: e.id,
    messageId: e.peer.job.message.id,
    transport: e.peer.queue.transport.name,
    nexthop: e.peer.queue.nexthop,
    rcpts: e.rcpts,
    processLimit: e.peer.queue.transport.p.processLimit,
  };
}

/** The delivery job of a dispatched entry. */
export function toJob(e: DispatchedEntry, leaseUntil: number): DeliverJob {
  const { messageId, attempt } = parseCoreId(e.messageId);
  return {
    entryId: e.entryId,
    messageId,
    attempt,
    transport: e.transport,
    nexthop: e.nexthop,
    rcpts: e.rcpts.map((r) => ({ idx: r.idx, address: r.address })),
    leaseUntil,
  };
}
