/**
 * What an inbound report can prove about where it comes from (the I/O half; inbound/core/trust.ts
 * judges it).
 *
 * DESCRIPTION
 *   new Proof(env, bytes, mail)   one per inbound message; each answer is looked up once.
 *   proof.evidence()     Evidence: the DKIM and SPF identities Email Routing vouches for in the
 *       first Authentication-Results (or ARC-Authentication-Results) field from the top whose
 *       authserv-id is ROUTING_AUTHSERV_ID (routingVerdicts; Email Routing adds its own on top,
 *       above anything the sender wrote), plus the domains of the DKIM signatures the relay
 *       verifies itself over DoH (mail/dkim-verify.ts; the first DKIM_VERIFY_LIMIT bytes of a
 *       message longer than that are not verified: Email Routing's verdict covers it), the
 *       envelope sender and the From header's domain.
 *   proof.mxHosts(domain)  the MX host names of `domain` over DoH (none when the look-up fails).
 *   routingVerdicts(head, authservId)  the first part of evidence(), pure.
 *
 * INVARIANTS
 *   Nothing is believed from a header field below the first one of the trusted authserv-id, and
 *   nothing at all when ROUTING_AUTHSERV_ID is "" (development: the message is whatever was posted).
 */
import { fields } from "../mail/arf";
import { parseAuthResults, passedIdentities } from "../mail/auth-results";
import { verifyDkim } from "../mail/dkim-verify";
import type { InboundMail } from "../mail/inbound";
import { dnsLookup } from "../domains/service";
import { settingsOf } from "../settings/settings";
import type { Evidence } from "./core/trust";

/** Messages longer than this are not DKIM-verified by the relay (their body hash would be the cost). */
export const DKIM_VERIFY_LIMIT = 8 * 1024 * 1024;

/** See the header. */
export function routingVerdicts(head: string, authservId: string): { dkim: string[]; spf: string[] } | null {
  if (authservId === "") return null;
  const block = head.replace(/\r\n/g, "\n").split(/\n\n/, 1)[0] ?? "";
  for (const line of block.replace(/\n[ \t]+/g, " ").split("\n")) {
    const m = /^(arc-authentication-results|authentication-results)\s*:(.*)$/i.exec(line);
    if (!m) continue;
    const parsed = parseAuthResults(m[2]!);
    if (parsed?.authservId === authservId) return passedIdentities(parsed);
  }
  return null;
}

/** The domain of the first address in a From field, lower-cased, or null. */
function fromDomain(head: string): string | null {
  const from = fields(head).get("from")?.[0] ?? "";
  const addr = /<([^<>\s]+@[^<>\s]+)>/.exec(from)?.[1] ?? /([^\s<>,;:"]+@[^\s<>,;:"]+)/.exec(from)?.[1];
  return addr
    ? addr
        .slice(addr.lastIndexOf("@") + 1)
        .toLowerCase()
        .replace(/\.$/, "")
    : null;
}

/** See the header. */
export class Proof {
  private ev: Promise<Evidence> | null = null;
  private readonly mx = new Map<string, Promise<string[]>>();

  constructor(
    private readonly env: Env,
    private readonly bytes: Uint8Array,
    private readonly mail: InboundMail,
  ) {}

  evidence(): Promise<Evidence> {
    this.ev ??= this.gather();
    return this.ev;
  }

  mxHosts(domain: string): Promise<string[]> {
    const d = domain.toLowerCase();
    let p = this.mx.get(d);
    if (!p) {
      const host = (v: string) => v.trim().split(/\s+/).pop()!.replace(/\.$/, "").toLowerCase();
      p = dnsLookup(this.env, d, "MX").then((f) => (f.kind === "answer" ? f.values.map(host) : []));
      this.mx.set(d, p);
    }
    return p;
  }

  private async gather(): Promise<Evidence> {
    const routing = routingVerdicts(this.mail.head, settingsOf(this.env).routingAuthservId) ?? { dkim: [], spf: [] };
    const own =
      this.bytes.length > DKIM_VERIFY_LIMIT
        ? []
        : await verifyDkim(
            this.bytes,
            async (name) => {
              const f = await dnsLookup(this.env, name, "TXT");
              return f.kind === "answer" ? f.values : null;
            },
            { nowSec: Math.floor(Date.now() / 1000) },
          );
    const dkim = [...new Set([...routing.dkim, ...own.filter((v) => v.result === "pass").map((v) => v.domain)])];
    return { dkim, spf: routing.spf, envelopeFrom: this.mail.envelopeFrom, fromDomain: fromDomain(this.mail.head) };
  }
}
