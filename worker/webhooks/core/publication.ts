/*
 * NAME
 *   publication - which pushed events a batch of recorded transitions gives
 *
 * SUMMARY
 *   Turns the Outbox's internal event rows (one per recipient transition)
 *   into Resend envelopes with their ids (events.ts), deciding the
 *   delivery_delayed notices against the stored per-recipient notice state.
 *
 * DESCRIPTION
 *   planPublication(messages, notices, cfg) walks each message's rows in
 *   Outbox order and returns:
 *     events   the envelopes to store and push, each with its id (the
 *              webhook-id), type, recipient, time, `body` (the JSON text
 *              that is stored, signed and sent, byte for byte) and the
 *              Outbox seq of the row it comes from;
 *     notices  the changed notice states, to store;
 *     recheck  ids of deferral events counted by an earlier publication:
 *              whatever that one decided is in the store, so the shell
 *              re-reads those ids instead of deciding again.
 *   Internal rows map as follows:
 *     email.accepted, email.scheduled   nothing (not pushed);
 *     email.queued                      email.sent (attempt 0); a message-level
 *                                       row (recipient null) expands to
 *                                       one per address of data.recipients;
 *     email.suppressed                  email.suppressed (reason from data);
 *     email.canceled                    email.canceled, one per recipient: a
 *                                       message-level row (recipient null)
 *                                       expands to the message's cancelled
 *                                       recipients;
 *     email.delivery_delayed            a deferral: email.delivery_delayed
 *                                       when shouldNotifyDelay says so; a delay
 *                                       notice that came back by mail after
 *                                       delivery (data.late) always, as it is;
 *     email.delivered, email.bounced    the same type, with data.delivery;
 *     email.failed                      email.failed (reason "expired" or
 *                                       the recorded one).
 *   A deferral row whose Outbox seq is <= the notice's lastSourceSeq was
 *   already counted; it goes to `recheck`, never counted twice.
 *
 *   deliveryFrom(response) reads the recorded SMTP result
 *   {code, enhanced, text, mx, tls} into DeliveryDetails.
 *
 * INVARIANTS
 *   Pure and deterministic: the same rows and notice states give the same
 *   ids and bodies, so a repeated publication pushes identical bytes under
 *   the same webhook-id. Unknown internal types are skipped.
 *
 * ERRORS
 *   None thrown for data problems: malformed row data reads as absent.
 */

import { buildEvent, type BuiltEvent, type DeliveryDetails, type EmailEventType, type MessageInfo } from "./envelope";
import { eventForTransition, INITIAL_DELAY_NOTICE, type DelayNoticeState, type EventConfig } from "./events";

/** One internal event row as recorded by the Outbox. */
export interface SourceEvent {
  /** The Outbox event seq (monotonic per message). */
  seq: number;
  type: string;
  recipient: string | null;
  createdAtMs: number;
  data: Record<string, unknown>;
}

/** A message and its new rows. */
export interface SourceMessage {
  message: MessageInfo;
  tenant: string;
  /** Recipients now `cancelled`, for expanding a message-level email.canceled. */
  cancelledRecipients: readonly string[];
  events: readonly SourceEvent[];
}

/** Stored notice state of one recipient. */
export interface NoticeRecord {
  emailId: string;
  recipient: string;
  state: DelayNoticeState;
  /** Outbox seq of the last deferral counted. */
  lastSourceSeq: number;
}

/** An envelope to store and push. */
export interface PlannedEvent {
  id: string;
  tenant: string;
  type: EmailEventType;
  emailId: string;
  recipient: string;
  createdAtMs: number;
  /** The envelope as JSON text: stored, signed and sent as is. */
  body: string;
  /** The Outbox seq of the internal row it comes from. */
  sourceSeq: number;
}

/** Result of planPublication. */
export interface PublicationPlan {
  events: PlannedEvent[];
  notices: NoticeRecord[];
  recheck: string[];
}

/** Key of a notice record. */
export function noticeKey(emailId: string, recipient: string): string {
  return `${emailId.length}:${emailId}|${recipient}`;
}

function str(v: unknown): string | null {
  return typeof v === "string" ? v : null;
}

/** The recorded SMTP result as DeliveryDetails, or null. */
export function deliveryFrom(response: unknown): DeliveryDetails | null {
  if (response === null || typeof response !== "object") return null;
  const r = response as Record<string, unknown>;
  return {
    smtpCode: typeof r.code === "number" ? r.code : null,
    enhancedCode: str(r.enhanced),
    response: str(r.text) ?? "",
    mx: str(r.mx),
    tls: typeof r.tls === "boolean" ? r.tls : null,
  };
}

function attemptOf(data: Record<string, unknown>): number {
  return typeof data.attempt === "number" && Number.isFinite(data.attempt) ? data.attempt : 0;
}

function planned(m: SourceMessage, row: SourceEvent, e: BuiltEvent): PlannedEvent {
  return {
    id: e.id,
    tenant: m.tenant,
    type: e.envelope.type,
    emailId: m.message.emailId,
    recipient: e.envelope.data.recipient,
    createdAtMs: row.createdAtMs,
    body: JSON.stringify(e.envelope),
    sourceSeq: row.seq,
  };
}

const DIRECT: Readonly<Record<string, EmailEventType>> = {
  "email.queued": "email.sent",
  "email.suppressed": "email.suppressed",
  "email.delivered": "email.delivered",
  "email.bounced": "email.bounced",
  "email.failed": "email.failed",
  /** Only a late delay notice (data.late) is published directly; deferrals go through the notice state. */
  "email.delivery_delayed": "email.delivery_delayed",
  "email.complained": "email.complained",
  "email.unsubscribed": "email.unsubscribed",
  "relay.complaint_rate.exceeded": "relay.complaint_rate.exceeded",
  "relay.destination.throttled": "relay.destination.throttled",
};

/** Envelopes for a row that is not a deferral. */
function directEvents(m: SourceMessage, row: SourceEvent): BuiltEvent[] {
  const base = { message: m.message, nowMs: row.createdAtMs };
  if (row.type === "email.canceled") {
    const rcpts = row.recipient !== null ? [row.recipient] : m.cancelledRecipients;
    return rcpts.map((recipient) => buildEvent({ ...base, type: "email.canceled", recipient, attempt: 0 }));
  }
  if (row.type === "email.queued" && row.recipient === null) {
    const rcpts = Array.isArray(row.data.recipients)
      ? row.data.recipients.filter((r): r is string => typeof r === "string")
      : [];
    return rcpts.map((recipient) => buildEvent({ ...base, type: "email.sent", recipient, attempt: 0 }));
  }
  const type = DIRECT[row.type];
  if (type === undefined || row.recipient === null) return [];
  const noAttempt = [
    "email.sent",
    "email.suppressed",
    "email.complained",
    "email.unsubscribed",
    "relay.complaint_rate.exceeded",
  ].includes(type);
  const delivery = noAttempt ? null : deliveryFrom(row.data.response);
  const reason = str(row.data.reason);
  const attempt = noAttempt ? 0 : attemptOf(row.data);
  const throttle =
    type === "relay.destination.throttled"
      ? {
          rule: str(row.data.rule) ?? "",
          action: str(row.data.action) ?? "suspend",
          ...(str(row.data.rate) ? { rate: str(row.data.rate)! } : {}),
          policyKey: str(row.data.policy_key) ?? "",
          suspendedUntilMs: Number(row.data.suspended_until) || row.createdAtMs,
        }
      : null;
  const complaintRate =
    type === "relay.complaint_rate.exceeded"
      ? (row.data as { rate: number; threshold: number; delivered: number; complained: number; paused_until: number })
      : null;
  return [
    buildEvent({
      ...base,
      type,
      recipient: row.recipient,
      attempt,
      delivery,
      reason,
      throttle,
      method: str(row.data.method),
      complaintRate,
    }),
  ];
}

/** Plans the envelopes of a batch of messages' rows (see the header). */
export function planPublication(
  messages: readonly SourceMessage[],
  notices: ReadonlyMap<string, NoticeRecord>,
  cfg: EventConfig,
): PublicationPlan {
  const events: PlannedEvent[] = [];
  const recheck: string[] = [];
  const changed = new Map<string, NoticeRecord>();
  for (const m of messages) {
    for (const row of m.events) {
      if (row.type !== "email.delivery_delayed" || row.data.late === true) {
        for (const e of directEvents(m, row)) events.push(planned(m, row, e));
        continue;
      }
      if (row.recipient === null) continue;
      const key = noticeKey(m.message.emailId, row.recipient);
      const prior = changed.get(key) ??
        notices.get(key) ?? {
          emailId: m.message.emailId,
          recipient: row.recipient,
          state: INITIAL_DELAY_NOTICE,
          lastSourceSeq: -1,
        };
      const t = {
        message: m.message,
        recipient: row.recipient,
        from: "active" as const,
        to: "deferred" as const,
        attempt: attemptOf(row.data),
        delivery: deliveryFrom(row.data.response),
        reason: str(row.data.reason),
      };
      if (row.seq <= prior.lastSourceSeq) {
        // Counted by an earlier publication: its decision is in the store.
        recheck.push(buildEvent({ ...t, type: "email.delivery_delayed", nowMs: row.createdAtMs }).id);
        continue;
      }
      const r = eventForTransition(prior.state, t, row.createdAtMs, cfg);
      changed.set(key, { ...prior, state: r.notice, lastSourceSeq: row.seq });
      if (r.event !== null) events.push(planned(m, row, r.event));
    }
  }
  return { events, notices: [...changed.values()], recheck };
}

/** Whether an endpoint's event filter (null = every event) takes `type`. */
export function endpointWants(filter: readonly string[] | null, type: string): boolean {
  return filter === null || filter.includes(type);
}
