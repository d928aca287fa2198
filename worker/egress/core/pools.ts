/*
 * NAME
 *   pools - egress pools: which egresses a message may leave by, chosen per tenant, sending
 *           domain or provider
 *
 * DESCRIPTION
 *   EGRESS_POOLS is JSON: { "pools": { "<name>": [egress, …] }, "rules": [{ "tenant" | "domain" |
 *   "provider": "<value>", "pool": "<name>" }, …], "default": "<name>" }. An egress is
 *     "socks5://host:port"   a SOCKS5 bridge (credentials: the EGRESS_USERNAME / EGRESS_PASSWORD
 *                            secrets), id "host:port" as EGRESS names it;
 *     "smtp://[host]:port"   a smarthost the mail is relayed to (the relay kind's TLS and AUTH
 *                            settings), id "smtp:[host]:port";
 *     "cf-email"             Cloudflare Email Service (the EMAIL binding), id "cf-email";
 *     "direct"               the Worker's own connections, id "direct".
 *   parseEgressPools(text)   the config, or its problems ("" is no pools).
 *   poolFor(cfg, who)        the pool of a message: the first rule naming its tenant, sending
 *                            domain (the envelope sender's) or recipient provider (a provider
 *                            rule's name), else the default, else null (the deployment's EGRESS).
 *
 * INVARIANTS
 *   Pure. Every pool a rule or the default names exists and has at least one egress; ids are
 *   unique within a pool.
 *
 * ERRORS
 *   None thrown: problems are returned.
 */

export type Egress =
  | { id: string; kind: "socks5"; host: string; port: number }
  | { id: string; kind: "smtp"; host: string; port: number }
  | { id: "cf-email"; kind: "cf-email" }
  | { id: "direct"; kind: "direct" };

export interface EgressPools {
  pools: Map<string, Egress[]>;
  rules: { field: "tenant" | "domain" | "provider"; value: string; pool: string }[];
  default: string | null;
}

/** One egress from its text, or null. */
export function parseEgress(text: string): Egress | null {
  const t = text.trim();
  if (t === "direct") return { id: "direct", kind: "direct" };
  if (t === "cf-email") return { id: "cf-email", kind: "cf-email" };
  const m = /^(socks5|smtp):\/\/(?:\[([^\]]+)\]|([^\s:/[\]]+)):(\d{1,5})\/?$/.exec(t);
  const port = m ? Number(m[4]) : 0;
  if (!m || !(port > 0 && port < 65536)) return null;
  const host = (m[2] ?? m[3])!;
  return m[1] === "socks5"
    ? { id: `${host}:${port}`, kind: "socks5", host, port }
    : { id: `smtp:[${host}]:${port}`, kind: "smtp", host, port };
}

/** See the header. */
export function parseEgressPools(
  text: string,
): { ok: true; pools: EgressPools | null } | { ok: false; errors: string[] } {
  if (text.trim() === "") return { ok: true, pools: null };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { ok: false, errors: ["EGRESS_POOLS is not JSON"] };
  }
  const r = raw as { pools?: unknown; rules?: unknown; default?: unknown } | null;
  const errors: string[] = [];
  const pools = new Map<string, Egress[]>();
  if (r === null || typeof r !== "object" || typeof r.pools !== "object" || r.pools === null || Array.isArray(r.pools))
    return { ok: false, errors: ['EGRESS_POOLS needs {"pools": {name: [egress, …]}}'] };
  for (const [name, list] of Object.entries(r.pools as Record<string, unknown>)) {
    if (!Array.isArray(list) || list.length === 0) {
      errors.push(`pools.${name}: a non-empty list of egresses`);
      continue;
    }
    const members = list.map((e) => (typeof e === "string" ? parseEgress(e) : null));
    members.forEach((m, i) => {
      if (!m) errors.push(`pools.${name}[${i}]: "socks5://host:port", "smtp://[host]:port", "cf-email" or "direct"`);
    });
    const ok = members.filter((m): m is Egress => m !== null);
    if (new Set(ok.map((m) => m.id)).size !== ok.length) errors.push(`pools.${name}: an egress appears twice`);
    pools.set(name, ok);
  }
  const rules: EgressPools["rules"] = [];
  for (const [i, rule] of (Array.isArray(r.rules) ? r.rules : r.rules === undefined ? [] : [null]).entries()) {
    const x = rule as Record<string, unknown> | null;
    const field = x && (["tenant", "domain", "provider"] as const).find((f) => typeof x[f] === "string");
    if (!x || !field || typeof x.pool !== "string") {
      errors.push(`rules[${i}]: {"tenant"|"domain"|"provider": "…", "pool": "…"}`);
      continue;
    }
    if (!pools.has(x.pool)) errors.push(`rules[${i}]: no pool ${JSON.stringify(x.pool)}`);
    rules.push({ field, value: String(x[field]).toLowerCase(), pool: x.pool });
  }
  const def = typeof r.default === "string" ? r.default : null;
  if (def !== null && !pools.has(def)) errors.push(`default: no pool ${JSON.stringify(def)}`);
  return errors.length > 0 ? { ok: false, errors } : { ok: true, pools: { pools, rules, default: def } };
}

/** See the header. */
export function poolFor(
  cfg: EgressPools,
  who: { tenant?: string | null; domain?: string | null; provider?: string | null },
): { name: string; members: Egress[] } | null {
  const of = {
    tenant: who.tenant?.toLowerCase(),
    domain: who.domain?.toLowerCase(),
    provider: who.provider?.toLowerCase(),
  };
  const rule = cfg.rules.find((r) => of[r.field] === r.value);
  const name = rule?.pool ?? cfg.default;
  return name === null ? null : { name, members: cfg.pools.get(name)! };
}
