/**
 * The `classify` Queue consumer (qmail-todo): classifies each message in its own stage, never
 * inside the scheduler, and keeps the D1 index and event log in step with the Outbox. The
 * accepting worker runs the same decisions first (worker/accept/accept.ts, decideNew), so this
 * queue takes only what it could not decide (a failed look-up), scheduled messages when due,
 * the Outbox's messages to index, and the sweeper's re-triggers.
 *
 * DESCRIPTION
 *   handleClassifyBatch(batch, env)  for every message a queue message names (one, or an accept
 *                                    request's batch, see ClassifyJob): classify (see classify-message.ts)
 *                                    when due, the work the batch carried with one
 *                                    Outbox.classifyMany per shard (and so one admission request
 *                                    per transport for the whole batch), then write the message, recipient and event rows
 *                                    for the whole batch in one D1 batch, tell each Outbox which
 *                                    events are written, and ack. Routing and suppressions are
 *                                    read through BatchLookups (once per batch, coalesced).
 *                                    A message whose every admitted recipient went into the
 *                                    active queue of a self-dispatching transport is not written
 *                                    here: the deliver consumer indexes it after the attempt,
 *                                    this stage's events (email.queued, so email.sent) included,
 *                                    in one write instead of two (the D1 rows of the message and
 *                                    its recipients are written once, with their outcome).
 *                                    Should no report come soon (a lost delivery agent, a
 *                                    destination that waits), the Outbox sweeper forwards the
 *                                    events after INDEX_LAG_SECONDS.
 *
 * INVARIANTS
 *   Each message is acked or retried on its own; one bad message never fails the batch. Every
 *   step is idempotent, so a redelivered message changes nothing twice.
 *
 * ERRORS
 *   A failing message is retried with back-off (2^attempts s, at most 5 min); a malformed
 *   queue body is acked and logged.
 */
import type { ClassifyJob } from "../model/message";
import { byOutbox, isMessageId } from "../model/ids";
import type { ClassifyResult, SyncState } from "../model/message";
import { publishEvents } from "../indexing/publish";
import { classifyMessage, decide } from "./classify-message";
import { ackWritten, indexItemOf } from "../indexing/writes";
import { BatchLookups, type Lookups } from "./lookups";

type Done = { msg: Message<unknown>; state: SyncState };

function retryDelay(attempts: number): number {
  return Math.min(2 ** Math.max(attempts, 1), 300);
}

function fail(msg: Message<unknown>, stage: string, e: unknown): void {
  console.error(
    JSON.stringify({
      error: `classify ${stage} failed`,
      ids: itemsOf(msg.body)?.map((i) => i.id),
      detail: e instanceof Error ? e.message : String(e),
    }),
  );
  msg.retry({ delaySeconds: retryDelay(msg.attempts) });
}

type Item = {
  id: string;
  work?: {
    tenant: string;
    rcpts: { idx: number; address: string; transport: null; nexthop: null }[];
    bulk?: { topic: string | null };
  };
};

/** The messages a queue body names (see ClassifyJob), or null when it is malformed. */
function itemsOf(body: unknown): Item[] | null {
  const b = body as { id?: unknown; ids?: unknown; batch?: unknown } | null;
  if (typeof b?.id === "string") return isMessageId(b.id) ? [{ id: b.id }] : null;
  if (Array.isArray(b?.ids))
    return b.ids.length > 0 && b.ids.every((id) => typeof id === "string" && isMessageId(id))
      ? (b.ids as string[]).map((id) => ({ id }))
      : null;
  if (!Array.isArray(b?.batch)) return null;
  const items: Item[] = [];
  for (const x of b.batch as { id?: unknown; tenant?: unknown; rcpts?: unknown; bulk?: { topic?: unknown } }[]) {
    if (
      typeof x?.id !== "string" ||
      !isMessageId(x.id) ||
      typeof x.tenant !== "string" ||
      !Array.isArray(x.rcpts) ||
      !x.rcpts.every((r) => typeof r === "string")
    )
      return null;
    const topic = x.bulk?.topic;
    if (
      x.bulk !== undefined &&
      (typeof x.bulk !== "object" || x.bulk === null || (topic !== null && typeof topic !== "string"))
    )
      return null;
    const rcpts = (x.rcpts as string[]).map((address, idx) => ({ idx, address, transport: null, nexthop: null }));
    items.push({
      id: x.id,
      work: { tenant: x.tenant, rcpts, ...(x.bulk ? { bulk: { topic: topic as string | null } } : {}) },
    });
  }
  return items;
}

type Classified = { sync: SyncState | null; indexLater: boolean };

/**
 * Classifies every item of a batch, settled in order: work a queue message carried is decided
 * here and handed to its Outbox shard with the rest of the batch's in one classifyMany (which
 * admits them with one request per transport); an item without (a re-trigger, a scheduled
 * message) goes through classifyMessage on its own.
 */
async function classifyItems(env: Env, items: Item[], lookups: Lookups): Promise<PromiseSettledResult<Classified>[]> {
  const out: PromiseSettledResult<Classified>[] = new Array(items.length);
  const carried: { i: number; id: string; results: ClassifyResult[] }[] = [];
  await Promise.all(
    items.map(async (it, i) => {
      try {
        if (it.work) carried.push({ i, id: it.id, results: await decide(env, it.work, lookups) });
        else out[i] = { status: "fulfilled", value: await classifyMessage(env, it.id, lookups) };
      } catch (reason) {
        out[i] = { status: "rejected", reason };
      }
    }),
  );
  await Promise.all(
    [...byOutbox(carried, (c) => c.id)].map(async ([name, inShard]) => {
      try {
        const answers = await env.OUTBOX.getByName(name).classifyMany(
          inShard.map(({ id, results }) => ({ id, results })),
        );
        answers.forEach((a, k) => {
          out[inShard[k]!.i] = a.failed
            ? {
                status: "rejected",
                reason: new Error(`admission of ${a.plan?.id ?? "a message"} failed; classify it again`),
              }
            : { status: "fulfilled", value: a };
        });
      } catch (reason) {
        for (const c of inShard) out[c.i] = { status: "rejected", reason };
      }
    }),
  );
  return out;
}

/** Writes the index and events of classified messages in one D1 batch (publishEvents), then acks them. */
async function indexAll(env: Env, done: Done[]): Promise<void> {
  if (done.length === 0) return;
  const now = Date.now();
  try {
    await publishEvents(
      env,
      done.map((d) => d.state),
      done.map(({ state }) => indexItemOf(state, state.view.scheduled_at !== null && state.view.scheduled_at > now)),
    );
  } catch (e) {
    for (const d of done) fail(d.msg, "index", e);
    return;
  }
  // A lost ack only means the sweeper forwards the events again, idempotently.
  await ackWritten(
    env,
    done.map((d) => d.state),
  ).catch(() => undefined);
  for (const d of done) d.msg.ack();
}

/**
 * The queue handler: every item of the batch classified (classifyItems); a queue message whose
 * items all succeeded is indexed (or acked when the delivery stage indexes it), the others retried.
 */
export async function handleClassifyBatch(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const lookups = new BatchLookups(env.DB);
  const jobs = batch.messages.flatMap((msg) => {
    const items = itemsOf(msg.body);
    if (items !== null) return [{ msg, items }];
    console.error(JSON.stringify({ error: "classify: malformed queue message", body: msg.body }));
    msg.ack();
    return [];
  });
  const settled = await classifyItems(
    env,
    jobs.flatMap((j) => j.items),
    lookups,
  );
  const done: Done[] = [];
  let at = 0;
  for (const { msg, items } of jobs) {
    const mine = settled.slice(at, (at += items.length));
    const bad = mine.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (bad) {
      fail(msg, "message", bad.reason);
      continue;
    }
    // A message whose recipients all went into an active queue is indexed by the delivery stage
    // moments later, with these events and its outcomes in one write (see the header).
    const states = mine
      .map((r) => (r as PromiseFulfilledResult<Classified>).value)
      .filter((r) => r.sync !== null && !r.indexLater);
    if (states.length === 0) msg.ack(); // unknown (purged) or indexed later: nothing to write now
    done.push(...states.map((r) => ({ msg, state: r.sync as SyncState })));
  }
  await indexAll(env, done);
}
