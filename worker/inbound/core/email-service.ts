/*
 * NAME
 *   email-service - Cloudflare Email Service's sending events, as what they mean for a recipient
 *
 * SUMMARY
 *   Email Service publishes one event subscription per sending domain to a Queue (event type
 *   "cf.email.sending.message.<delivered|deferred|bounced|failed|rejected|complained>", payload
 *   { messageId, sender, recipient, delivery: { status, provider, smtpStatusCode,
 *   smtpEnhancedStatusCode, smtpResponse }, bounce, failure, rejection, complaint }). Cohort hands
 *   a recipient to the service as to a smarthost (delivered, "accepted by Cloudflare Email
 *   Service"); the events then say what the receiving server did.
 *
 * DESCRIPTION
 *   readEmailServiceEvent(body)  the event → { messageId, recipient, action } or { error }:
 *     delivered   relayed: the receiving server's reply becomes the recipient's last_response;
 *     deferred    relayed and delayed: the same, and email.delivery_delayed;
 *     bounced     a late bounce with the receiving server's reply (email.bounced);
 *     failed      a late bounce: "failed in Cloudflare Email Service: <reason>";
 *     rejected    a late bounce: "rejected by Cloudflare Email Service: <reason> (<detail>)", 5.7.1;
 *     complained  a complaint (email.complained) with the complaint's type as its feedback type.
 *   The reply's mx names the service and the receiving provider ("email-service/gmail").
 *
 * INVARIANTS
 *   Pure. Every event type maps to exactly one action.
 *
 * ERRORS
 *   None thrown: an event of another shape is { error }.
 */

export type Reply = { code: number | null; enhanced?: string; text: string; mx: string };

export type EventAction =
  | { kind: "relayed"; response: Reply; delayed: boolean }
  | { kind: "bounce"; response: Reply }
  | { kind: "complaint"; feedbackType: string };

export type ReadEvent = { messageId: string; recipient: string; action: EventAction } | { error: string };

const PREFIX = "cf.email.sending.message.";

export function readEmailServiceEvent(body: unknown): ReadEvent {
  const e = body as { type?: unknown; payload?: Record<string, unknown> } | null;
  if (!e || typeof e.type !== "string" || !e.type.startsWith(PREFIX)) return { error: "not an Email Sending event" };
  if (!e.payload || typeof e.payload !== "object") return { error: "not an Email Sending event" };
  const p = e.payload;
  if (typeof p.messageId !== "string" || typeof p.recipient !== "string")
    return { error: "an Email Sending event without messageId or recipient" };
  const d = (p.delivery ?? {}) as Record<string, unknown>;
  const str = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined);
  const mx = `email-service${str(d.provider) ? `/${str(d.provider)}` : ""}`;
  const code = Number(str(d.smtpStatusCode));
  const smtp = (fallback: string): Reply => ({
    code: Number.isInteger(code) && code >= 200 && code < 600 ? code : null,
    ...(str(d.smtpEnhancedStatusCode) ? { enhanced: str(d.smtpEnhancedStatusCode)! } : {}),
    text: str(d.smtpResponse) ?? fallback,
    mx,
  });
  const kind = e.type.slice(PREFIX.length);
  const out = (action: EventAction): ReadEvent => ({
    messageId: p.messageId as string,
    recipient: p.recipient as string,
    action,
  });
  switch (kind) {
    case "delivered":
      return out({ kind: "relayed", response: smtp("delivered by Cloudflare Email Service"), delayed: false });
    case "deferred":
      return out({ kind: "relayed", response: smtp("deferred by Cloudflare Email Service"), delayed: true });
    case "bounced":
      return out({
        kind: "bounce",
        response: smtp(str((p.bounce as Record<string, unknown> | undefined)?.reason) ?? "bounced"),
      });
    case "failed": {
      const reason = str((p.failure as Record<string, unknown> | undefined)?.reason) ?? "unknown";
      return out({
        kind: "bounce",
        response: { code: null, text: `failed in Cloudflare Email Service: ${reason}`, mx },
      });
    }
    case "rejected": {
      const r = (p.rejection ?? {}) as Record<string, unknown>;
      return out({
        kind: "bounce",
        response: {
          code: 550,
          enhanced: "5.7.1",
          text: `rejected by Cloudflare Email Service: ${str(r.reason) ?? "rejected"}${str(r.detail) ? ` (${str(r.detail)})` : ""}`,
          mx,
        },
      });
    }
    case "complained":
      return out({
        kind: "complaint",
        feedbackType: str((p.complaint as Record<string, unknown> | undefined)?.type) ?? "abuse",
      });
    default:
      return { error: `unknown Email Sending event ${e.type}` };
  }
}
