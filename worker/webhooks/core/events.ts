/*
 * NAME
 *   events - delivery-status event envelopes from recipient state transitions
 *
 * SUMMARY
 *   Builds Resend-shaped event envelopes {type, created_at, data} with the
 *   relay's additive per-recipient fields (api-conventions §5.1), and maps
 *   one recipient state transition to zero or one event.
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
 *   buildEvent(input) builds one envelope and its id: the supplied id, or eventId(email id,
 *   recipient, attempt, type), which becomes webhook-id. data.classification is classifyBounce()
 *   of the SMTP result for bounced and delayed events, "expired" for expiry, and null otherwise.
 *   toFeedItem(event) gives the pull feed's item: {id, ...envelope}.
 *
 * INVARIANTS
 *   At most one event per transition; data.terminal is true exactly for delivered, bounced,
 *   failed, suppressed and canceled; the same input always yields the same id and envelope.
 *
 * ERRORS
 *   WebhookInvariantError when a transition leaves a terminal state (a bug in the caller's state
 *   machine); RangeError from toISOString when nowMs or createdAtMs is not a valid time (a bug).
 */
import { classifyBounce, type BounceCategory } from "./classify";
import { eventId } from "./event-id";

/** The event types, Resend's names. */
export type EmailEventType =
  | "email.sent"
  | "email.delivered"
  | "email.delivery_delayed"
  | "email.bounced"
  | "email.failed"
  | "email.suppressed"
  | "email.canceled"
  | "email.complained"
  | "email.unsubscribed"
  | "email.received"
  | "relay.destination.throttled"
  | "relay.complaint_rate.exceeded";

/** Every event type, for filters and validation. */
export const EMAIL_EVENT_TYPES: readonly EmailEventType[] = [
  "email.sent",
  "email.delivered",
  "email.delivery_delayed",
  "email.bounced",
  "email.failed",
  "email.suppressed",
  "email.canceled",
  "email.complained",
  "email.unsubscribed",
  "email.received",
  "relay.destination.throttled",
  "relay.complaint_rate.exceeded",
];

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

/** The message an event is about. */
export interface MessageInfo {
  emailId: string;
  createdAtMs: number;
  from: string;
  to: readonly string[];
  subject: string;
  messageId?: string | null;
  tags?: Readonly<Record<string, string>>;
}

/** The SMTP result of the attempt, as the delivery consumer recorded it. */
export interface DeliveryDetails {
  smtpCode: number | null;
  enhancedCode: string | null;
  response: string;
  mx: string | null;
  tls: boolean | null;
}

/** The data object of an envelope (Resend's fields plus the relay's). */
export interface EventData {
  email_id: string;
  created_at: string;
  from: string;
  to: string[];
  subject: string;
  message_id?: string;
  tags: Record<string, string>;
  recipient: string;
  attempt: number;
  terminal: boolean;
  delivery: {
    smtp_code: number | null;
    enhanced_code: string | null;
    response: string;
    mx: string | null;
    tls: boolean | null;
  } | null;
  classification: BounceCategory | null;
  bounce?: { type: "Permanent"; subType: BounceCategory; message: string };
  failed?: { reason: string };
  suppressed?: { type: string; message: string };
  /** A complaint's ARF Feedback-Type (RFC 5965: abuse, fraud, virus, other). */
  complaint?: { feedback_type: string };
  /** email.unsubscribed: the topic the email named (null: all of the tenant's mail) and how (one-click, mailto). */
  unsubscribe?: { topic: string | null; method: string };
  /** relay.destination.throttled: the reply rule that fired, what it did, the key it acted on, and until when. */
  throttle?: { rule: string; action: string; rate?: string; policy_key: string; suspended_until: string };
  /** relay.complaint_rate.exceeded: the tenant's rate, the line, the counts, and until when its bulk mail is paused. */
  complaint_rate?: { rate: number; threshold: number; delivered: number; complained: number; paused_until: string };
}

/** The body pushed to webhooks: Resend's envelope. */
export interface EventEnvelope {
  type: EmailEventType;
  created_at: string;
  data: EventData;
}

/** An envelope with its id (the webhook-id). */
export interface BuiltEvent {
  id: string;
  envelope: EventEnvelope;
}

/** Input of buildEvent. */
export interface EventInput {
  type: EmailEventType;
  message: MessageInfo;
  recipient: string;
  attempt: number;
  nowMs: number;
  delivery?: DeliveryDetails | null;
  /** Failure or suppression reason. */
  reason?: string | null;
  /** relay.destination.throttled: the reply rule, what it did (suspend, rate and its rate, ceiling, defer, bounce), the policy key and until when (epoch ms). */
  throttle?: { rule: string; action?: string; rate?: string; policyKey: string; suspendedUntilMs: number } | null;
  /** email.unsubscribed: how (one-click, mailto); the topic is `reason`. */
  method?: string | null;
  /** relay.complaint_rate.exceeded: as data.complaint_rate, paused_until in epoch ms. */
  complaintRate?: {
    rate: number;
    threshold: number;
    delivered: number;
    complained: number;
    paused_until: number;
  } | null;
  /** Overrides the derived id. */
  id?: string;
}

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

const TERMINAL_TYPES: readonly EmailEventType[] = [
  "email.delivered",
  "email.bounced",
  "email.failed",
  "email.suppressed",
  "email.canceled",
];

function classificationFor(type: EmailEventType, delivery: DeliveryDetails | null): BounceCategory | null {
  if (type === "email.failed" && delivery === null) return null;
  if (type !== "email.bounced" && type !== "email.delivery_delayed" && type !== "email.failed") return null;
  if (delivery === null) return "unknown";
  return classifyBounce(delivery).category;
}

function deliveryField(d: DeliveryDetails | null): EventData["delivery"] {
  if (d === null) return null;
  return { smtp_code: d.smtpCode, enhanced_code: d.enhancedCode, response: d.response, mx: d.mx, tls: d.tls };
}

/** Builds one envelope and its id. */
export function buildEvent(input: EventInput): BuiltEvent {
  const delivery = input.delivery ?? null;
  const m = input.message;
  const expired = input.type === "email.failed" && input.reason === "expired";
  const classification = expired ? "expired" : classificationFor(input.type, delivery);
  const data: EventData = {
    email_id: m.emailId,
    created_at: new Date(m.createdAtMs).toISOString(),
    from: m.from,
    to: [...m.to],
    subject: m.subject,
    ...(m.messageId ? { message_id: m.messageId } : {}),
    tags: { ...(m.tags ?? {}) },
    recipient: input.recipient,
    attempt: input.attempt,
    terminal: TERMINAL_TYPES.includes(input.type),
    delivery: deliveryField(delivery),
    classification,
  };
  if (input.type === "email.bounced") {
    data.bounce = {
      type: "Permanent",
      subType: classification ?? "unknown",
      message: delivery?.response ?? input.reason ?? "",
    };
  }
  if (input.type === "email.failed") data.failed = { reason: input.reason ?? "internal error" };
  if (input.type === "email.suppressed")
    data.suppressed = { type: input.reason ?? "suppressed", message: delivery?.response ?? "" };
  if (input.type === "email.complained") data.complaint = { feedback_type: input.reason ?? "abuse" };
  if (input.type === "email.unsubscribed")
    data.unsubscribe = { topic: input.reason ?? null, method: input.method ?? "one-click" };
  if (input.complaintRate)
    data.complaint_rate = {
      ...input.complaintRate,
      paused_until: new Date(input.complaintRate.paused_until).toISOString(),
    };
  if (input.type === "relay.destination.throttled" && input.throttle) {
    data.throttle = {
      rule: input.throttle.rule,
      action: input.throttle.action ?? "suspend",
      ...(input.throttle.rate ? { rate: input.throttle.rate } : {}),
      policy_key: input.throttle.policyKey,
      suspended_until: new Date(input.throttle.suspendedUntilMs).toISOString(),
    };
  }
  const id =
    input.id ?? eventId({ emailId: m.emailId, recipient: input.recipient, attempt: input.attempt, type: input.type });
  return { id, envelope: { type: input.type, created_at: new Date(input.nowMs).toISOString(), data } };
}

/** The pull feed's item for an event: the same envelope plus its id. */
export function toFeedItem(event: BuiltEvent): EventEnvelope & { id: string } {
  return { id: event.id, ...event.envelope };
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
