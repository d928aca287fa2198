/*
 * NAME
 *   mail-store - the simulator's queue files: messages, recipients and delivery records
 * DESCRIPTION
 *   MailStore is the RecipientSource the core reads recipients through (Postfix's queue
 *   file). Each stored message keeps all its recipients and, per recipient, when it was
 *   delivered. beginAttempt() prepares a new pass through the active queue: the "file" the
 *   core reads is then exactly the recipients not yet delivered, as Postfix re-reads a
 *   deferred queue file and skips recipients already marked done. read() serves that list
 *   in file order. markDelivered() records a delivery and refuses a second one of the same
 *   recipient, which is how the simulator checks "delivered exactly once".
 * INVARIANTS
 *   undeliveredTotal equals the number of recipients without a delivery time. A recipient's
 *   delivery time, once set, never changes.
 * ERRORS
 *   add() throws on a duplicate message id; beginAttempt() and lookups throw on an unknown
 *   one (simulator bugs).
 */
import type { RecipientBatch, RecipientSource, ResolvedRecipient } from "../../durable-objects/core";

/** A recipient as the simulator stores it. */
export interface SimRcpt extends ResolvedRecipient {
  messageId: string;
  /** Position in the message's recipient list. */
  index: number;
}

/** One message and its delivery record. */
export interface StoredMessage {
  id: string;
  /** Arrival time (seconds, fractional). */
  arriveAt: number;
  rcpts: SimRcpt[];
  /** Delivery time per recipient (null = not yet). */
  deliveredAt: (number | null)[];
  undelivered: number;
  /** Passes through the active queue so far (1 = first attempt). */
  passes: number;
  /** What the core reads in the current pass: the undelivered recipients. */
  file: SimRcpt[];
}

/** The simulator's queue files. */
export class MailStore implements RecipientSource<SimRcpt> {
  readonly messages = new Map<string, StoredMessage>();
  undeliveredTotal = 0;
  rcptTotal = 0;

  /** Stores a new message with its recipients (transport "smtp"). */
  add(id: string, arriveAt: number, rcpts: readonly { address: string; nexthop: string }[]): StoredMessage {
    if (this.messages.has(id)) throw new Error(`MailStore: duplicate message ${id}`);
    const list: SimRcpt[] = rcpts.map((r, index) => ({
      address: r.address,
      nexthop: r.nexthop,
      transport: "smtp",
      messageId: id,
      index,
    }));
    const m: StoredMessage = {
      id,
      arriveAt,
      rcpts: list,
      deliveredAt: list.map(() => null),
      undelivered: list.length,
      passes: 0,
      file: [],
    };
    this.messages.set(id, m);
    this.undeliveredTotal += list.length;
    this.rcptTotal += list.length;
    return m;
  }

  /** The stored message `id`. */
  get(id: string): StoredMessage {
    const m = this.messages.get(id);
    if (!m) throw new Error(`MailStore: unknown message ${id}`);
    return m;
  }

  /** Starts a pass: the file becomes the undelivered recipients; returns their count. */
  beginAttempt(id: string): number {
    const m = this.get(id);
    m.passes += 1;
    m.file = m.rcpts.filter((r) => m.deliveredAt[r.index] === null);
    return m.file.length;
  }

  /** RecipientSource: up to `limit` recipients of the current pass from `offset`. */
  read(messageId: string, offset: number, limit: number): RecipientBatch<SimRcpt> {
    const file = this.get(messageId).file;
    const rcpts = file.slice(offset, offset + limit);
    const nextOffset = offset + rcpts.length;
    return { rcpts, nextOffset, unread: file.length - nextOffset };
  }

  /** Records a delivery; false if the recipient had already been delivered. */
  markDelivered(r: SimRcpt, at: number): boolean {
    const m = this.get(r.messageId);
    if (m.deliveredAt[r.index] !== null) return false;
    m.deliveredAt[r.index] = at;
    m.undelivered -= 1;
    this.undeliveredTotal -= 1;
    return true;
  }

  /** When the message's last recipient was delivered, or null if some are not. */
  completedAt(id: string): number | null {
    const m = this.get(id);
    if (m.undelivered > 0) return null;
    let last = m.arriveAt;
    for (const t of m.deliveredAt) if (t !== null && t > last) last = t;
    return last;
  }
}
