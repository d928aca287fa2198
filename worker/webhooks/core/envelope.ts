/*
 * NAME
 *   envelope - the delivery-status event envelope and how one is built
 *
 * SUMMARY
 *   The Resend-shaped envelope {type, created_at, data} with the relay's additive
 *   per-recipient fields (api-conventions §5.1), the event types, and buildEvent.
 *
 * DESCRIPTION
 *   buildEvent(input) builds one envelope and its id: the supplied id, or eventId(email id,
 *   recipient, attempt, type), which becomes webhook-id. data.classification is classifyBounce()
 *   of the SMTP result for bounced and delayed events, "expired" for expiry, and null otherwise.
 *   toFeedItem(event) gives the pull feed's item: {id, ...envelope}. EMAIL_EVENT_TYPES lists
 *   every type, for filters and validation. Which transition gives which event is events.ts.
 *
 * INVARIANTS
 *   data.terminal is true exactly for delivered, bounced, failed, suppressed and canceled; the
 *   same input always yields the same id and envelope.
 *
 * ERRORS
 *   RangeError from toISOString when nowMs or createdAtMs is not a valid time (a bug).
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
  /**
   * relay.destination.throttled: the reply rule, what it did (suspend, rate and its rate, ceiling,
   * defer, bounce), the policy key and until when (epoch ms).
   */
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
