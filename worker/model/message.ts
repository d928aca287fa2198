/**
 * The Outbox's records as its RPC methods take and return them (plain, structured-cloneable).
 *
 * DESCRIPTION
 *   RcptStatus and FINAL_STATUSES are the recipient state machine (architecture.md):
 *   incoming → ready → active → delivered | bounced | expired | suppressed | cancelled, and
 *   active ↔ deferred (with next_attempt_at). NewMessage is what the API hands over on accept,
 *   MessageView what GET /emails/:id and the index are built from, OutboxEvent a recorded
 *   transition waiting to be forwarded to D1.
 */

/** A recipient's state. */
export type RcptStatus =
  "incoming" | "ready" | "active" | "deferred" | "delivered" | "bounced" | "expired" | "suppressed" | "cancelled";

/** States a recipient never leaves. */
export const FINAL_STATUSES: readonly RcptStatus[] = ["delivered", "bounced", "expired", "suppressed", "cancelled"];

/** The Resend-visible fields of a message, kept for GET /emails/:id and the index. */
export interface MessageSummary {
  from: string;
  to: string[];
  cc: string[] | null;
  bcc: string[] | null;
  reply_to: string[] | null;
  subject: string | null;
  html: string | null;
  text: string | null;
  tags: { name: string; value: string }[] | null;
  /** The Message-ID header, angle brackets included. */
  message_id: string;
  /** The topic a one-click unsubscribe from this email names (the send request's unsubscribe.topic). */
  unsubscribe_topic?: string;
  /** The email carries one-click unsubscribe: bulk mail, which an unsubscribe holds back (suppression scopes). */
  bulk?: true;
  /** Resend's topic_id the send named (the email is bulk mail of that topic). */
  topic_id?: string;
  /** Its attachments, in the composed message's order (GET /emails/:id/attachments; the bytes are in the kept copy). */
  attachments?: SentAttachment[];
  /** What the compliance check at send time warned of (worker/compliance/): each rule and the reply a receiver would give. */
  warnings?: ComplianceWarning[];
}

/** An attachment of a sent email, as Resend's attachment endpoints describe it. */
export interface SentAttachment {
  id: string;
  filename: string | null;
  size: number;
  content_type: string;
  content_disposition: "inline" | "attachment";
  content_id: string | null;
}

/** One warning of the compliance check (worker/compliance/core/rules.ts Warning). */
export interface ComplianceWarning {
  rule: string;
  code: number;
  enhanced: string;
  message: string;
}

/** The bulk mail a message is, for suppressions: its unsubscribe topic (null: none); absent for transactional mail. */
export function bulkOf(
  summary: Pick<MessageSummary, "bulk" | "unsubscribe_topic">,
): { topic: string | null } | undefined {
  return summary.bulk ? { topic: summary.unsubscribe_topic ?? null } : undefined;
}

/** A message to store on accept (its body is already in R2). */
export interface NewMessage {
  id: string;
  createdAt: number;
  /** Epoch ms, or null to send at once. */
  scheduledAt: number | null;
  mailFrom: string;
  rcptTo: string[];
  size: number;
  summary: MessageSummary;
  /** The message text when it is small enough to keep in the Outbox row (INLINE_BODY_BYTES); else it is in R2. */
  body?: string | Uint8Array;
  /**
   * The classify stage's decisions, made by the accepting worker (one per recipient; absent when
   * its look-ups failed, and ignored for a scheduled message): the Outbox stores them with the
   * recipients and admits the message in the same request, with no classify queue message.
   */
  decisions?: ClassifyResult[];
  /**
   * The domain of the per-recipient VERP envelope senders (worker/mail/verp.ts): a verified
   * sending domain's return-path host, or the operator's BOUNCE_DOMAIN; absent: mailFrom is sent.
   */
  returnPath?: string | null;
}

/** An idempotency key and the hash of the request it guards. */
export interface IdempotencyClaim {
  key: string;
  hash: string;
}

/** The response a request produced, replayed for a retry with the same key. */
export interface StoredResponse {
  status: number;
  /** The JSON body, as text (replayed byte for byte). */
  body: string;
}

/** Accept: the whole request's messages, and its idempotency record, in one transaction. */
export interface AcceptRequest {
  tenant: string;
  idempotency: IdempotencyClaim | null;
  messages: NewMessage[];
  response: StoredResponse;
  /** When the accepting worker began writing the bodies that are not inline to R2 (epoch ms); else their createdAt. */
  bodiesAt?: number;
}

/** Outcome of reserving or using an idempotency key. */
export type IdempotencyResult =
  { kind: "fresh" } | { kind: "replay"; response: StoredResponse } | { kind: "mismatch" } | { kind: "in_flight" };

/** A recipient as the status API shows it. */
export interface RcptView {
  idx: number;
  email: string;
  status: RcptStatus;
  transport: string | null;
  nexthop: string | null;
  attempts: number;
  next_attempt_at: number | null;
  /** The last SMTP response as JSON text, or null. */
  last_response: string | null;
  blocked_by: string | null;
  updated_at: number;
}

/** A message as the status API and the index see it. */
export interface MessageView {
  id: string;
  tenant: string;
  created_at: number;
  scheduled_at: number | null;
  state: "open" | "done";
  summary: MessageSummary;
  recipients: RcptView[];
  /** A feedback-loop complaint was recorded about one of its recipients. */
  complained?: boolean;
}

/** A recorded transition, to be forwarded to D1's event log. */
export interface OutboxEvent {
  seq: number;
  message_id: string;
  tenant: string;
  type: string;
  recipient: string | null;
  created_at: number;
  /** Event details as JSON text. */
  data: string;
  /** Kept in a row written anyway, not an event row (storage/outbox-forward.ts). */
  kept?: boolean;
}

/** What the index sync needs: the message and its unforwarded events. */
export interface SyncState {
  view: MessageView;
  events: OutboxEvent[];
}

/** Work for the classify stage: the message's still-incoming recipients. */
export interface ClassifyWork {
  id: string;
  tenant: string;
  createdAt: number;
  mailFrom: string;
  /** transport/nexthop are set once the recipient's decision was recorded. */
  rcpts: { idx: number; address: string; transport: string | null; nexthop: string | null }[];
  /** The core message id to admit under when it is not the message id: a released or requeued message's new attempt (`<id>#<n>`). */
  admitId?: string;
  /** Bulk mail (one-click unsubscribe) and its topic; absent for transactional mail. */
  bulk?: { topic: string | null };
  /** The sender's campaign (its `campaign` tag): the Transport DO's jobid policy field. */
  campaign?: string;
  /** The message's tags (the Transport DO keeps those named in policy_tags). */
  tags?: { name: string; value: string }[];
}

/** The classify stage's decision for one recipient. */
export type ClassifyResult =
  | { idx: number; address: string; status: "ready"; transport: string; nexthop: string }
  | { idx: number; address: string; status: "suppressed"; reason: string };

/** An outcome reported by the delivery stage for one recipient. */
export interface OutcomeReport {
  idx: number;
  status: "active" | "deferred" | "delivered" | "bounced" | "expired";
  /** The delivery attempt this report is about (reports for older attempts are ignored). */
  attempt: number;
  nextAttemptAt?: number | null;
  response?: { code?: number; enhanced?: string; text?: string; mx?: string; tls?: boolean } | null;
  blockedBy?: string | null;
  /** A reply rule this attempt's refusal set off (core/reply-rules.ts): relay.destination.throttled. */
  throttled?: { rule: string; key: string; until: number; reply: string; action?: string; rate?: string } | null;
}

/** A Transport DO's delay warning (delay_warning_time) for a message's recipients still being retried. */
export interface DelayWarning {
  id: string;
  addresses: string[];
  /** When the queue lifetime ends (epoch ms), for Will-Retry-Until. */
  retryUntilMs: number | null;
}

/** What the delivery stage needs of a message: envelope sender, size and recipients. */
export interface DeliveryEnvelope {
  id: string;
  /** The tenant the message was accepted for (egress pools are chosen by it). */
  tenant?: string;
  mailFrom: string;
  size: number;
  rcpts: { idx: number; address: string; status: RcptStatus; attempts: number }[];
  /** The message text when it is kept in the Outbox (see NewMessage.body); absent: read it from R2. */
  body?: string | ArrayBuffer;
  /** The domain of per-recipient VERP envelope senders (NewMessage.returnPath); absent: mailFrom. */
  returnPath?: string;
}

/**
 * The body of a classify queue message: one message to classify or re-index (`id`), several
 * (`ids`, at most 100: an Outbox's changes and its sweeper's re-triggers), or the messages of one
 * accept request (`batch`), each with its tenant and recipients as accepted, so the consumer
 * decides without asking the Outbox first. One queue message per request or sweep, not per
 * message: queue operations are billed per message.
 */
/** Events forwarded to D1: a message's, up to and including `uptoSeq` (the Outbox may forget them). */
export interface EventAck {
  id: string;
  uptoSeq: number;
}

/**
 * The acks for the events of states just written to D1 (each message's last seq, if any). A
 * finished message whose events are all kept in its rows needs none: nothing is deleted for it
 * (storage/outbox-forward.ts).
 */
export function eventAcksOf(states: readonly SyncState[]): EventAck[] {
  const needed = (s: SyncState) =>
    s.events.length > 0 && (s.view.state !== "done" || s.events.some((e) => e.kept !== true));
  return states.flatMap((s) => (needed(s) ? [{ id: s.view.id, uptoSeq: s.events[s.events.length - 1]!.seq }] : []));
}

export type ClassifyJob =
  | { id: string }
  | { ids: string[] }
  | { batch: { id: string; tenant: string; rcpts: string[]; bulk?: { topic: string | null } }[] };

/** Result of accept: stored, or what the idempotency key said instead. */
export type AcceptResult =
  | {
      kind: "accepted";
      pauseMs?: number;
      /** Messages whose admission the answer waits for (Outbox.admitted). */ admitting?: string[];
    }
  | { kind: "stale" }
  | Exclude<IdempotencyResult, { kind: "fresh" }>;

/** Result of hold, release, requeue and operator cancel. */
export interface ControlResult {
  result: "ok" | "not_found" | "not_open" | "not_held" | "already_held" | "no_match";
  /** Recipients affected. */
  recipients: number;
}

/** Result of cancel and reschedule. */
export type ChangeResult = "ok" | "not_found" | "not_scheduled";
