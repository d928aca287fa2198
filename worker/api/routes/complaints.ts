/**
 * Feedback-loop reports (ARF, RFC 5965) about mail this relay sent.
 *
 * DESCRIPTION
 *   POST /relay/complaints   the report as sent by the mailbox provider (the whole
 *                            `multipart/report; report-type=feedback-report` message as the body,
 *                            e.g. Content-Type: message/rfc822). The original is found by the
 *                            Message-ID the relay gave it (`<email id@domain>`), or else by its
 *                            Message-ID in the D1 index (one the sender set), its recipients by
 *                            Original-Rcpt-To; each delivered one gets one email.complained and is
 *                            suppressed for the tenant until removed, as with
 *                            POST /relay/messages/:id/complaint. A tenant key reports about its own
 *                            tenant's mail; an operator key (an FBL processor) about any tenant's.
 *                            Answers { object: "complaint", email_id, feedback_type,
 *                            recipients: [{ recipient, result: ok | duplicate | no_recipient |
 *                            not_delivered }] }.
 *
 * ERRORS
 *   413 above 1 MiB; 422 validation_error for a body that is not an ARF report, has no original
 *   Message-ID or recipient, a Message-ID that names no email (or several of an operator key's
 *   tenants' — then ask with the email id), a Feedback-Type that is
 *   not a complaint (not-spam), or no recipient the complaint can apply to; 404 not_found for an
 *   email that is unknown or another tenant's.
 */
import { Hono } from "hono";
import PostalMime from "postal-mime";
import { isMessageId } from "../../model/ids";
import { emailIdOf, readArf, type ArfComplaint, type ReportPart } from "../../mail/arf";
import { type AppEnv } from "../http/context";
import { readBody } from "../http/body";
import { COMPLAINT_FEEDBACK_TYPES } from "../http/control-schemas";
import { recordComplaint } from "../../policy/complaint-brake";
import { ApiError } from "../../model/errors";
import { RoleCache, scopeOf } from "../http/operator";
import { emailsByHeader } from "../../db/message-reads";

/** Largest report read. */
const REPORT_LIMIT = 1024 * 1024;

const COMPLAINT_TYPES = new Set<string>(COMPLAINT_FEEDBACK_TYPES);

async function partsOf(bytes: ArrayBuffer): Promise<ReportPart[]> {
  const parsed = await PostalMime.parse(bytes).catch(() => {
    throw new ApiError(422, "validation_error", "The report could not be parsed as a MIME message.");
  });
  return parsed.attachments.map((a) => ({
    mimeType: a.mimeType,
    text: typeof a.content === "string" ? a.content : new TextDecoder().decode(a.content),
  }));
}

function complaintOf(parts: ReportPart[]): ArfComplaint {
  try {
    return readArf(parts);
  } catch (e) {
    if (e instanceof Error && (e as { isArfError?: boolean }).isArfError)
      throw new ApiError(422, "validation_error", `Not a usable ARF report: ${e.message}.`);
    throw e;
  }
}

/** The email whose Message-ID header is `messageId` in the index (the tenant's, for a tenant key). */
async function byHeader(db: D1Database, messageId: string, tenant: string | null): Promise<string> {
  const rows = await emailsByHeader(db, messageId, tenant);
  if (rows.length === 1) return rows[0]!;
  throw new ApiError(
    422,
    "validation_error",
    rows.length === 0
      ? "The original Message-ID names no email of this relay."
      : "The original Message-ID names several emails; report with POST /relay/messages/:id/complaint.",
  );
}

/** The feedback-report route, mounted at /relay/complaints. */
export function complaintRoutes() {
  const r = new Hono<AppEnv>();
  const roles = new RoleCache();
  r.post("/", async (c) => {
    const arf = complaintOf(await partsOf(await readBody(c, REPORT_LIMIT)));
    if (!COMPLAINT_TYPES.has(arf.feedbackType))
      throw new ApiError(422, "validation_error", `Feedback-Type ${arf.feedbackType} is not a complaint.`);
    const tenant = await scopeOf(c, roles);
    const id = emailIdOf(arf.messageId, isMessageId) ?? (await byHeader(c.env.DB, arf.messageId, tenant));
    const recipients: { recipient: string; result: string }[] = [];
    for (const recipient of arf.recipients) {
      const res = await recordComplaint(c.env, id, tenant, recipient, arf.feedbackType);
      if (res.result === "not_found") throw new ApiError(404, "not_found", "Email not found.");
      recipients.push({ recipient, result: res.result });
    }
    if (!recipients.some((x) => x.result === "ok" || x.result === "duplicate")) {
      throw new ApiError(422, "validation_error", "No recipient of the report was delivered this email.");
    }
    return c.json({ object: "complaint", email_id: id, feedback_type: arf.feedbackType, recipients });
  });
  return r;
}
