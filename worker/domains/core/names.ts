/**
 * NAME
 *   names - one way to write a domain name, and who may claim one
 *
 * SUMMARY
 *   Domain names are normalised one way everywhere (POST /domains, the sender's From domain, the
 *   ownership checks): lower case, no trailing dot, IDN as A-labels. A public suffix (the Public
 *   Suffix List, ICANN and private sections, from the tldts package) is nobody's to claim, and
 *   nor is a name at or under a domain another tenant verified.
 *
 * DESCRIPTION
 *   domainName(raw)   { ok: true, name } or { ok: false, why }: trimmed, one trailing dot
 *       dropped, IDN → A-labels with mail/address.ts toAsciiDomain (the same function the From
 *       address goes through), LDH labels; refused when it is a public suffix ("co.uk",
 *       "github.io") or a single label.
 *   isPublicSuffix(name)  whether the PSL lists `name` itself as a suffix (no registrable part).
 *   lineage(name)     `name` and each parent domain above it that is not a public suffix, nearest
 *       first: "mail.acme.co.uk" → ["mail.acme.co.uk", "acme.co.uk"].
 *   claimProblem(name, tenant, verified)  why `tenant` may not claim or verify `name`, given the
 *       verified domains among lineage(name) (name → owning tenant): another tenant verified the
 *       name itself, or a parent of it (mail., and send., the return-path host, of another's
 *       domain); null when nothing stands in the way. The nearest verified name decides: under the
 *       tenant's own verified domain it may claim, whoever verified a domain further up.
 *
 * INVARIANTS
 *   Pure (the PSL is data inside tldts). domainName(x).name is a fixed point:
 *   domainName(domainName(x).name) gives the same name.
 *
 * ERRORS
 *   None thrown: refusals are results.
 */
import { parse } from "tldts";
import { toAsciiDomain } from "../../mail/address";

/** A normalised name, or why there is none. */
export type NameResult = { ok: true; name: string } | { ok: false; why: string };

/** See the header. */
export function isPublicSuffix(name: string): boolean {
  return parse(name, { allowPrivateDomains: true }).domain === null;
}

/** See the header. */
export function domainName(raw: string): NameResult {
  const text = raw.trim().replace(/\.$/, "");
  let name: string;
  try {
    name = toAsciiDomain("name", text);
  } catch {
    return { ok: false, why: "must be a domain name such as example.com" };
  }
  if (isPublicSuffix(name))
    return { ok: false, why: `${name} is a public suffix (Public Suffix List): register a name under it` };
  return { ok: true, name };
}

/** See the header. */
export function lineage(name: string): string[] {
  const labels = name.split(".");
  const out: string[] = [];
  for (let i = 0; i < labels.length - 1; i++) {
    const n = labels.slice(i).join(".");
    if (isPublicSuffix(n)) break;
    out.push(n);
  }
  return out;
}

/** See the header. */
export function claimProblem(name: string, tenant: string, verified: ReadonlyMap<string, string>): string | null {
  for (const n of lineage(name)) {
    const owner = verified.get(n);
    if (owner === undefined) continue;
    if (owner === tenant) return null;
    return n === name
      ? `The domain ${name} is verified by another account.`
      : `The domain ${name} is under ${n}, which another account verified.`;
  }
  return null;
}
