/**
 * Message ids and Outbox shards.
 *
 * DESCRIPTION
 *   A message id is a UUID (version 4 layout, so Resend clients accept it) whose first two hex
 *   digits are the number of its Outbox shard. The id alone therefore names its shard, and the
 *   shard count can change without moving anything: old ids keep their shard number.
 *   Bodies live in R2 at `mess/<id>`, so `mess/<hh>` lists one shard's bodies.
 *
 * INVARIANTS
 *   0 ≤ shard < 256; shardOf(newMessageId(s)) === s.
 */

/** The largest supported shard count (two hex digits). */
export const MAX_SHARDS = 256;

const ID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A new message id in `shard`. */
export function newMessageId(shard: number): string {
  return shardHex(shard) + crypto.randomUUID().slice(2);
}

/** The two-hex-digit prefix of a shard's ids and body keys. */
export function shardHex(shard: number): string {
  if (!Number.isInteger(shard) || shard < 0 || shard >= MAX_SHARDS) throw new RangeError(`shard ${shard} out of range`);
  return shard.toString(16).padStart(2, "0");
}

/** True when `id` has the shape of a message id. */
export function isMessageId(id: string): boolean {
  return ID_RE.test(id);
}

/** The shard a message id names. */
export function shardOf(id: string): number {
  return parseInt(id.slice(0, 2), 16);
}

/** The Durable Object name of a shard. */
export function outboxName(shard: number): string {
  return `outbox-${shardHex(shard)}`;
}

/** The Outbox stub of a message. */
export function outboxOf(env: Env, id: string) {
  return env.OUTBOX.getByName(outboxName(shardOf(id)));
}

/** `items` grouped by the Outbox (DO name) of their message id, in order: one request per shard. */
export function byOutbox<T>(items: Iterable<T>, idOf: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const name = outboxName(shardOf(idOf(item)));
    const list = groups.get(name);
    if (list) list.push(item);
    else groups.set(name, [item]);
  }
  return groups;
}

/** The R2 key of a message body. */
export function bodyKey(id: string): string {
  return `mess/${id}`;
}

/** A random shard. */
export function randomShard(count: number): number {
  const b = new Uint32Array(1);
  crypto.getRandomValues(b);
  return (b[0] as number) % count;
}

/** How many messages, and for how long (ms), an isolate keeps sending to one shard. */
export const SHARD_SPAN = { messages: 64, ms: 1000 } as const;

/**
 * The shard for requests without an idempotency key: the same one for up to SHARD_SPAN messages
 * or ms, then another picked at random. Mail accepted close together in small requests so
 * shares a shard, and a classify batch (10 queue messages) reaches one or two Outbox shards
 * instead of about six: one classifyMany and one admission request per shard, so about 0.8 DO
 * requests fewer per email when mail trickles in. A request of more messages than the span left
 * (a batch of 100) goes to a shard of its own, as before: a burst of batches still spreads over
 * the shards instead of putting thousands of messages, and all their Outbox calls at delivery,
 * on one object. Many isolates, each on its own shard for a second, spread the load.
 */
export class ShardAffinity {
  private shard = -1;
  private left = 0;
  private until = 0;
  constructor(
    private readonly span: { messages: number; ms: number } = SHARD_SPAN,
    private readonly pick: (count: number) => number = randomShard,
  ) {}

  /** The shard for a request of `messages` messages at `nowMs`. */
  next(count: number, nowMs: number, messages = 1): number {
    if (this.left < messages || nowMs >= this.until || this.shard >= count) {
      this.shard = this.pick(count);
      this.left = this.span.messages;
      this.until = nowMs + this.span.ms;
    }
    this.left -= messages;
    return this.shard;
  }
}

const affinity = new ShardAffinity();

/** Isolates a local runtime plays (affineShard's `isolate`): production has many, wrangler dev one. */
const played = new Map<string, ShardAffinity>();

/**
 * This isolate's current shard (ShardAffinity) for a request of `messages` messages without an
 * idempotency key. `isolate` (development and test only: bench:cost's spread case) names one of
 * several isolates this one plays, each with its own affinity, as production's many isolates
 * each stick to a shard of their own.
 */
export function affineShard(count: number, messages = 1, nowMs = Date.now(), isolate?: string): number {
  if (isolate === undefined) return affinity.next(count, nowMs, messages);
  let a = played.get(isolate);
  if (!a) {
    if (played.size >= 256) played.clear();
    played.set(isolate, (a = new ShardAffinity()));
  }
  return a.next(count, nowMs, messages);
}

/** The shard for an idempotency key: every retry of a request reaches the same record. */
export async function shardForKey(tenant: string, key: string, count: number): Promise<number> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`${tenant}\n${key}`));
  return new DataView(digest).getUint32(0) % count;
}
