/**
 * NAME
 *   trust - whether a report that came back by mail proves itself enough to change anything
 *
 * SUMMARY
 *   A bounce or complaint only changes a message when it shows that it comes from the party
 *   entitled to make it: the address the relay signed (VERP), or an authenticated reporter that
 *   the recipient's domain or the operator names.
 *
 * DESCRIPTION
 *   Evidence is what the shell gathered about one inbound message: the domains whose DKIM
 *   signature verified (`dkim`), the domains SPF passed for (`spf`: the MAIL FROM domain and the
 *   HELO name), the envelope sender ("" for the null sender) and the From header's domain.
 *
 *   orgDomain(name)   the organisational domain: the registrable name under the Public Suffix
 *       List (ICANN and private sections, from the tldts package), else the name itself.
 *   sameOrg(a, b)     whether two names share their organisational domain.
 *   covers(list, name)  whether `name` is one of the listed domains or under one of them.
 *   dsnVerdict(e, recipientDomain, mxHosts, reporters)  for a DSN that came to no VERP address:
 *       it acts on a recipient of `recipientDomain` only when it came from the null sender (or
 *       MAILER-DAEMON / postmaster: a mailbox user cannot send as those through a provider) and
 *       an authenticated identity (DKIM first, then SPF) shares its organisational domain with
 *       the recipient domain or one of its MX hosts, or is covered by the configured reporters
 *       (REPORTING_MTAS: a smarthost, a provider that bounces from another domain than its MX).
 *   arfVerdict(e, fblSenders)  for an ARF report that came to no VERP address: it acts only when
 *       its From domain is covered by FEEDBACK_LOOP_SENDERS and a verified DKIM signature's
 *       domain is aligned with it (the same organisational domain, DMARC's relaxed alignment).
 *   tokenNames(target, named)  for a report that came to a VERP address: whether what it names
 *       (Final-Recipient, Original-Recipient, Original-Rcpt-To) fits the recipient the address
 *       was signed for: it names nothing (the address alone says who), or names that recipient.
 *
 * INVARIANTS
 *   Pure: no I/O, no clock. Every verdict that does not act says why, in words an operator
 *   reads. Names are compared lower-cased without a trailing dot.
 *
 * ERRORS
 *   None thrown.
 */
import { parse } from "tldts";

/** What the shell found out about one inbound message (see the header). */
export interface Evidence {
  dkim: string[];
  spf: string[];
  envelopeFrom: string;
  fromDomain: string | null;
}

/** Whether to act, and why (or why not). */
export type Verdict = { act: true; by: string } | { act: false; why: string };

const clean = (name: string) => name.trim().toLowerCase().replace(/\.$/, "");

/** See the header. */
export function orgDomain(name: string): string {
  const n = clean(name);
  return parse(n, { allowPrivateDomains: true }).domain ?? n;
}

/** See the header. */
export function sameOrg(a: string, b: string): boolean {
  return orgDomain(a) === orgDomain(b);
}

/** See the header. */
export function covers(list: readonly string[], name: string): boolean {
  const n = clean(name);
  return list.some((d) => {
    const l = clean(d);
    return l !== "" && (n === l || n.endsWith(`.${l}`));
  });
}

/** Whether the envelope sender is one a bounce comes from (see dsnVerdict). */
export function fromDaemon(envelopeFrom: string): boolean {
  const a = envelopeFrom.trim().replace(/^<|>$/g, "");
  if (a === "") return true;
  return /^(mailer-daemon|postmaster)@/i.test(a);
}

/** See the header. */
export function dsnVerdict(
  e: Evidence,
  recipientDomain: string,
  mxHosts: readonly string[],
  reporters: readonly string[],
): Verdict {
  if (!fromDaemon(e.envelopeFrom))
    return { act: false, why: `sent from ${e.envelopeFrom}, not from the null sender or MAILER-DAEMON as bounces are` };
  const ids = [...e.dkim.map((d) => ({ d, how: "DKIM" })), ...e.spf.map((d) => ({ d, how: "SPF" }))];
  if (ids.length === 0) return { act: false, why: "unauthenticated: no DKIM signature verified and SPF did not pass" };
  const owners = [recipientDomain, ...mxHosts].filter((h) => h !== "" && h !== ".");
  for (const { d, how } of ids) {
    const mx = owners.find((o) => sameOrg(d, o));
    if (mx !== undefined)
      return {
        act: true,
        by: `${how} ${d}, of ${mx === recipientDomain ? "the recipient's domain" : `its MX host ${mx}`}`,
      };
    if (covers(reporters, d)) return { act: true, by: `${how} ${d}, a configured reporting MTA` };
  }
  const names = [...new Set(ids.map((i) => i.d))].join(", ");
  const mx = mxHosts.join(", ") || "none found";
  return {
    act: false,
    why: `authenticated as ${names}, which is neither ${recipientDomain} nor its MX (${mx}) nor a configured reporting MTA`,
  };
}

/** See the header. */
export function arfVerdict(e: Evidence, fblSenders: readonly string[]): Verdict {
  const from = e.fromDomain;
  if (from === null || !covers(fblSenders, from))
    return { act: false, why: `from ${from ?? "no domain"}, which is not a configured feedback-loop sender` };
  const aligned = e.dkim.find((d) => sameOrg(d, from));
  if (aligned === undefined) {
    const signed = e.dkim.length > 0 ? `signed by ${e.dkim.join(", ")}` : "none verified";
    return { act: false, why: `from ${from}, but no verified DKIM signature aligns with it (${signed})` };
  }
  return { act: true, by: `DKIM ${aligned}, aligned with ${from}, a configured feedback-loop sender` };
}

/** See the header. */
export function tokenNames(target: string, named: readonly (string | null)[]): Verdict {
  const names = named.filter((n): n is string => n !== null && n !== "").map(clean);
  if (names.length === 0) return { act: true, by: "the signed VERP address" };
  const t = clean(target);
  if (names.includes(t)) return { act: true, by: "the signed VERP address, naming its recipient" };
  return {
    act: false,
    why: `names ${[...new Set(names)].join(", ")}, but the VERP address it came to was signed for another recipient`,
  };
}
