/**
 * A message's state as Resend names it.
 *
 * DESCRIPTION
 *   lastEventOf(statuses, scheduled, complained)  Resend's `last_event` from the recipients'
 *                                     states: scheduled, queued, delivery_delayed, canceled,
 *                                     suppressed, delivered, bounced or failed; complained once
 *                                     a recipient complained (it comes after its delivery).
 *   iso(ms)                           epoch ms → ISO 8601, null-safe.
 */
import type { RcptStatus } from "./message";

/** Epoch ms as ISO 8601 (null stays null). */
export function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

/** Resend's `last_event` for a message whose recipients are in `statuses`. */
export function lastEventOf(statuses: RcptStatus[], scheduled: boolean, complained = false): string {
  if (complained) return "complained";
  const all = (s: RcptStatus) => statuses.length > 0 && statuses.every((x) => x === s);
  if (all("cancelled")) return "canceled";
  if (all("suppressed")) return "suppressed";
  if (statuses.includes("incoming") && scheduled) return "scheduled";
  if (statuses.includes("deferred")) return "delivery_delayed";
  if (statuses.some((s) => s === "incoming" || s === "ready" || s === "active")) return "queued";
  if (statuses.includes("bounced")) return "bounced";
  if (statuses.includes("expired")) return "failed";
  return "delivered";
}
