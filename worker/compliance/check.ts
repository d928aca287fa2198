/**
 * The compliance check of the accept path (core/rules.ts decides): the facts of one message as it
 * will be sent, and what the tenant's setting does with the warnings.
 *
 * DESCRIPTION
 *   complianceWarnings(env, m)  the warnings of a composed (and signed) message: the From domain,
 *       whether the tenant verified it and the DMARC facts its verification stored (read with the
 *       API key, no query of its own), the return path, whether it is bulk, its header section,
 *       size and recipients, with the recipient providers' limits (provider rules whose `domains`
 *       list the recipient's domain; read once per 30 s per isolate). No DNS query is made.
 *   enforceCompliance(sender, warnings)  with `compliance: "strict"` any warning refuses the send:
 *       ApiError 422 compliance_error naming each rule and the reply a receiver would give.
 *
 * INVARIANTS
 *   Warn mode never refuses; strict mode refuses exactly when there is a warning.
 */
import { ApiError } from "../model/errors";
import type { SenderPolicy } from "../domains/sender";
import { providerRulesOf } from "../db/providers";
import { checkCompliance, type ProviderShare, type Warning } from "./core/rules";
import type { DmarcFacts } from "./core/dmarc";

export type { Warning };

/** What the check needs of a message. */
export interface CheckedMessage {
  sender: SenderPolicy;
  fromDomain: string;
  /** The envelope sender ("" for the null sender) and the VERP return-path domain, if any. */
  mailFrom: string;
  returnPath: string | null;
  bulk: boolean;
  /** The message as it will be sent (signed): string or octets. */
  body: string | Uint8Array;
  rcptTo: string[];
}

function headerOf(body: string | Uint8Array): string {
  if (typeof body === "string") {
    const end = body.indexOf("\r\n\r\n");
    return end < 0 ? body : body.slice(0, end + 4);
  }
  let end = -1;
  for (let i = 0; i + 3 < body.length; i++)
    if (body[i] === 13 && body[i + 1] === 10 && body[i + 2] === 13 && body[i + 3] === 10) {
      end = i;
      break;
    }
  return new TextDecoder().decode(end < 0 ? body : body.subarray(0, end + 4));
}

async function providerShares(env: Env, rcptTo: string[]): Promise<ProviderShare[]> {
  const rules = (await providerRulesOf(env)).filter((r) => r.domains && r.domains.length > 0);
  if (rules.length === 0) return [];
  const out: ProviderShare[] = [];
  for (const r of rules) {
    const n = rcptTo.filter((a) => r.domains!.includes(a.slice(a.lastIndexOf("@") + 1).toLowerCase())).length;
    if (n > 0)
      out.push({
        provider: r.name,
        recipients: n,
        ...(r.max_message_bytes ? { maxMessageBytes: r.max_message_bytes } : {}),
        ...(r.max_recipients ? { maxRecipients: r.max_recipients } : {}),
      });
  }
  return out;
}

/** See the header. */
export async function complianceWarnings(env: Env, m: CheckedMessage): Promise<Warning[]> {
  const { verified, facts } = m.sender.verifiedDmarc(m.fromDomain);
  const returnPathDomain =
    m.returnPath ?? (m.mailFrom === "" ? null : m.mailFrom.slice(m.mailFrom.lastIndexOf("@") + 1).toLowerCase());
  return checkCompliance({
    fromDomain: m.fromDomain.toLowerCase(),
    verified,
    dmarc: facts ? (JSON.parse(facts) as DmarcFacts) : null,
    returnPathDomain,
    bulk: m.bulk,
    header: headerOf(m.body),
    size: typeof m.body === "string" ? m.body.length : m.body.byteLength,
    providers: await providerShares(env, m.rcptTo),
  });
}

/** See the header. */
export function enforceCompliance(sender: SenderPolicy, warnings: readonly Warning[]): void {
  if (!sender.strictCompliance || warnings.length === 0) return;
  const list = warnings
    .map((w) => `${w.rule} (a receiver would answer ${w.code} ${w.enhanced}): ${w.message}`)
    .join(" ");
  throw new ApiError(422, "compliance_error", `Refused by the compliance check (compliance: "strict"): ${list}`);
}
