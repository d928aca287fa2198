/**
 * Rewriting and resolution of one recipient (pure; qmail-send's rewrite + Postfix's transport map).
 *
 * DESCRIPTION
 *   rewriteAddress(address)      lower-cases the domain and converts an IDN domain to punycode
 *                                (A-labels); the local part is kept as given (RFC 5321 §2.4); an
 *                                address literal (mail/address.ts normalised it) is kept.
 *   resolveRecipient(address, tenant, routing, defaults)
 *                                → { transport, nexthop }. The most specific matching route wins:
 *                                an exact domain, then the longest `*.suffix` (subdomains only),
 *                                then `*`; a tenant's own route beats a global one of the same
 *                                specificity. The nexthop is the route's, else the transport's
 *                                fixed one, else the recipient domain (an address literal as
 *                                net/core/mx.ts literalNexthop, for the mx kind, never the relay
 *                                kind's "[host]"). With no route: the default transport
 *                                (DEFAULT_TRANSPORT, "smtp") to SMARTHOST or the domain.
 *   defaultTransportOf(env)      that default transport's name.
 *
 * ERRORS
 *   MailInputError from rewriteAddress for an address whose domain is not a valid DNS name.
 */
import { toAsciiDomain } from "../mail";
import { literalNexthop } from "../net/core/mx";
import type { RouteRow, Routing } from "../db/routing";

/** The default route when no route matches. */
export interface RouteDefaults {
  transport: string;
  /** A fixed relay for every unrouted recipient, or "" for direct delivery to the domain. */
  smarthost: string;
}

/** A recipient's resolution. */
export interface Resolution {
  transport: string;
  nexthop: string;
}

/** Lower-cases the domain (IDN → punycode); the local part is left alone. */
export function rewriteAddress(address: string): string {
  const at = address.lastIndexOf("@");
  if (at < 0 || address.slice(at + 1).startsWith("[")) return address;
  return `${address.slice(0, at)}@${toAsciiDomain("rcpt", address.slice(at + 1))}`;
}

/** How specifically `pattern` matches `domain`: -1 no match, higher is more specific. */
function specificity(pattern: string, domain: string): number {
  const p = pattern.toLowerCase();
  if (p === "*") return 0;
  if (p.startsWith("*.")) return domain.endsWith(p.slice(1)) ? p.length : -1;
  return p === domain ? 10_000 + p.length : -1;
}

function bestRoute(routes: RouteRow[], tenant: string, domain: string): RouteRow | null {
  let best: RouteRow | null = null;
  let bestScore = -1;
  for (const r of routes) {
    if (r.tenant_id !== null && r.tenant_id !== tenant) continue;
    const s = specificity(r.pattern, domain);
    if (s < 0) continue;
    const score = s * 2 + (r.tenant_id === null ? 0 : 1);
    if (score > bestScore) [best, bestScore] = [r, score];
  }
  return best;
}

/** Resolves an (already rewritten) address to its transport and nexthop. */
export function resolveRecipient(
  address: string,
  tenant: string,
  routing: Routing,
  defaults: RouteDefaults,
): Resolution {
  const domain = address.slice(address.lastIndexOf("@") + 1);
  const route = bestRoute(routing.routes, tenant, domain);
  if (route) {
    return {
      transport: route.transport,
      nexthop: route.nexthop ?? routing.transports.get(route.transport) ?? literalNexthop(domain),
    };
  }
  const fixed = routing.transports.get(defaults.transport) ?? null;
  return { transport: defaults.transport, nexthop: defaults.smarthost || fixed || literalNexthop(domain) };
}
