/**
 * Turns a validated send request into a message ready to store: composed, signed, measured.
 *
 * DESCRIPTION
 *   prepareEmail(env, input, ctx)  template (a send naming one is rendered here, once: the
 *                                  rendered message is what is stored; worker/templates) → topic
 *                                  (worker/topics: bulk mail of the topic) → compose
 *                                  (worker/mail; with the header fields of added-headers.ts) →
 *                                  recipient limit → `scheduled_at` → DKIM (when
 *                                  configured) → size limit → the compliance check
 *                                  (worker/compliance/: its warnings are kept with the summary;
 *                                  the tenant's strict setting refuses with 422). Returns the R2
 *                                  body, the Outbox record (NewMessage) and, for a message with
 *                                  attachments, the R2 key its copy is kept under for
 *                                  GET /emails/:id/attachments.
 *   sendAnswer(prepared)           a send response's item: { id }, and `warnings` when any.
 *   mailError(e)                   a MailInputError as the API's 422 ApiError (other errors pass).
 *   keepText                       html/text kept for GET /emails/:id only up to SUMMARY_TEXT_BYTES.
 *
 * ERRORS
 *   ApiError 422 (validation_error, invalid_from_address, invalid_attachment, …) naming the field;
 *   413 validation_error when the composed message exceeds MAX_MESSAGE_BYTES.
 */
import { newMessageId } from "../model/ids";
import type { MessageSummary, NewMessage } from "../model/message";
import { compose, isMailInputError, parseMailbox, signDkim } from "../mail";
import type { SenderPolicy } from "../domains/sender";
import { fetchPathAttachments } from "./path-attachments";
import { ApiError } from "../model/errors";
import { parseScheduledAt, type Limits } from "./limits";
import type { SendEmail, SendRequest } from "./schemas";
import { settingsOf } from "../settings/settings";
import { renderSend, TemplateSource } from "../templates/templates";
import { TopicSource, topicOf } from "../topics/topics";
import { resolveAttachment, type AttachmentInput } from "../mail/mime";
import { keptKey } from "../model/files";
import type { SentAttachment } from "../model/message";
import { complianceWarnings, enforceCompliance } from "../compliance/check";
import { feedbackHeaders, unsubscribeHeaders } from "./added-headers";

/** A message ready for R2 (`body`) and the Outbox (`record`). */
export interface PreparedMessage {
  body: string | Uint8Array;
  record: NewMessage;
  /** For a message with attachments: the R2 key of the copy kept for their download (storeAndQueue writes it). */
  keep?: string;
}

/** Where and when the request is being accepted. */
export interface PrepareContext {
  shard: number;
  nowMs: number;
  limits: Limits;
  /** Who may send as which domain, and its DKIM signers (domains/sender.ts). */
  sender: SenderPolicy;
  /** The relay's public origin, for one-click unsubscribe links (PUBLIC_URL, else the request's). */
  origin: string;
  /** The tenant's templates and topics, shared by a batch's messages (else read for this one). */
  templates?: TemplateSource;
  topics?: TopicSource;
}

/** html and text are kept for the status API up to this many bytes together (the body has them all). */
export const SUMMARY_TEXT_BYTES = 256 * 1024;

/** Converts composer input errors into the API's error. */
export function mailError(e: unknown): unknown {
  return isMailInputError(e) ? new ApiError(422, e.errorName, e.message) : e;
}

/** A string list from Resend's `string | string[]`. */
export function listOf(v: string | string[] | undefined): string[] | null {
  return v === undefined ? null : typeof v === "string" ? [v] : v;
}

/** html and text for the summary, or null when they are too large to keep beside the envelope. */
export function keepText(
  html: string | undefined,
  text: string | undefined,
): { html: string | null; text: string | null } {
  const size = (html?.length ?? 0) + (text?.length ?? 0);
  return size * 3 <= SUMMARY_TEXT_BYTES ? { html: html ?? null, text: text ?? null } : { html: null, text: null };
}

/** Checks the envelope against the limits. */
export function checkEnvelope(rcptCount: number, size: number, limits: Limits): void {
  if (rcptCount > limits.maxRecipients) {
    throw new ApiError(
      422,
      "validation_error",
      `Too many recipients: ${rcptCount} (to + cc + bcc); the limit is ${limits.maxRecipients}.`,
    );
  }
  if (size > limits.maxMessageBytes) {
    throw new ApiError(
      413,
      "validation_error",
      `The message is ${size} bytes; the limit is ${limits.maxMessageBytes} bytes.`,
    );
  }
}

/**
 * The least size the composed message can have: its text and html (quoted-printable or base64
 * never shrink them) and its attachments' base64 (re-encoded in lines of 76, so never shorter
 * than 95 % of what was sent). Checked before composing, so an oversized request costs no CPU.
 */
export function leastComposedBytes(input: SendEmail): number {
  const parts = (input.text?.length ?? 0) + (input.html?.length ?? 0);
  const attached = (input.attachments ?? []).reduce((n, a) => n + (a.content?.length ?? 0), 0);
  return parts + Math.floor(attached * 0.95);
}

/** The relay's public origin: PUBLIC_URL, else the origin the request came to. */
export function publicOrigin(env: Env, requestUrl: string): string {
  return (settingsOf(env).publicUrl || new URL(requestUrl).origin).replace(/\/+$/, "");
}

/** A templated send as the send it stands for; an ordinary send as it is. */
async function resolved(env: Env, req: SendRequest, ctx: PrepareContext): Promise<SendEmail> {
  if (!("template" in req) || req.template === undefined) return req as SendEmail;
  const { template, ...rest } = req;
  const r = await renderSend(template, rest, ctx.templates ?? new TemplateSource(env.DB, ctx.sender.tenant));
  return { ...rest, ...r };
}

/** The attachments' metadata in the order of the composed MIME tree: cid images of an html email first. */
function attachmentsOf(input: SendEmail, attachments: readonly AttachmentInput[]): SentAttachment[] {
  const all = attachments.map((a, i) => ({ a: resolveAttachment(a, i), i }));
  const inline = all.filter(({ a }) => input.html !== undefined && a.contentId !== undefined);
  const regular = all.filter((x) => !inline.includes(x));
  return [...inline, ...regular].map(({ a }) => ({
    id: crypto.randomUUID(),
    filename: a.filename ?? null,
    size: a.bytes.byteLength,
    content_type: a.type,
    content_disposition: inline.some((x) => x.a === a) ? ("inline" as const) : ("attachment" as const),
    content_id: a.contentId ?? null,
  }));
}

/** A send response's item (see the header): Resend's { id }, plus the compliance warnings when any. */
export function sendAnswer(p: PreparedMessage): { id: string; warnings?: MessageSummary["warnings"] } {
  const w = p.record.summary.warnings;
  return { id: p.record.id, ...(w && w.length > 0 ? { warnings: w } : {}) };
}

/** Composes, signs and measures one send request. */
export async function prepareEmail(env: Env, req: SendRequest, ctx: PrepareContext): Promise<PreparedMessage> {
  const input = await resolved(env, req, ctx);
  const id = newMessageId(ctx.shard);
  const least = leastComposedBytes(input);
  if (least > ctx.limits.maxMessageBytes) {
    throw new ApiError(
      413,
      "validation_error",
      `The message would be at least ${least} bytes; the limit is ${ctx.limits.maxMessageBytes} bytes.`,
    );
  }
  const scheduledAt = input.scheduled_at === undefined ? null : parseScheduledAt(input.scheduled_at, ctx.nowMs);
  let fromDomain: string;
  try {
    const from = parseMailbox("from", input.from).address;
    fromDomain = from.slice(from.lastIndexOf("@") + 1);
  } catch (e) {
    throw mailError(e);
  }
  // The sender is checked before anything is composed: an unverified domain costs no CPU.
  const signers = await ctx.sender.authorize(fromDomain);
  const attachments = await fetchPathAttachments(env, input.attachments, ctx.limits.maxMessageBytes);
  const returnPath = ctx.sender.returnPath(fromDomain);
  // The tenant's default applies to one-recipient emails that say nothing and set no
  // List-Unsubscribe of their own; `false` opts out.
  const count = [input.to, input.cc, input.bcc].reduce(
    (n, l) => n + (l === undefined ? 0 : typeof l === "string" ? 1 : l.length),
    0,
  );
  const own = Object.keys(input.headers ?? {}).find((h) => /^list-unsubscribe(-post)?$/i.test(h));
  // A topic's email is bulk mail of the topic; its one-click link (one recipient, no
  // List-Unsubscribe of the caller's) opts the recipient out of the topic.
  const topic = input.topic_id
    ? (await topicOf(input.topic_id, ctx.topics ?? new TopicSource(env.DB, ctx.sender.tenant))).id
    : null;
  if (
    topic !== null &&
    typeof input.unsubscribe === "object" &&
    input.unsubscribe.topic !== undefined &&
    input.unsubscribe.topic !== topic
  ) {
    throw new ApiError(422, "validation_error", "`unsubscribe.topic` and `topic_id` name different topics: give one.");
  }
  const unsubscribe =
    topic !== null
      ? input.unsubscribe === false
        ? false
        : { topic }
      : (input.unsubscribe ?? (count === 1 && !own ? (ctx.sender.unsubscribeDefault ?? false) : false));
  const bulk = topic !== null || unsubscribe !== false;
  // Bulk mail (with one-click unsubscribe, or of a topic) waits out the complaint-rate brake; transactional does not.
  const paused = ctx.sender.bulkPausedUntil;
  if (bulk && paused !== null && paused > ctx.nowMs) {
    throw new ApiError(
      429,
      "complaint_rate_exceeded",
      `Bulk mail (with unsubscribe) of this tenant is paused until ${new Date(paused).toISOString()}: ` +
        `its complaint rate is above COMPLAINT_RATE_THRESHOLD (GET /relay/complaint-rate).` +
        ` Mail without unsubscribe is still sent.`,
    );
  }
  const linked = unsubscribe !== false && !(topic !== null && (count !== 1 || own));
  const listed = linked ? await unsubscribeHeaders(env, input, id, ctx.origin, returnPath, count, own) : input.headers;
  const headers = {
    ...listed,
    ...feedbackHeaders(input, ctx.sender.tenant, ctx.sender.verifiedReturnPath(fromDomain)),
  };
  let composed;
  try {
    composed = compose({ ...input, headers, attachments }, { now: new Date(ctx.nowMs), messageId: id });
  } catch (e) {
    throw mailError(e);
  }
  checkEnvelope(composed.envelope.rcptTo.length, composed.raw.length, ctx.limits);
  const body = signers.length > 0 ? await signDkim(composed.raw, signers) : composed.raw;
  checkEnvelope(composed.envelope.rcptTo.length, body.length, ctx.limits);
  const warnings = await complianceWarnings(env, {
    sender: ctx.sender,
    fromDomain,
    mailFrom: composed.envelope.mailFrom,
    returnPath,
    bulk,
    body,
    rcptTo: composed.envelope.rcptTo,
  });
  enforceCompliance(ctx.sender, warnings);
  const summary: MessageSummary = {
    from: input.from,
    to: listOf(input.to) ?? [],
    cc: listOf(input.cc),
    bcc: listOf(input.bcc),
    reply_to: listOf(input.reply_to),
    subject: input.subject,
    ...keepText(input.html, input.text),
    tags: input.tags ?? null,
    message_id: composed.messageId,
    ...(typeof unsubscribe === "object" && unsubscribe.topic
      ? { unsubscribe_topic: unsubscribe.topic }
      : topic !== null
        ? { unsubscribe_topic: topic }
        : {}),
    ...(bulk ? { bulk: true as const } : {}),
    ...(topic !== null ? { topic_id: topic } : {}),
    ...(attachments && attachments.length > 0 ? { attachments: attachmentsOf(input, attachments) } : {}),
    ...(warnings.length > 0 ? { warnings } : {}),
  };
  // An 8bit composite attachment (mail/mime.ts) makes the text longer in octets than in characters.
  const size = composed.eightBit ? new TextEncoder().encode(body).length : body.length;
  const record: NewMessage = {
    id,
    createdAt: ctx.nowMs,
    scheduledAt: scheduledAt !== null && scheduledAt > ctx.nowMs ? scheduledAt : null,
    mailFrom: composed.envelope.mailFrom,
    rcptTo: composed.envelope.rcptTo,
    size,
    summary,
    returnPath,
  };
  return { body, record, ...(summary.attachments ? { keep: keptKey("sent", ctx.nowMs, id) } : {}) };
}
