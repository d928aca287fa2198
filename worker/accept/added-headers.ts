/**
 * The header fields the accept path adds to a send request's own (prepare.ts's prepareEmail):
 * one-click unsubscribe and complaint routing.
 *
 * DESCRIPTION
 *   unsubscribeHeaders(env, input, id, origin, returnPath, count, own)  List-Unsubscribe and
 *                                  List-Unsubscribe-Post (RFC 8058) for the one recipient.
 *   feedbackHeaders(input, tenant, verifiedReturnPath)  Feedback-ID and, for a verified domain,
 *                                  CFBL-Address (RFC 9477), unless the request sets its own.
 *
 * ERRORS
 *   ApiError 422 validation_error: `unsubscribe` with more than one recipient, or with a
 *   List-Unsubscribe of the caller's own.
 */
import { tokenOf } from "../mail/verp";
import { addressTokenKey } from "../inbound/tokens";
import { ApiError } from "../model/errors";
import type { SendEmail } from "./schemas";

/**
 * The request's headers with List-Unsubscribe and List-Unsubscribe-Post (RFC 8058) added: a
 * signed https link to the one recipient's unsubscribe (routes/unsubscribe.ts), and a mailto at
 * the return-path domain when there is one (inbound/email.ts takes it). Signed with the rest of
 * the header by DKIM (both are in DEFAULT_SIGNED_HEADERS). 422 for more than one recipient (the
 * body, and so the link, is the same for all of them) or a List-Unsubscribe of the caller's own.
 */
export async function unsubscribeHeaders(
  env: Env,
  input: SendEmail,
  id: string,
  origin: string,
  returnPath: string | null,
  count: number,
  own: string | undefined,
): Promise<Record<string, string>> {
  if (count !== 1)
    throw new ApiError(
      422,
      "validation_error",
      "`unsubscribe` needs exactly one recipient (to, cc and bcc together): send one email per recipient, e.g. with /emails/batch.",
    );
  if (own)
    throw new ApiError(422, "validation_error", `\`unsubscribe\` adds ${own} itself: remove it from \`headers\`.`);
  const token = await tokenOf(await addressTokenKey(env), "unsubscribe", id, 0);
  const links = [
    `<${origin}/unsubscribe/${token.slice(token.indexOf("+") + 1)}>`,
    ...(returnPath ? [`<mailto:${token}@${returnPath}>`] : []),
  ];
  return {
    ...input.headers,
    "List-Unsubscribe": links.join(", "),
    "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
  };
}

/** A Feedback-ID field: [A-Za-z0-9_.-] only (":" separates them), at most 64 characters. */
function feedbackField(v: string | undefined, fallback: string): string {
  const clean = (v ?? "").replace(/[^A-Za-z0-9_.-]/g, "-").slice(0, 64);
  return clean === "" ? fallback : clean;
}

/**
 * Complaint routing headers, unless the request sets its own: Feedback-ID (Gmail's feedback loop:
 * "<campaign>:<tenant>:<category>:cohort", campaign and category from the tags of those names)
 * and, for a domain the tenant verified, CFBL-Address (RFC 9477) at its return-path host, which
 * aligns with the DKIM domain; ARF reports sent there come back through the email() handler.
 * DKIM signs both (DEFAULT_SIGNED_HEADERS).
 */
export function feedbackHeaders(
  input: SendEmail,
  tenant: string,
  verifiedReturnPath: string | null,
): Record<string, string> {
  const own = new Set(Object.keys(input.headers ?? {}).map((h) => h.toLowerCase()));
  const tag = (name: string) => input.tags?.find((t) => t.name === name)?.value;
  const out: Record<string, string> = {};
  if (!own.has("feedback-id"))
    out["Feedback-ID"] =
      `${feedbackField(tag("campaign"), "none")}:${feedbackField(tenant, "tenant")}:${feedbackField(tag("category"), "transactional")}:cohort`;
  if (verifiedReturnPath !== null && !own.has("cfbl-address"))
    out["CFBL-Address"] = `fbl@${verifiedReturnPath}; report=arf`;
  return out;
}
