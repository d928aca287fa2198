/**
 * Outcomes a Transport DO's core decides without a delivery report, on their way to the
 * message's Outbox: an expired attempt's open recipients (`expired`), recipients deferred without
 * an attempt because their destination died (`deferred`, blocked_by destination_dead, with the
 * retry time), and delay warnings (delay_warning_time) for the bounce-notice machinery.
 *
 * DESCRIPTION
 *   collect(sql, effects, lifetimeSec)  turns one command's effects into notes (synchronously,
 *                                       while the backlog rows they name are still there).
 *   waiting                             whether there is anything to deliver.
 *   deliver(env)                        hands every note and warning to its Outbox, each
 *                                       shard's in batches; failures are logged (the Outbox
 *                                       sweeper and the next attempt recover).
 */
import type { Effect } from "../core";
import { pendingRecipients } from "./delivery-state";
import { parseCoreId } from "../../worker/model/delivery";
import { readMeta } from "./sqlite-source";
import { byOutbox, isMessageId } from "../../worker/model/ids";
import type { DelayWarning } from "../../worker/model/message";

/** An outcome for the message's Outbox. */
interface OutboxNote {
  messageId: string;
  attempt: number;
  addresses: string[];
  status: "expired" | "deferred";
  text: string;
  blockedBy: string | null;
  /** Epoch ms. */
  nextAttemptAt: number | null;
}

function logged(what: string, messageId: string) {
  return (e: unknown) =>
    console.error(JSON.stringify({ error: `transport: ${what} failed`, messageId, detail: String(e) }));
}

/** Notes waiting to be handed to their Outbox. */
export class OutboxNotes {
  private notes: OutboxNote[] = [];
  private warnings: DelayWarning[] = [];

  /**
   * Records what one command's effects mean for the Outboxes. `finalNow`: recipients the report
   * being applied made final, not yet recorded as such (an attempt that ends records none).
   */
  collect(
    sql: SqlStorage,
    effects: Effect[],
    lifetimeSec: number,
    finalNow: { coreId: string; idxs: number[] } | null = null,
  ): void {
    const pending = (coreId: string) => {
      const done = finalNow?.coreId === coreId ? new Set(finalNow.idxs) : null;
      return pendingRecipients(sql, coreId).filter((r) => !done?.has(r.idx));
    };
    for (const e of effects) {
      if (e.kind === "message-expired") {
        this.notes.push({
          ...parseCoreId(e.messageId),
          addresses: pending(e.messageId).map((r) => r.address),
          status: "expired",
          text: "maximal_queue_lifetime exceeded",
          blockedBy: null,
          nextAttemptAt: null,
        });
      } else if (e.kind === "deferred") {
        // Deferred without an attempt (its destination died): say so, with the retry time if known.
        const retry = effects.find((d) => d.kind === "message-deferred" && d.messageId === e.messageId);
        const nextAttemptAt = retry?.kind === "message-deferred" ? retry.nextAttemptAt * 1000 : null;
        this.notes.push({
          ...parseCoreId(e.messageId),
          addresses: e.rcpts.map((r) => r.address),
          status: "deferred",
          text: e.reason,
          blockedBy: "destination_dead",
          nextAttemptAt,
        });
      } else if (e.kind === "message-deferred" && e.warn) {
        const { messageId } = parseCoreId(e.messageId);
        const meta = readMeta(sql, messageId);
        this.warnings.push({
          id: messageId,
          addresses: pending(e.messageId).map((r) => r.address),
          retryUntilMs: meta ? (meta.createTime + lifetimeSec) * 1000 : null,
        });
      }
    }
  }

  /** Whether deliver() has anything to hand over (and so would await I/O). */
  get waiting(): boolean {
    return this.notes.length > 0 || this.warnings.length > 0;
  }

  /**
   * Hands every note and warning to its Outbox: per shard, up to NOTE_BATCH messages in one
   * delayNotices() request, and in one envelopes() and one recordOutcomes() request. One request
   * of each per message made a destination's death cost two Outbox requests per queued message,
   * one after the other inside the pump: under the chaos load campaign, with thousands of messages
   * queued for a destination that died every 20 s, the Outbox answered "Unknown Internal Error",
   * the classify queue got one message per note, and dispatch waited for all of it. Warnings come
   * the same way: every message queued in one burst reaches delay_warning_time at once.
   */
  async deliver(env: Env): Promise<void> {
    await perShard(
      env,
      this.warnings.splice(0),
      (w) => w.id,
      "handing a delay warning to the Outbox",
      (outbox, part) => outbox.delayNotices(part, "delivery delayed; still being retried"),
    );
    await perShard(
      env,
      this.notes.splice(0),
      (n) => n.messageId,
      "recording an outcome in the Outbox",
      async (outbox, part) => {
        const envelopes = await outbox.envelopes(part.map((x) => x.messageId));
        const items = part
          .map((x, j) => ({ id: x.messageId, reports: reportsOf(x, envelopes[j] ?? null) }))
          .filter((it) => it.reports.length > 0);
        if (items.length > 0) await outbox.recordOutcomes(items);
      },
    );
  }
}

/**
 * Calls `send` for `items` (those with a message id) in batches of NOTE_BATCH per Outbox shard,
 * one shard after the other; a failed batch is logged for each of its messages.
 */
async function perShard<T>(
  env: Env,
  items: T[],
  idOf: (item: T) => string,
  what: string,
  send: (outbox: OutboxStub, part: T[]) => Promise<void>,
): Promise<void> {
  for (const [name, list] of byOutbox(
    items.filter((x) => isMessageId(idOf(x))),
    idOf,
  )) {
    const outbox = env.OUTBOX.getByName(name);
    for (let i = 0; i < list.length; i += NOTE_BATCH) {
      const part = list.slice(i, i + NOTE_BATCH);
      try {
        await send(outbox, part);
      } catch (e) {
        for (const x of part) logged(what, idOf(x))(e);
      }
    }
  }
}

type OutboxStub = ReturnType<Env["OUTBOX"]["getByName"]>;

/** Messages per delayNotices(), envelopes() and recordOutcomes() request of deliver(). */
const NOTE_BATCH = 100;

/** The Outbox reports for a note's recipients (those of its addresses the envelope has). */
function reportsOf(x: OutboxNote, envelope: { rcpts: { idx: number; address: string }[] } | null) {
  const wanted = new Set(x.addresses.map((a) => a.toLowerCase()));
  return (envelope?.rcpts ?? [])
    .filter((r) => wanted.has(r.address.toLowerCase()))
    .map((r) => ({
      idx: r.idx,
      status: x.status,
      attempt: x.attempt,
      nextAttemptAt: x.nextAttemptAt,
      response: { text: x.text },
      blockedBy: x.blockedBy,
    }));
}
