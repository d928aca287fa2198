/*
 * NAME
 *   events - delivery-status events from recipient state transitions
 *
 * SUMMARY
 *   Maps one recipient state transition to zero or one delivery-status event; the envelope
 *   itself (types, fields, buildEvent, toFeedItem) is envelope.ts.
 *
 * DESCRIPTION
 *   eventForTransition(notice, t, nowMs, cfg) takes the recipient's delay notice state and one
 *   transition t (from -> to, with the attempt and SMTP result); returns the new notice state
 *   and the event or null:
 *     incoming -> ready|active          email.sent             (not terminal)
 *     * -> deferred                      email.delivery_delayed (see below)
 *     * -> delivered                     email.delivered
 *     * -> bounced                       email.bounced   (+ bounce{})
 *     * -> expired                       email.failed    (failed.reason "expired")
 *     * -> failed (internal error)       email.failed    (failed.reason t.reason)
 *     * -> suppressed                    email.suppressed (+ suppressed{})
 *     * -> cancelled                     email.canceled
 *   A complaint about a delivered recipient (feedback loop, not a state transition) is
 *   email.complained, built by buildEvent with the ARF Feedback-Type as its reason
 *   (data.complaint.feedback_type); an unsubscribe (RFC 8058 link or mailto) email.unsubscribed
 *   (data.unsubscribe); the complaint-rate brake relay.complaint_rate.exceeded.
 *   Any other transition (ready -> active, deferred -> ready, ...) gives null.
 *   "failed" is the relay's terminal state for internal errors.
 *
 *   delivery_delayed is sent on the first deferral, then on every Nth deferral counted from the
 *   first (cfg.delayedEveryNth, 0 = never), or when cfg.delayedMinIntervalMs have passed since
 *   the last notice (0 = never); either condition suffices.
 *
 * INVARIANTS
 *   At most one event per transition; the same input always yields the same notice state and
 *   event.
 *
 * ERRORS
 *   WebhookInvariantError when a transition leaves a terminal state (a bug in the caller's state
 *   machine); RangeError from toISOString when nowMs or createdAtMs is not a valid time (a bug).
 */
import { buildEvent, type BuiltEvent, type DeliveryDetails, type EmailEventType, type MessageInfo } from "./envelope";

/** A recipient's state in the relay ("failed" = internal error). */
export type RecipientState =
  | "incoming"
  | "ready"
  | "active"
  | "deferred"
  | "delivered"
  | "bounced"
  | "expired"
  | "suppressed"
  | "cancelled"
  | "failed";

/** The terminal recipient states. */
export const TERMINAL_STATES: readonly RecipientState[] = [
  "delivered",
  "bounced",
  "expired",
  "suppressed",
  "cancelled",
  "failed",
];

/** One recipient state transition. */
export interface RecipientTransition {
  message: MessageInfo;
  recipient: string;
  from: RecipientState;
  to: RecipientState;
  attempt: number;
  delivery?: DeliveryDetails | null;
  reason?: string | null;
  id?: string;
}

/** Per-recipient delay-notice state: plain, versioned, JSON-serialisable. */
export interface DelayNoticeState {
  v: 1;
  deferrals: number;
  lastNoticeMs: number | null;
}

/** When to repeat email.delivery_delayed after the first deferral. */
export interface EventConfig {
  /** Notify on every Nth deferral after the first; default 0 (never). */
  delayedEveryNth: number;
  /** Notify when this many ms have passed since the last notice; default 0 (never). */
  delayedMinIntervalMs: number;
}

/** Default event configuration: delivery_delayed on the first deferral only. */
export const DEFAULT_EVENT_CONFIG: EventConfig = { delayedEveryNth: 0, delayedMinIntervalMs: 0 };

/** A fresh delay-notice state. */
export const INITIAL_DELAY_NOTICE: DelayNoticeState = { v: 1, deferrals: 0, lastNoticeMs: null };

/** Raised only for bugs (a transition out of a terminal state). */
export class WebhookInvariantError extends Error {
  /** Brand for checks across realms, instead of instanceof. */
  readonly isWebhookInvariantError = true;
  constructor(message: string) {
    super(message);
    this.name = "WebhookInvariantError";
  }
}

/** Whether a deferral should produce email.delivery_delayed, given the count including it. */
export function shouldNotifyDelay(
  notice: DelayNoticeState,
  deferrals: number,
  nowMs: number,
  cfg: EventConfig,
): boolean {
  if (deferrals === 1 || notice.lastNoticeMs === null) return true;
  if (cfg.delayedEveryNth > 0 && (deferrals - 1) % cfg.delayedEveryNth === 0) return true;
  return cfg.delayedMinIntervalMs > 0 && nowMs - notice.lastNoticeMs >= cfg.delayedMinIntervalMs;
}

const TYPE_FOR_TERMINAL: Readonly<Record<string, EmailEventType>> = {
  delivered: "email.delivered",
  bounced: "email.bounced",
  expired: "email.failed",
  failed: "email.failed",
  suppressed: "email.suppressed",
  cancelled: "email.canceled",
};

function typeFor(t: RecipientTransition): EmailEventType | "deferral" | null {
  if (t.from === t.to) return null;
  if (t.to === "deferred") return "deferral";
  const terminal = TYPE_FOR_TERMINAL[t.to];
  if (terminal !== undefined) return terminal;
  if (t.from === "incoming" && (t.to === "ready" || t.to === "active")) return "email.sent";
  return null;
}

/** Maps one recipient transition to zero or one event, updating the delay-notice state. */
export function eventForTransition(
  notice: DelayNoticeState,
  t: RecipientTransition,
  nowMs: number,
  cfg: EventConfig = DEFAULT_EVENT_CONFIG,
): { notice: DelayNoticeState; event: BuiltEvent | null } {
  if (TERMINAL_STATES.includes(t.from)) {
    throw new WebhookInvariantError(
      `recipient ${t.recipient} of ${t.message.emailId} left terminal state ${t.from} for ${t.to}`,
    );
  }
  const kind = typeFor(t);
  if (kind === null) return { notice, event: null };
  const base = {
    message: t.message,
    recipient: t.recipient,
    attempt: t.attempt,
    nowMs,
    delivery: t.delivery ?? null,
    ...(t.id ? { id: t.id } : {}),
  };
  if (kind !== "deferral") {
    const reason = t.to === "expired" ? "expired" : (t.reason ?? null);
    return { notice, event: buildEvent({ ...base, type: kind, reason }) };
  }
  const deferrals = notice.deferrals + 1;
  if (!shouldNotifyDelay(notice, deferrals, nowMs, cfg)) return { notice: { ...notice, deferrals }, event: null };
  return {
    notice: { v: 1, deferrals, lastNoticeMs: nowMs },
    event: buildEvent({ ...base, type: "email.delivery_delayed", reason: t.reason ?? null }),
  };
}
