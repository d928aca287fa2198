/**
 * Acknowledgements of events written to D1 (Outbox.ackEventsMany: the Outbox may forget them),
 * held per Outbox shard by a delivery agent so that they ride on its next request to that shard
 * (envelopes, recordOutcomes) instead of a request of their own. Those still held after
 * lingerMs go on their own, one request per shard; and at once when the agent is idle (no
 * session running and no connection kept idle for more work), since then no request of its
 * own is coming.
 *
 * DESCRIPTION
 *   new PendingAcks(env, keepAlive, busy, lingerMs = ACK_LINGER_MS)
 *   add(acks)        holds them (and arms the linger timer), or sends them now when !busy().
 *   take(name)       the acks held for Outbox `name`, removed: the caller sends them along.
 *
 * INVARIANTS
 *   An ack that is lost (its request failed, the agent was evicted) only means the Outbox keeps
 *   the events a little longer: its sweeper forwards them to D1 again after INDEX_LAG_SECONDS,
 *   and forwarding is idempotent. Nothing is ever acked before its D1 write succeeded.
 */
import { byOutbox } from "../model/ids";
import type { EventAck } from "../model/message";

export type { EventAck };

/** How long an ack waits for a request to ride on, ms. */
export const ACK_LINGER_MS = 1000;

export class PendingAcks {
  private readonly byShard = new Map<string, EventAck[]>();
  private armed = false;

  constructor(
    private readonly env: Env,
    private readonly keepAlive: (p: Promise<unknown>) => void,
    private readonly busy: () => boolean,
    private readonly lingerMs = ACK_LINGER_MS,
  ) {}

  add(acks: EventAck[]): void {
    for (const [name, inShard] of byOutbox(acks, (a) => a.id))
      this.byShard.set(name, [...(this.byShard.get(name) ?? []), ...inShard]);
    if (this.byShard.size === 0) return;
    if (!this.busy()) return this.keepAlive(this.flush());
    if (this.armed) return;
    this.armed = true;
    this.keepAlive(
      new Promise<void>((resolve) =>
        setTimeout(() => {
          this.armed = false;
          void this.flush().finally(resolve);
        }, this.lingerMs),
      ),
    );
  }

  take(name: string): EventAck[] {
    const acks = this.byShard.get(name) ?? [];
    this.byShard.delete(name);
    return acks;
  }

  private async flush(): Promise<void> {
    const all = [...this.byShard];
    this.byShard.clear();
    await Promise.all(
      all.map(([name, acks]) =>
        this.env.OUTBOX.getByName(name)
          .ackEventsMany(acks)
          .catch(() => undefined),
      ),
    );
  }
}
