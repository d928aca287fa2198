/**
 * The `classify` Queue consumer (qmail-todo): classifies each message in its own stage, never
 * inside the scheduler, and keeps the D1 index and event log in step with the Outbox.
 *
 * DESCRIPTION
 *   handleClassifyBatch(batch, env)  for every message id: classify (see classify-message.ts)
 *                                    when due, then write the message, recipient and event rows
 *                                    for the whole batch in one D1 batch, tell each Outbox which
 *                                    events are written, and ack. Routing and suppressions are
 *                                    read through BatchLookups (once per batch, coalesced).
 *
 * INVARIANTS
 *   Each message is acked or retried on its own; one bad message never fails the batch. Every
 *   step is idempotent, so a redelivered message changes nothing twice.
 *
 * ERRORS
 *   A failing message is retried with back-off (2^attempts s, at most 5 min); a malformed
 *   queue body is acked and logged.
 */
import type { ClassifyJob } from "../../durable-objects/outbox";
import { isMessageId } from "../../durable-objects/storage/outbox-ids";
import type { SyncState } from "../../durable-objects/storage/outbox-types";
import { lastEventOf } from "../api/email-view";
import { indexStatements } from "../db/messages";
import { publishEvents } from "../webhooks/publish";
import { classifyMessage, outboxOf } from "./classify-message";
import { BatchLookups, type Lookups } from "./lookups";

type Done = { msg: Message<unknown>; state: SyncState };

function retryDelay(attempts: number): number {
  return Math.min(2 ** Math.max(attempts, 1), 300);
}

function fail(msg: Message<unknown>, stage: string, e: unknown): void {
  console.error(JSON.stringify({ error: `classify ${stage} failed`, id: (msg.body as ClassifyJob | undefined)?.id, detail: e instanceof Error ? e.message : String(e) }));
  msg.retry({ delaySeconds: retryDelay(msg.attempts) });
}

/** Classifies one queue message; returns its state to index, or null when it was acked already. */
async function classifyOne(env: Env, msg: Message<unknown>, lookups: Lookups): Promise<Done | null> {
  const id = (msg.body as Partial<ClassifyJob> | null)?.id;
  if (typeof id !== "string" || !isMessageId(id)) {
    console.error(JSON.stringify({ error: "classify: malformed queue message", body: msg.body }));
    msg.ack();
    return null;
  }
  try {
    const state = await classifyMessage(env, id, lookups);
    if (state === null) msg.ack(); // unknown (purged) message: nothing to do
    return state === null ? null : { msg, state };
  } catch (e) {
    fail(msg, "message", e);
    return null;
  }
}

/** Writes the index and events of classified messages in one D1 batch (publishEvents), then acks them. */
async function indexAll(env: Env, done: Done[]): Promise<void> {
  if (done.length === 0) return;
  const now = Date.now();
  const stmts = done.flatMap(({ state }) => {
    const scheduled = state.view.scheduled_at !== null && state.view.scheduled_at > now;
    return indexStatements(env.DB, state.view, lastEventOf(state.view.recipients.map((r) => r.status), scheduled, state.view.complained === true));
  });
  try {
    await publishEvents(env, done.map((d) => d.state), stmts);
  } catch (e) {
    for (const d of done) fail(d.msg, "index", e);
    return;
  }
  await Promise.all(done.map(async ({ msg, state }) => {
    const last = state.events[state.events.length - 1];
    if (last) await outboxOf(env, state.view.id).ackEvents(state.view.id, last.seq).catch(() => undefined);
    msg.ack();
  }));
}

/** The queue handler. */
export async function handleClassifyBatch(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const lookups = new BatchLookups(env.DB);
  const results = await Promise.all(batch.messages.map((m) => classifyOne(env, m, lookups)));
  await indexAll(env, results.filter((r): r is Done => r !== null));
}
