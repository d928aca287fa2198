/*
 * NAME
 *   rules - the compliance check at send time: what receivers enforce, known before queueing
 *
 * SUMMARY
 *   Gmail and Yahoo (since 2024, refusing at SMTP since November 2025) and Microsoft (since May
 *   2025) refuse bulk mail that is not authenticated and aligned, lacks one-click unsubscribe, or
 *   is not RFC 5322 compliant. checkCompliance says, for one message as it will be sent, which
 *   of those rules it breaks and the reply a receiver would give.
 *
 * DESCRIPTION
 *   checkCompliance(input)   the warnings (Warning[]) of one message, each with its rule, the
 *                            reply code and enhanced status a receiver would give, and a message:
 *     auth.domain_not_verified   the From domain is not a domain the tenant verified: its DKIM key
 *                                and return path are not known to pass (550 5.7.26).
 *     auth.dkim_not_aligned      no DKIM signature whose d= aligns with the From domain under the
 *                                domain's adkim (550 5.7.32); none at all is 550 5.7.30.
 *     auth.dmarc_missing         the From domain (or its Organizational Domain, RFC 9989's tree
 *                                walk) publishes no DMARC record (Gmail 550 5.7.40; Microsoft
 *                                550 5.7.515).
 *     auth.spf_not_aligned       the envelope sender's domain (the return path) does not align
 *                                with the From domain under aspf (550 5.7.32); judged for a
 *                                verified domain only when it has a DMARC record.
 *     bulk.one_click_missing     bulk mail (a topic or an unsubscribe, a List-Unsubscribe of its
 *                                own, Precedence: bulk/list) without an https List-Unsubscribe and
 *                                "List-Unsubscribe-Post: List-Unsubscribe=One-Click" (RFC 8058),
 *                                both signed by DKIM (550 5.7.1 at Gmail, which may also junk it).
 *     headers.message_id         no Message-ID, or one that is not "<left@right>" (550 5.7.1).
 *     headers.date               no Date, or one that is not an RFC 5322 date (550 5.7.1).
 *     provider.size              over a recipient provider's message size limit (552 5.3.4).
 *     provider.recipients        more recipients at one provider than it takes per message
 *                                (452 4.5.3).
 *   headerFields(text)       the header section's fields, unfolded, by lower-case name.
 *   dkimSignatures(fields)   each DKIM-Signature's d= and h= (lower case).
 *
 * INVARIANTS
 *   Pure; the DNS facts come in (cached with the domain), so the check makes no query.
 *
 * ERRORS
 *   None thrown.
 */
import { aligned, type DmarcFacts, type DmarcRecord } from "./dmarc";

export interface Warning {
  rule: string;
  code: number;
  enhanced: string;
  message: string;
}

/** A recipient provider's limits and how many of the message's recipients it hosts. */
export interface ProviderShare {
  provider: string;
  recipients: number;
  maxMessageBytes?: number;
  maxRecipients?: number;
}

export interface ComplianceInput {
  fromDomain: string;
  /** The tenant verified the From domain. */
  verified: boolean;
  /** Its DMARC facts (null: unknown, the domain is not verified or was verified before facts were kept). */
  dmarc: DmarcFacts | null;
  /** The envelope sender's domain (null: the null sender). */
  returnPathDomain: string | null;
  bulk: boolean;
  /** The header section of the message as it will be sent (signed). */
  header: string;
  size: number;
  providers: ProviderShare[];
}

export function headerFields(text: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const end = text.indexOf("\r\n\r\n");
  const head = (end < 0 ? text : text.slice(0, end)).replace(/\r\n[ \t]+/g, " ");
  for (const line of head.split("\r\n")) {
    const c = line.indexOf(":");
    if (c <= 0) continue;
    const name = line.slice(0, c).trim().toLowerCase();
    out.set(name, [...(out.get(name) ?? []), line.slice(c + 1).trim()]);
  }
  return out;
}

export function dkimSignatures(fields: Map<string, string[]>): { d: string; h: string[] }[] {
  return (fields.get("dkim-signature") ?? []).map((v) => {
    const tag = (t: string) =>
      new RegExp(`(?:^|;)\\s*${t}\\s*=\\s*([^;]*)`, "i").exec(v)?.[1]?.replace(/\s+/g, "") ?? "";
    return { d: tag("d").toLowerCase(), h: tag("h").toLowerCase().split(":").filter(Boolean) };
  });
}

const MSG_ID = /^<[^<>@\s]+@[^<>@\s]+>$/;
// RFC 5322 date-time in three parts: [weekday,] day, then month and year, then time and zone [(comment)].
const DATE = new RegExp(
  /^(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun),\s*)?\d{1,2}/.source +
    /\s+(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\s+\d{4}/.source +
    /\s+\d{2}:\d{2}(?::\d{2})?\s+(?:[+-]\d{4}|UT|GMT|[ECMP][SD]T|[A-IK-Za-ik-z])(?:\s*\([^)]*\))?$/.source,
);

const w = (rule: string, code: number, enhanced: string, message: string): Warning => ({
  rule,
  code,
  enhanced,
  message,
});

function authWarnings(i: ComplianceInput, sigs: { d: string; h: string[] }[]): Warning[] {
  const out: Warning[] = [];
  if (!i.verified)
    out.push(
      w(
        "auth.domain_not_verified",
        550,
        "5.7.26",
        `${i.fromDomain} is not a domain you verified: receivers cannot authenticate mail from it (verify it: POST /domains, then POST /domains/:id/verify).`,
      ),
    );
  const facts = i.dmarc;
  const records = new Map<string, DmarcRecord | null>();
  if (facts?.record && facts.foundAt) records.set(facts.foundAt, facts.record);
  const adkim = facts?.record?.adkim ?? "r";
  const aspf = facts?.record?.aspf ?? "r";
  if (sigs.length === 0)
    out.push(
      w(
        "auth.dkim_not_aligned",
        550,
        "5.7.30",
        `The message carries no DKIM signature: Gmail refuses unsigned bulk mail.`,
      ),
    );
  else if (!sigs.some((s) => aligned(s.d, i.fromDomain, adkim, records))) {
    out.push(
      w(
        "auth.dkim_not_aligned",
        550,
        "5.7.32",
        `No DKIM signature aligns with ${i.fromDomain} (d=${sigs.map((s) => s.d).join(", ")}; adkim=${adkim}).`,
      ),
    );
  }
  if (i.verified && facts && facts.record === null) {
    out.push(
      w(
        "auth.dmarc_missing",
        550,
        "5.7.40",
        `${i.fromDomain} publishes no DMARC record (nor does its Organizational Domain ${facts.organizationalDomain}): Gmail answers 550 5.7.40, Microsoft ` +
          `550 5.7.515. Publish at least "v=DMARC1; p=none" at _dmarc.${facts.organizationalDomain}.`,
      ),
    );
  }
  // Without a DMARC record there is no alignment to judge (auth.dmarc_missing says so); an
  // unverified domain's return path is only judged when it is another domain altogether.
  if (
    i.returnPathDomain !== null &&
    (facts?.record || !i.verified) &&
    !aligned(i.returnPathDomain, i.fromDomain, aspf, records)
  ) {
    out.push(
      w(
        "auth.spf_not_aligned",
        550,
        "5.7.32",
        `The return path ${i.returnPathDomain} does not align with ${i.fromDomain} (aspf=${aspf}): SPF cannot pass DMARC for it.`,
      ),
    );
  }
  return out;
}

function bulkWarnings(
  i: ComplianceInput,
  fields: Map<string, string[]>,
  sigs: { d: string; h: string[] }[],
): Warning[] {
  const lu = fields.get("list-unsubscribe")?.[0] ?? null;
  const precedence = (fields.get("precedence")?.[0] ?? "").toLowerCase();
  if (!(i.bulk || lu !== null || precedence === "bulk" || precedence === "list")) return [];
  const post = fields.get("list-unsubscribe-post")?.[0] ?? null;
  const signed = (h: string) => sigs.some((s) => s.h.includes(h));
  const problems: string[] = [];
  if (lu === null || !/<https:\/\/[^>]+>/i.test(lu)) problems.push("List-Unsubscribe with an https URL");
  if (post === null || post.replace(/\s+/g, "") !== "List-Unsubscribe=One-Click")
    problems.push("List-Unsubscribe-Post: List-Unsubscribe=One-Click");
  if (lu !== null && !signed("list-unsubscribe")) problems.push("List-Unsubscribe covered by the DKIM signature");
  if (post !== null && !signed("list-unsubscribe-post"))
    problems.push("List-Unsubscribe-Post covered by the DKIM signature");
  if (problems.length === 0) return [];
  return [
    w(
      "bulk.one_click_missing",
      550,
      "5.7.1",
      `Bulk mail needs one-click unsubscribe (RFC 8058): missing ${problems.join("; ")}. Gmail and Yahoo refuse or junk bulk mail without it; send with ` +
        `\`unsubscribe\` to have it added.`,
    ),
  ];
}

function headerWarnings(fields: Map<string, string[]>): Warning[] {
  const out: Warning[] = [];
  const ids = fields.get("message-id") ?? [];
  if (ids.length !== 1 || !MSG_ID.test(ids[0]!))
    out.push(
      w(
        "headers.message_id",
        550,
        "5.7.1",
        ids.length === 0
          ? "The message has no Message-ID: Gmail refuses messages without a valid one."
          : `The Message-ID ${JSON.stringify(ids.join(", "))} is ` + `not one "<id-left@id-right>" (RFC 5322 3.6.4).`,
      ),
    );
  const dates = fields.get("date") ?? [];
  if (dates.length !== 1 || !DATE.test(dates[0]!))
    out.push(
      w(
        "headers.date",
        550,
        "5.7.1",
        dates.length === 0
          ? "The message has no Date field (RFC 5322 3.6 requires one)."
          : `The Date ${JSON.stringify(dates.join(", "))} is not an RFC 5322 ` + `date.`,
      ),
    );
  return out;
}

function providerWarnings(i: ComplianceInput): Warning[] {
  const out: Warning[] = [];
  for (const p of i.providers) {
    if (p.maxMessageBytes !== undefined && i.size > p.maxMessageBytes)
      out.push(
        w(
          "provider.size",
          552,
          "5.3.4",
          `The message is ${i.size} bytes; ${p.provider} takes at most ${p.maxMessageBytes}.`,
        ),
      );
    if (p.maxRecipients !== undefined && p.recipients > p.maxRecipients)
      out.push(
        w(
          "provider.recipients",
          452,
          "4.5.3",
          `${p.recipients} recipients are at ${p.provider}, which takes at most ${p.maxRecipients} per message.`,
        ),
      );
  }
  return out;
}

export function checkCompliance(i: ComplianceInput): Warning[] {
  const fields = headerFields(i.header);
  const sigs = dkimSignatures(fields);
  return [
    ...authWarnings(i, sigs),
    ...bulkWarnings(i, fields, sigs),
    ...headerWarnings(fields),
    ...providerWarnings(i),
  ];
}
