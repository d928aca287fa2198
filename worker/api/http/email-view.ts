/**
 * Resend's email object, built from the Outbox record (GET /emails/:id) or the D1 index (GET /emails).
 *
 * DESCRIPTION
 *   emailObject(view)                 the Resend shape plus the additive `recipients[]`
 *                                     (email, status, attempts, next_attempt_at, last_response,
 *                                     blocked_by, blocked_until), `message_id` and the compliance
 *                                     check's `warnings` (empty when none).
 */
import type { MessageView } from "../../model/message";
import { iso, lastEventOf } from "../../model/status";

/** The GET /emails/:id body; `waiting` (by lower-cased address) says why waiting recipients wait. */
export function emailObject(
  v: MessageView,
  nowMs: number,
  waiting: Map<string, { blocked_by: string; blocked_until: number | null }> = new Map(),
) {
  const s = v.summary;
  const scheduled = v.scheduled_at !== null && v.scheduled_at > nowMs;
  return {
    object: "email",
    id: v.id,
    from: s.from,
    to: s.to,
    cc: s.cc,
    bcc: s.bcc,
    reply_to: s.reply_to,
    subject: s.subject,
    html: s.html,
    text: s.text,
    tags: s.tags,
    message_id: s.message_id,
    created_at: iso(v.created_at),
    scheduled_at: iso(v.scheduled_at),
    last_event: lastEventOf(
      v.recipients.map((r) => r.status),
      scheduled,
      v.complained === true,
    ),
    warnings: s.warnings ?? [],
    recipients: v.recipients.map((r) => ({
      email: r.email,
      status: r.status,
      attempts: r.attempts,
      next_attempt_at: iso(r.next_attempt_at),
      last_response: r.last_response === null ? null : (JSON.parse(r.last_response) as object),
      blocked_by: waiting.get(r.email.toLowerCase())?.blocked_by ?? r.blocked_by,
      blocked_until: iso(waiting.get(r.email.toLowerCase())?.blocked_until ?? null),
    })),
  };
}
