/**
 * The delivery stage's D1 writes: the index rows and events of every message a batch touched,
 * in one D1 batch, then each Outbox shard is told, in one request, which events are written.
 *
 * DESCRIPTION
 *   indexMessages(env, states)  the only index write for delivery outcomes (the Outbox does not
 *                             also queue them, see Outbox.recordOutcome, which answers with the
 *                             state written here: no call to read it). On failure the ids go
 *                             to the classify queue, whose consumer writes the same rows
 *                             (idempotently); were that to fail too, the Outbox sweeper finds
 *                             the unforwarded events after its grace period. Nothing is lost.
 *   ackWritten(env, states)   one Outbox.ackEventsMany per shard for the events just written
 *                             (the classify consumer's too).
 *   indexItemOf(state, scheduled?)  a state as indexStatements takes it (the classify consumer's
 *                             too), with the event GET /emails shows last.
 */
import { eventAcksOf, type SyncState } from "../model/message";
import { lastEventOf } from "../model/status";
import type { IndexItem } from "../db/messages";
import { publishEvents } from "./publish";
import { byOutbox } from "../model/ids";
import type { PendingAcks } from "./pending-acks";

/** Two states of one message: `a`'s view with the events of both (by seq, once each). */
export function mergeEvents(a: SyncState, b: SyncState): SyncState {
  const bySeq = new Map([...b.events, ...a.events].map((e) => [e.seq, e]));
  return { view: a.view, events: [...bySeq.values()].sort((x, y) => x.seq - y.seq) };
}

/** Tells each Outbox shard, in one request, which events of `states` are written to D1. */
export async function ackWritten(env: Env, states: readonly SyncState[]): Promise<void> {
  await Promise.all(
    [...byOutbox(eventAcksOf(states), (a) => a.id)].map(([name, inShard]) =>
      env.OUTBOX.getByName(name).ackEventsMany(inShard),
    ),
  );
}

/** What the D1 index stores of a message's state: its view and the event GET /emails shows last (`scheduled`: it waits for its time). */
export function indexItemOf(state: SyncState, scheduled = false): IndexItem {
  return {
    view: state.view,
    lastEvent: lastEventOf(
      state.view.recipients.map((r) => r.status),
      scheduled,
      state.view.complained === true,
    ),
  };
}

/** Writes the index and events of the messages in `states` (as the Outbox answered them) in one D1 batch (publishEvents). */
export async function indexMessages(env: Env, states: SyncState[], held?: PendingAcks): Promise<void> {
  if (states.length === 0) return;
  try {
    await publishEvents(
      env,
      states,
      states.map((s) => indexItemOf(s)),
    );
    // Held (`held`) to ride on the agent's next request, or sent now.
    if (held) return held.add(eventAcksOf(states));
    await ackWritten(env, states);
  } catch (e) {
    console.error(
      JSON.stringify({
        error: "deliver: index write failed (handed to the classify queue)",
        detail: e instanceof Error ? e.message : String(e),
      }),
    );
    await env.CLASSIFY.sendBatch(states.map((s) => ({ body: { id: s.view.id }, contentType: "json" as const }))).catch(
      (err: unknown) => {
        console.error(
          JSON.stringify({
            error: "deliver: queueing the index write failed (the Outbox sweeper repeats it)",
            detail: String(err),
          }),
        );
      },
    );
  }
}
