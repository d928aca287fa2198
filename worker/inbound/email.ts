/**
 * Mail that comes back: the Worker's email() handler, fed by Cloudflare Email Routing on the
 * return-path domains (a verified domain's `send.<domain>`, the operator's BOUNCE_DOMAIN) and
 * any address routed to it (an FBL address).
 *
 * DESCRIPTION
 *   handleInbound(message, env)  reads the message (up to INBOUND_LIMIT, Email Routing's own
 *       limit), and asks one question, inbound/core/report.ts reportOf: is it a report about
 *       mail this relay sent?
 *     - yes (a DSN, an ARF report, an automatic reply, an unsubscribe by mail, or anything else
 *       addressed to a signed VERP address): reports.ts takes it. A report changes a message only
 *       when it proves itself (a signed VERP address that fits what it names, or an
 *       authenticated reporter: inbound/core/trust.ts); every DSN and ARF report is kept with
 *       its verdict for the operator (GET /relay/inbound/reports). A report is never refused.
 *     - no: notAReport, the one place such mail goes: received mail when its recipient's domain
 *       receives (worker/receiving/: kept, or refused beyond the tenant's quota), else refused
 *       with 550 5.1.1.
 *   Each message is counted in D1 `inbound_counts` (UTC day × kind): bounce, expired, delay,
 *   dsn_other, complaint, unsubscribe, auto_reply, duplicate, rejected, too_large, received,
 *   receiving_refused, and for a report that changed nothing its kind and verdict
 *   (bounce_unauthenticated, bounce_mismatch, bounce_unmatched, complaint_unauthenticated, ...).
 *   GET /relay/inbound reads them.
 *
 *   A development Worker takes no mail that Email Routing delivered (config-check.ts
 *   developmentMailProblem; thrown, so the sender tries again): it never serves the world.
 *
 * INVARIANTS
 *   Nothing is rewritten: a late bounce adds email.bounced after email.delivered. A message is
 *   only ever refused, never lost: an error thrown here makes Email Routing retry or refuse it.
 *   A message over INBOUND_PARSE_BYTES is read for its report from its first INBOUND_PARSE_BYTES
 *   (the notice and the original's header come first; Sendmail quotes the whole original after).
 */
import { readTokenAddress } from "../mail/verp";
import { readInbound } from "../mail/inbound";
import { countInbound } from "../db/inbound";
import { parseInbound } from "./parse";
import { addressTokenKey } from "./tokens";
import { reportOf } from "./core/report";
import { developmentMailProblem } from "../settings/config-check";
import { takeReport, type InboundMessage } from "./reports";
import { receiveMail } from "../receiving/receive";

export type { InboundMessage } from "./reports";

/** The largest inbound message taken: Email Routing's own limit (25 MiB). */
export const INBOUND_LIMIT = 25 * 1024 * 1024;
/** How much of a message is parsed for its report. */
export const INBOUND_PARSE_BYTES = 2 * 1024 * 1024;

/** What an inbound message came to, as counted (see the header). */
export type InboundCount = string;

/**
 * Where mail that is not a report goes: received mail when its recipient's domain receives
 * (worker/receiving/: kept, or refused beyond the tenant's quota), else refused.
 */
async function notAReport(message: InboundMessage, env: Env, bytes: Uint8Array): Promise<InboundCount> {
  const received = await receiveMail(env, message, bytes);
  if (received !== null) return received;
  message.setReject(
    "550 5.1.1 this address takes only delivery status notifications and feedback reports about mail this relay sent",
  );
  return "rejected";
}

/** See the header. */
export async function handleInbound(message: InboundMessage, env: Env, nowMs = Date.now()): Promise<InboundCount> {
  if (message.rawSize > INBOUND_LIMIT) {
    message.setReject(`552 5.3.4 message too big for this address (limit ${INBOUND_LIMIT} bytes)`);
    await countInbound(env.DB, "too_large", nowMs);
    return "too_large";
  }
  const bytes = new Uint8Array(await new Response(message.raw).arrayBuffer());
  const head = new TextDecoder("latin1").decode(bytes.subarray(0, 4096));
  const dev = developmentMailProblem(head, env);
  // Thrown, as while the deployment is misconfigured (worker/index.ts): the sender tries again later.
  if (dev !== null) throw new Error(dev);
  const token = await readTokenAddress(await addressTokenKey(env), message.to);
  const mail = await parseInbound(bytes.subarray(0, INBOUND_PARSE_BYTES), message.from);
  const report = reportOf(readInbound(mail), token);
  const kind =
    report === null
      ? await notAReport(message, env, bytes)
      : await takeReport(env, report, { message, bytes, mail, nowMs });
  await countInbound(env.DB, kind, nowMs);
  console.log(JSON.stringify({ event: "inbound", kind, to_domain: message.to.slice(message.to.lastIndexOf("@") + 1) }));
  return kind;
}
