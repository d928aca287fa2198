/**
 * The events of a bundle (webhooks/jobs.ts WebhookBundle) as queue messages of their own, for the
 * webhooks consumer: each gets a message-like handle, and the real queue message is settled
 * once all of them are.
 *
 * DESCRIPTION
 *   BundleLedger.expand(msg, bundle)  the bundle's events as first-attempt jobs, each with a
 *                     JobMessage whose ack() and retry() are recorded, not passed on.
 *   BundleLedger.settle(queue)  per bundle: every event acked, so the message is acked; the
 *                     events that asked for a retry (or were never settled) are sent again as
 *                     jobs of their own to `queue` (same attempt, same webhook-id, the delay
 *                     they asked for), then the message is acked. Should that send fail, the
 *                     message is retried whole, and events already delivered are delivered
 *                     again (receivers dedupe on webhook-id, as Standard Webhooks asks).
 */
import { enqueueJobs, jobsOfBundle, type WebhookBundle, type WebhookJob } from "./jobs";

/** What the consumer needs of a queue message. */
export interface JobMessage {
  readonly id: string;
  readonly attempts: number;
  ack(): void;
  retry(options?: QueueRetryOptions): void;
}

type Outcome = { kind: "ack" } | { kind: "retry"; delaySeconds?: number };

export class BundleLedger {
  private readonly bundles: { msg: Message<unknown>; jobs: WebhookJob[]; outcomes: (Outcome | null)[] }[] = [];

  /** The bundle's events, each with its own handle. */
  expand(msg: Message<unknown>, bundle: WebhookBundle): { msg: JobMessage; job: WebhookJob }[] {
    const entry = { msg, jobs: jobsOfBundle(bundle), outcomes: [] as (Outcome | null)[] };
    this.bundles.push(entry);
    return entry.jobs.map((job, i) => {
      entry.outcomes[i] = null;
      const handle: JobMessage = {
        id: `${msg.id}#${i}`,
        attempts: msg.attempts,
        ack: () => {
          entry.outcomes[i] ??= { kind: "ack" };
        },
        retry: (o) => {
          entry.outcomes[i] ??= {
            kind: "retry",
            ...(o?.delaySeconds !== undefined ? { delaySeconds: o.delaySeconds } : {}),
          };
        },
      };
      return { msg: handle, job };
    });
  }

  /** Settles every bundle's queue message (see the header). */
  async settle(queue: Queue): Promise<void> {
    await Promise.all(
      this.bundles.map(async ({ msg, jobs, outcomes }) => {
        const again = jobs.flatMap((job, i) => {
          const o = outcomes[i];
          if (o?.kind === "ack") return [];
          return [{ job, ...(o?.kind === "retry" && o.delaySeconds ? { delaySeconds: o.delaySeconds } : {}) }];
        });
        if (again.length === 0) return msg.ack();
        try {
          await enqueueJobs(queue, again);
          msg.ack();
        } catch (e) {
          console.error(
            JSON.stringify({
              error: "webhooks: re-sending a bundle's failed events failed (the bundle is retried)",
              detail: e instanceof Error ? e.message : String(e),
            }),
          );
          msg.retry({ delaySeconds: Math.min(2 ** Math.max(msg.attempts, 1), 300) });
        }
      }),
    );
  }
}
