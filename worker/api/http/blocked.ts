/**
 * Why each waiting recipient of a message waits, for GET /emails/:id: the Transport DOs explain
 * their in-core entries (core/scheduler.ts explainMessage); recipients outside the core wait for
 * their retry time, their scheduled time, or an operator's hold.
 *
 * DESCRIPTION
 *   explainWaiting(env, view)  address (lower case) → {blocked_by, blocked_until (epoch ms|null)}
 *                              for every recipient in `ready`, `active` or `deferred`. Best effort:
 *                              a Transport DO that cannot answer leaves the Outbox's own
 *                              blocked_by in place.
 *   blockedLabel(b)            the stable code for a core reason: in_flight, window_full,
 *                              destination_dead, rate_delay, suspended, policy_concurrency,
 *                              rate_limit, connect_interval, cap_reached (warmup when an IP
 *                              warm-up's), transport_dead, process_limit, queued, and
 *                              active_queue_full (waiting in the Transport DO's incoming queue);
 *                              a suspension or throttle set by a reply rule shows as
 *                              reply_rule:<name>.
 */
import type { WaitReason } from "../../model/transport";
import type { MessageView } from "../../model/message";
import { schedulerNames } from "../../model/delivery";
import { settingsOf } from "../../settings/settings";

/** A waiting recipient's reason and until when (epoch ms, null when open-ended). */
export interface Waiting {
  blocked_by: string;
  blocked_until: number | null;
}

/** The stable code and time of a core reason. */
export function blockedLabel(b: WaitReason): Waiting {
  const at = (s: number | null) => (s && s > 0 ? s * 1000 : null);
  switch (b.kind) {
    case "concurrency":
      return { blocked_by: "window_full", blocked_until: null };
    case "destination_dead":
      return { blocked_by: "destination_dead", blocked_until: at(b.until) };
    case "rate_delay":
      return { blocked_by: "rate_delay", blocked_until: at(b.until) };
    case "policy":
      return {
        blocked_by:
          b.reason === "suspended"
            ? (b.label ?? "suspended")
            : b.reason === "rate"
              ? (b.label ?? "rate_limit")
              : b.reason === "interval"
                ? "connect_interval"
                : b.reason === "cap"
                  ? (b.label ?? "cap_reached")
                  : "policy_concurrency",
        blocked_until: at(b.until),
      };
    case "transport_dead":
      return { blocked_by: "transport_dead", blocked_until: at(b.until) };
    default:
      return { blocked_by: b.kind, blocked_until: null };
  }
}

const WAITING = new Set(["ready", "active", "deferred"]);

/** Explains the message's waiting recipients, keyed by lower-cased address. */
export async function explainWaiting(env: Env, view: MessageView): Promise<Map<string, Waiting>> {
  const out = new Map<string, Waiting>();
  const waiting = view.recipients.filter((r) => WAITING.has(r.status));
  for (const r of waiting) {
    // Outside the core: what the Outbox recorded (e.g. destination_dead), else the retry, until the next attempt.
    const until = r.status === "deferred" ? r.next_attempt_at : null;
    if (r.blocked_by) out.set(r.email.toLowerCase(), { blocked_by: r.blocked_by, blocked_until: until });
    else if (until !== null) out.set(r.email.toLowerCase(), { blocked_by: "retry", blocked_until: until });
  }
  // Every Transport DO of the transports involved (a transport's shards, TRANSPORT_SHARDS).
  const shards = settingsOf(env).transportShards;
  const transports = [...new Set(waiting.map((r) => r.transport).filter((t): t is string => t !== null))].flatMap((t) =>
    schedulerNames(t, shards),
  );
  await Promise.all(
    transports.map(async (t) => {
      try {
        for (const x of await env.TRANSPORT_QUEUE.getByName(t).explain(view.id)) {
          for (const r of x.rcpts) out.set(r.address.toLowerCase(), blockedLabel(x.blockedBy));
        }
      } catch (e) {
        console.error(
          JSON.stringify({ error: "explain failed", transport: t, detail: e instanceof Error ? e.message : String(e) }),
        );
      }
    }),
  );
  return out;
}
