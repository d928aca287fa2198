/**
 * Taking a report that came back by mail: what it may change, what it changes, and the record
 * the operator sees (the email() handler's second half; email.ts decides what is a report).
 *
 * DESCRIPTION
 *   takeReport(env, report, incoming)  the count kind of one report:
 *     unsubscribe  mail to a List-Unsubscribe mailto address (`unsubscribe+<token>@`): the
 *                  recipient it names unsubscribes, as with the one-click link.
 *     auto-reply   taken; changes nothing.
 *     dsn          each recipient block that failed or is delayed: a bounce (5.x.x), an expiry
 *                  (a failure after retrying: email.failed "expired", no suppression) or a delay
 *                  notice (email.delivery_delayed with the reporting MTA's text, the recipient
 *                  stays delivered). To a VERP address it acts on that address's recipient only,
 *                  and only when what the block names (Final-Recipient, Original-Recipient) fits
 *                  it, else "mismatch". Elsewhere the email is found by the original's
 *                  Message-ID, else the notice's In-Reply-To and References, and each block acts
 *                  on the address it names only when the notice authenticates for that
 *                  address's domain (core/trust.ts dsnVerdict), else "unauthenticated".
 *     arf          a complaint (a Feedback-Type that is one, mail/arf.ts) to a VERP address acts
 *                  on that address's recipient (when Original-Rcpt-To, if any, names it); one to
 *                  any other address on its Original-Rcpt-To addresses only when it comes from a
 *                  DKIM-aligned configured feedback-loop sender (core/trust.ts arfVerdict).
 *   A DSN or ARF report whose own Message-ID already came to the same address is a
 *   "duplicate": counted once, changing nothing again. Every DSN and ARF report is stored
 *   (db/inbound.ts) with its verdict: acted, duplicate, mismatch, not_delivered,
 *   unauthenticated, unmatched (no message or recipient of this relay) or info (a success or
 *   relay notice, a report that is no complaint).
 *
 * INVARIANTS
 *   A report that does not prove itself changes nothing: no state, no event, no suppression, no
 *   complaint for the complaint-rate brake. What a VERP address names is bound by its MAC
 *   (mail/verp.ts) to one email and one recipient.
 */
import { isMessageId, outboxOf } from "../model/ids";
import { COMPLAINT_FEEDBACK_TYPES, emailIdOf, readArf, type ArfComplaint } from "../mail/arf";
import { bounceReply, type DsnRecipient, type InboundMail } from "../mail/inbound";
import { emailsByHeader } from "../db/message-reads";
import { reportSeen, saveReport } from "../db/inbound";
import { recordComplaint } from "../policy/complaint-brake";
import { settingsOf } from "../settings/settings";
import { arfVerdict, dsnVerdict } from "./core/trust";
import type { Report, Token } from "./core/report";
import { Proof } from "./evidence";

/** What Email Routing hands the handler (ForwardableEmailMessage's part used here). */
export interface InboundMessage {
  readonly from: string;
  readonly to: string;
  readonly raw: ReadableStream<Uint8Array>;
  readonly rawSize: number;
  setReject(reason: string): void;
}

/** One inbound message as read by email.ts. */
export interface Incoming {
  message: InboundMessage;
  bytes: Uint8Array;
  mail: InboundMail;
  nowMs: number;
}

/** The bytes of a message kept with its report. */
export const INBOUND_STORED_BYTES = 64 * 1024;
/** The most recipient blocks of one DSN acted on. */
const MAX_BLOCKS = 10;

type Verdict = "acted" | "duplicate" | "mismatch" | "not_delivered" | "unauthenticated" | "unmatched" | "info";
/** Which verdict speaks for a report of several recipients: the first of these it has. */
const RANK: readonly Verdict[] = [
  "acted",
  "duplicate",
  "mismatch",
  "not_delivered",
  "unauthenticated",
  "unmatched",
  "info",
];

type Line = { address: string | null; action: string; status: string; reason: string; verdict: Verdict; why?: string };
type Outcome = {
  kind: string;
  verdict: Verdict;
  emailId: string | null;
  tenant: string | null;
  lines: Line[];
  proof?: object;
};

const RESULT_VERDICT: Record<string, Verdict> = {
  ok: "acted",
  duplicate: "duplicate",
  mismatch: "mismatch",
  not_delivered: "not_delivered",
  no_recipient: "unmatched",
  not_found: "unmatched",
};

/** The relay's email a notice is about, by the first of `ids` that names exactly one; null when none does. */
async function emailOf(env: Env, ids: readonly (string | null)[]): Promise<string | null> {
  for (const messageId of ids) {
    if (messageId === null) continue;
    const own = emailIdOf(messageId, isMessageId);
    if (own !== null) return own;
    const found = await emailsByHeader(env.DB, messageId, null);
    if (found.length === 1) return found[0]!;
  }
  return null;
}

const domainOf = (address: string) => address.slice(address.lastIndexOf("@") + 1).toLowerCase();
const overall = (lines: readonly Line[]): Verdict => RANK.find((v) => lines.some((l) => l.verdict === v)) ?? "info";

/** What one DSN block does to its recipient. */
function lateOutcome(r: DsnRecipient): "bounced" | "expired" | "delayed" {
  return r.action === "delayed" ? "delayed" : r.expired ? "expired" : "bounced";
}

async function takeDsn(env: Env, dsn: Extract<Report, { kind: "dsn" }>, proof: Proof): Promise<Outcome> {
  const blocks = dsn.dsn.recipients.filter((r) => r.action === "failed" || r.action === "delayed").slice(0, MAX_BLOCKS);
  const first = blocks[0];
  const kind =
    first === undefined ? "dsn_other" : { bounced: "bounce", expired: "expired", delayed: "delay" }[lateOutcome(first)];
  const line = (r: DsnRecipient, verdict: Verdict, why?: string): Line => ({
    address: r.address,
    action: r.action,
    status: r.status,
    reason: r.diagnostic,
    verdict,
    ...(why ? { why } : {}),
  });
  const id = dsn.token?.emailId ?? (await emailOf(env, [dsn.dsn.originalMessageId, ...dsn.dsn.references]));
  if (first === undefined)
    return { kind, verdict: "info", emailId: id, tenant: null, lines: dsn.dsn.recipients.map((r) => line(r, "info")) };
  if (id === null) {
    return {
      kind,
      verdict: "unmatched",
      emailId: null,
      tenant: null,
      lines: blocks.map((r) => line(r, "unmatched", "names no message of this relay")),
    };
  }
  const outbox = outboxOf(env, id);
  const lines: Line[] = [];
  let tenant: string | null = null;
  const apply = async (r: DsnRecipient, target: { idx: number } | { address: string }, named: (string | null)[]) => {
    const res = await outbox.afterDelivery(id, null, {
      kind: "bounce",
      target,
      response: bounceReply(r),
      named,
      outcome: lateOutcome(r),
    });
    if ("tenant" in res) tenant = res.tenant;
    return RESULT_VERDICT[res.result] ?? "unmatched";
  };
  for (const r of blocks) {
    if (dsn.token !== null) {
      lines.push(line(r, await apply(r, { idx: dsn.token.idx }, [r.address, r.original])));
      continue;
    }
    if (r.address === null) {
      lines.push(line(r, "unmatched", "names no recipient"));
      continue;
    }
    const domain = domainOf(r.address);
    const v = dsnVerdict(await proof.evidence(), domain, await proof.mxHosts(domain), settingsOf(env).reportingMtas);
    lines.push(v.act ? line(r, await apply(r, { address: r.address }, []), v.by) : line(r, "unauthenticated", v.why));
  }
  return { kind, verdict: overall(lines), emailId: id, tenant, lines };
}

async function takeArf(env: Env, token: Token | null, inc: Incoming, proof: Proof): Promise<Outcome> {
  let arf: ArfComplaint;
  try {
    arf = readArf(inc.mail.parts, token !== null);
  } catch (e) {
    return {
      kind: "complaint",
      verdict: "unmatched",
      emailId: null,
      tenant: null,
      lines: [],
      proof: { why: e instanceof Error ? e.message : String(e) },
    };
  }
  const lines = (verdict: Verdict, why?: string): Line[] =>
    arf.recipients.map((address) => ({
      address,
      action: "complained",
      status: arf.feedbackType,
      reason: "",
      verdict,
      ...(why ? { why } : {}),
    }));
  if (!(COMPLAINT_FEEDBACK_TYPES as readonly string[]).includes(arf.feedbackType)) {
    return {
      kind: "arf_other",
      verdict: "info",
      emailId: null,
      tenant: null,
      lines: lines("info", `Feedback-Type ${arf.feedbackType} is not a complaint`),
    };
  }
  const id = token?.emailId ?? (await emailOf(env, [arf.messageId]));
  if (id === null)
    return {
      kind: "complaint",
      verdict: "unmatched",
      emailId: null,
      tenant: null,
      lines: lines("unmatched", "names no message of this relay"),
    };
  if (token === null) {
    const v = arfVerdict(await proof.evidence(), settingsOf(env).feedbackLoopSenders);
    if (!v.act)
      return {
        kind: "complaint",
        verdict: "unauthenticated",
        emailId: id,
        tenant: null,
        lines: lines("unauthenticated", v.why),
      };
  }
  const out: Line[] = [];
  let tenant: string | null = null;
  // A report to a VERP address may name no recipient (feedback loops redact it): the address says who.
  const targets = token !== null ? [{ idx: token.idx, named: arf.recipients }] : arf.recipients;
  for (const who of targets) {
    const res = await recordComplaint(env, id, null, who, arf.feedbackType);
    if ("tenant" in res) tenant = res.tenant;
    const address = typeof who === "string" ? who : "address" in res ? res.address : null;
    out.push({
      address,
      action: "complained",
      status: arf.feedbackType,
      reason: "",
      verdict: RESULT_VERDICT[res.result] ?? "unmatched",
    });
  }
  return { kind: "complaint", verdict: overall(out), emailId: id, tenant, lines: out };
}

/** The report's own Message-ID, or null. */
function ownMessageId(head: string): string | null {
  return /^message-id:[ \t]*(<[^<>\s]+>)/im.exec(head.split(/\r?\n\r?\n/, 1)[0] ?? "")?.[1] ?? null;
}

/** See the header. */
export async function takeReport(env: Env, report: Report, inc: Incoming): Promise<string> {
  if (report.kind === "auto-reply") return "auto_reply";
  if (report.kind === "unsubscribe") {
    const t = report.token;
    const res = await outboxOf(env, t.emailId).afterDelivery(t.emailId, null, {
      kind: "unsubscribe",
      idx: t.idx,
      method: "mailto",
    });
    return res.result === "ok" || res.result === "duplicate" ? "unsubscribe" : "unsubscribe_unmatched";
  }
  const messageId = ownMessageId(inc.mail.head);
  if (await reportSeen(env.DB, messageId, inc.message.to)) return "duplicate";
  const proof = new Proof(env, inc.bytes, inc.mail);
  const out = report.kind === "dsn" ? await takeDsn(env, report, proof) : await takeArf(env, report.token, inc, proof);
  const evidence =
    report.token === null && out.verdict !== "info" && out.verdict !== "unmatched" ? await proof.evidence() : null;
  await saveReport(env.DB, {
    id: crypto.randomUUID(),
    received_at: inc.nowMs,
    kind: report.kind,
    verdict: out.verdict,
    email_id: out.emailId,
    tenant_id: out.tenant,
    envelope_from: inc.message.from,
    envelope_to: inc.message.to,
    message_id: messageId,
    detail: JSON.stringify({
      recipients: out.lines,
      ...(report.token ? { verp: { email_id: report.token.emailId, idx: report.token.idx } } : {}),
      ...(evidence ? { evidence: { dkim: evidence.dkim, spf: evidence.spf } } : {}),
      ...out.proof,
    }),
    raw: new TextDecoder("latin1").decode(inc.bytes.subarray(0, INBOUND_STORED_BYTES)),
    raw_size: inc.bytes.length,
  });
  if (out.verdict === "acted" || out.verdict === "info") return out.kind;
  return out.verdict === "duplicate" ? "duplicate" : `${out.kind}_${out.verdict}`;
}
