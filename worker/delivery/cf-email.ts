/**
 * The `cf-email` transport kind: instead of SMTP, each recipient's message goes to Cloudflare
 * Email Service through the Worker's `send_email` binding (EMAIL). The scheduler still decides
 * when (entries, windows, pickup policies are the same); the outcome of each call becomes the
 * recipient's, as an SMTP reply would.
 *
 * DESCRIPTION
 *   CF_EMAIL_NEXTHOP               "cf-email": a transport (or SMARTHOST) with this nexthop.
 *   sendViaEmailService(env, prepared)  one binding call per recipient not final, with the
 *       message as stored (DKIM signatures included) and the From header's address as the
 *       envelope sender: the service requires that they match, so it sets its own Return-Path
 *       (no VERP) and signs with its own DKIM key beside ours. Accepted: delivered, "250 2.0.0
 *       accepted by Cloudflare Email Service <its message id>". Refused: an error that says the
 *       address or sender is not allowed (unverified destination, sender not on the domain) is
 *       a bounce (550 5.7.1, the error's text); any other error a deferral (451 4.3.0), retried
 *       by the scheduler. No binding configured: every recipient deferred, saying so. Over the
 *       service's 5 MiB: bounced here (552 5.3.4), never sent.
 *
 *   The service's message id of every recipient it accepted is kept in D1 `cf_email_sends` (one
 *   statement per entry), so that its events (worker/inbound/email-service.ts, the `email-events`
 *   queue) find the recipient; a row goes with the message's retention.
 *
 * INVARIANTS
 *   One call per recipient, so one recipient's refusal never decides another's outcome. The body
 *   is read once per entry.
 */
import { EmailMessage } from "cloudflare:email";
import { bodyKey } from "../model/ids";
import { addresses, fields } from "../mail/arf";
import type { RecipientResult } from "../smtp/core/types";
import type { PreparedJob, SessionPart } from "./session";

/** The nexthop that selects this kind. */
export const CF_EMAIL_NEXTHOP = "cf-email";

/** The service's message size limit (design/cloudflare-limits.md §6). */
export const CF_EMAIL_MAX_BYTES = 5 * 1024 * 1024;

/** What the reports name as the remote host. */
const REMOTE = "email-service.cloudflare";

const PERMANENT =
  /\bnot (an? )?(verified|allowed|permitted|authori[sz]ed)\b|unverified|does not match|invalid (recipient|destination|address)/i;

async function bodyOf(env: Env, p: PreparedJob): Promise<string | null> {
  const inline = p.envelope?.body;
  if (inline !== undefined) return typeof inline === "string" ? inline : new TextDecoder().decode(inline);
  const obj = await env.BODIES.get(bodyKey(p.job.messageId));
  return obj ? obj.text() : null;
}

async function sendOne(
  binding: SendEmail | undefined,
  from: string,
  to: string,
  raw: string,
): Promise<RecipientResult & { serviceId?: string }> {
  if (!binding)
    return {
      rcpt: to,
      code: 451,
      enhanced: "4.3.5",
      text: "no send_email binding (EMAIL) is configured for the cf-email transport",
      status: "deferred",
      source: "local",
    };
  try {
    const sent = (await binding.send(new EmailMessage(from, to, raw))) as unknown as { messageId?: string } | undefined;
    return {
      rcpt: to,
      code: 250,
      enhanced: "2.0.0",
      text: `accepted by Cloudflare Email Service${sent?.messageId ? ` ${sent.messageId}` : ""}`,
      status: "delivered",
      source: "remote",
      ...(sent?.messageId ? { serviceId: sent.messageId } : {}),
    };
  } catch (e) {
    const text = e instanceof Error ? e.message : String(e);
    return PERMANENT.test(text)
      ? { rcpt: to, code: 550, enhanced: "5.7.1", text, status: "bounced", source: "remote" }
      : { rcpt: to, code: 451, enhanced: "4.3.0", text, status: "deferred", source: "remote" };
  }
}

/** Keeps the service's message ids of the accepted recipients (see the header); a failure is logged (their events then find nothing). */
async function rememberIds(
  env: Env,
  emailId: string,
  sent: (RecipientResult & { serviceId?: string })[],
): Promise<void> {
  const rows = sent.flatMap((r) => (r.serviceId ? [{ id: r.serviceId, address: r.rcpt }] : []));
  if (rows.length === 0) return;
  await env.DB.prepare(
    `INSERT OR IGNORE INTO cf_email_sends (cf_message_id, email_id, address, created_at)
      SELECT json_extract(value, '$.id'), ?1, json_extract(value, '$.address'), ?2 FROM json_each(?3)`,
  )
    .bind(emailId, Date.now(), JSON.stringify(rows))
    .run()
    .catch((e: unknown) =>
      console.error(
        JSON.stringify({
          error: "Email Service message ids not kept",
          emailId,
          detail: e instanceof Error ? e.message : String(e),
        }),
      ),
    );
}

/** See the header. */
export async function sendViaEmailService(env: Env, prepared: PreparedJob[]): Promise<SessionPart[]> {
  const binding = (env as unknown as { EMAIL?: SendEmail }).EMAIL;
  return Promise.all(
    prepared.map(async (p): Promise<SessionPart> => {
      const open = p.matched.filter((m) => !m.final);
      if (!p.envelope || open.length === 0) return { job: p.job, matched: p.matched, txn: undefined, site: null };
      if (p.envelope.size > CF_EMAIL_MAX_BYTES) {
        const text = `message of ${p.envelope.size} bytes is over Cloudflare Email Service's ${CF_EMAIL_MAX_BYTES}`;
        const recipients = open.map((m): RecipientResult => ({
          rcpt: m.address,
          code: 552,
          enhanced: "5.3.4",
          text,
          status: "bounced",
          source: "local",
        }));
        return {
          job: p.job,
          matched: p.matched,
          txn: {
            messageId: String(p.job.entryId),
            recipients,
            remoteHost: REMOTE,
            tls: true,
            possibleDuplicate: false,
          },
          site: null,
        };
      }
      const raw = await bodyOf(env, p);
      const from = raw === null ? null : (addresses(fields(raw).get("from")?.[0] ?? "")[0] ?? p.envelope.mailFrom);
      const sent =
        raw === null || from === null
          ? open.map((m): RecipientResult => ({
              rcpt: m.address,
              code: 451,
              enhanced: "4.3.0",
              text: "the message body is missing",
              status: "deferred",
              source: "local",
            }))
          : await Promise.all(open.map((m) => sendOne(binding, from, m.address, raw)));
      await rememberIds(env, p.job.messageId, sent);
      const recipients = sent.map(({ serviceId: _id, ...r }: RecipientResult & { serviceId?: string }) => r);
      return {
        job: p.job,
        matched: p.matched,
        txn: { messageId: String(p.job.entryId), recipients, remoteHost: REMOTE, tls: true, possibleDuplicate: false },
        site: null,
      };
    }),
  );
}
