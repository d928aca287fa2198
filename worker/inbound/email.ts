/**
 * Mail that comes back: the Worker's email() handler, fed by Cloudflare Email Routing on the
 * return-path domains (a verified domain's `send.<domain>`, the operator's BOUNCE_DOMAIN) and
 * any address routed to it (an FBL address).
 *
 * DESCRIPTION
 *   handleInbound(message, env)  reads the message (at most INBOUND_LIMIT bytes), lets
 *       mail/inbound.ts say what it is, and acts:
 *     - a DSN to a VERP address (mail/verp.ts; its signature checked): the recipient the
 *       address names gets the bounce, if it was delivered (Outbox.afterDelivery: delivered →
 *       bounced, email.bounced with the reply and its classification, a suppression by the
 *       bounce rules). A DSN elsewhere is mapped through the original's Message-ID (the email id
 *       in one the relay generated, else the D1 index) and the notice's Final-Recipient.
 *       Delay notices and success notices change nothing.
 *     - mail to a List-Unsubscribe mailto address (`unsubscribe+<token>@`, whatever it says):
 *       the recipient it names unsubscribes (email.unsubscribed, suppressed until removed), as
 *       with the one-click link (api/routes/unsubscribe.ts).
 *     - an ARF report: each Original-Rcpt-To gets the complaint (as POST /relay/complaints).
 *     - an automatic reply (out of office): taken, changes nothing.
 *     - anything else: received mail when its recipient's domain receives (worker/receiving/:
 *       kept, or refused beyond the tenant's quota); otherwise, like a DSN that names no message
 *       of this relay or a token address whose signature does not verify: refused (setReject),
 *       so the sender's server bounces it.
 *   Each message is counted in D1 `inbound_counts` (UTC day × kind): bounce, bounce_unmatched,
 *   delay, dsn_other, complaint, unsubscribe, auto_reply, rejected, too_large, received, receiving_refused.
 *   GET /relay/inbound reads them.
 *
 * INVARIANTS
 *   Nothing is rewritten: a late bounce adds email.bounced after email.delivered. A message is
 *   only ever refused, never lost: an error thrown here makes Email Routing retry or refuse it.
 */
import { isMessageId, outboxOf } from "../model/ids";
import { emailIdOf, readArf } from "../mail/arf";
import { bounceReply, readInbound, type DsnRecipient, type InboundMail } from "../mail/inbound";
import { parseInbound } from "./parse";
import { emailsByHeader } from "../db/messages";
import { readTokenAddress } from "../mail/verp";
import { addressTokenKey } from "./tokens";
import { recordComplaint } from "../policy/complaint-brake";
import { receiveMail } from "../receiving/receive";

/** The largest inbound message read (a bounce quoting a large original is refused above it). */
export const INBOUND_LIMIT = 4 * 1024 * 1024;

/** What an inbound message came to, as counted. */
export type InboundCount = "bounce" | "bounce_unmatched" | "delay" | "dsn_other" | "complaint" | "unsubscribe" | "auto_reply" | "rejected" | "too_large"
  | "received" | "receiving_refused";

/** What Email Routing hands the handler (ForwardableEmailMessage's part used here). */
export interface InboundMessage {
  readonly from: string;
  readonly to: string;
  readonly raw: ReadableStream<Uint8Array>;
  readonly rawSize: number;
  setReject(reason: string): void;
}

async function count(env: Env, kind: InboundCount, nowMs: number): Promise<void> {
  await env.DB.prepare("INSERT INTO inbound_counts (day, kind, n) VALUES (?, ?, 1) ON CONFLICT (day, kind) DO UPDATE SET n = n + 1")
    .bind(new Date(nowMs).toISOString().slice(0, 10), kind).run();
}

/** The relay's email a notice is about, by the original's Message-ID; null when none or ambiguous. */
async function emailOf(env: Env, messageId: string | null): Promise<string | null> {
  if (messageId === null) return null;
  const own = emailIdOf(messageId, isMessageId);
  if (own !== null) return own;
  const ids = await emailsByHeader(env.DB, messageId, null);
  return ids.length === 1 ? ids[0]! : null;
}

/** Applies the failed recipients of a DSN; "bounce" when any applied. */
async function bounce(env: Env, id: string, failed: DsnRecipient[], token: { idx: number } | null): Promise<InboundCount> {
  let applied = false;
  const targets = token !== null ? [{ target: token, r: failed[0]! }] : failed.flatMap((r) => (r.address ? [{ target: { address: r.address }, r }] : []));
  for (const { target, r } of targets) {
    const res = await outboxOf(env, id).afterDelivery(id, null, { kind: "bounce", target, response: bounceReply(r) });
    applied ||= res.result === "ok" || res.result === "duplicate";
  }
  return applied ? "bounce" : "bounce_unmatched";
}

async function complaint(env: Env, mail: InboundMail): Promise<InboundCount | null> {
  let arf;
  try {
    arf = readArf(mail.parts);
  } catch {
    return null;
  }
  const id = await emailOf(env, arf.messageId);
  if (id === null) return null;
  let applied = false;
  for (const address of arf.recipients) {
    const res = await recordComplaint(env, id, null, address, arf.feedbackType);
    applied ||= res.result === "ok" || res.result === "duplicate";
  }
  return applied ? "complaint" : null;
}

/** What to do with one inbound message; null: refuse it. */
async function decide(env: Env, message: InboundMessage, bytes: Uint8Array): Promise<InboundCount | null> {
  const token = await readTokenAddress(await addressTokenKey(env), message.to);
  if (token?.kind === "unsubscribe") {
    const res = await outboxOf(env, token.emailId).afterDelivery(token.emailId, null, { kind: "unsubscribe", idx: token.idx, method: "mailto" });
    return res.result === "ok" || res.result === "duplicate" ? "unsubscribe" : null;
  }
  const mail = await parseInbound(bytes, message.from);
  const what = readInbound(mail);
  if (what.kind === "arf") return complaint(env, mail);
  if (what.kind === "auto-reply") return "auto_reply";
  // Mail that is not a report: kept when its domain receives (worker/receiving/), else refused.
  if (what.kind === "other") return receiveMail(env, message, bytes);
  const failed = what.recipients.filter((r) => r.action === "failed");
  const id = token?.kind === "bounces" ? token.emailId : await emailOf(env, what.originalMessageId);
  if (id === null) return null;
  if (failed.length > 0) return bounce(env, id, failed, token?.kind === "bounces" ? { idx: token.idx } : null);
  return what.recipients.some((r) => r.action === "delayed") ? "delay" : "dsn_other";
}

/** See the header. */
export async function handleInbound(message: InboundMessage, env: Env, nowMs = Date.now()): Promise<InboundCount> {
  if (message.rawSize > INBOUND_LIMIT) {
    message.setReject(`552 5.3.4 message too big for this address (limit ${INBOUND_LIMIT} bytes)`);
    await count(env, "too_large", nowMs);
    return "too_large";
  }
  const bytes = new Uint8Array(await new Response(message.raw).arrayBuffer());
  const kind = await decide(env, message, bytes);
  if (kind === null) {
    message.setReject("550 5.1.1 this address takes only delivery status notifications and feedback reports about mail this relay sent");
    await count(env, "rejected", nowMs);
    return "rejected";
  }
  await count(env, kind, nowMs);
  console.log(JSON.stringify({ event: "inbound", kind, to_domain: message.to.slice(message.to.lastIndexOf("@") + 1) }));
  return kind;
}
