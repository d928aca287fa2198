/**
 * Reading an Authentication-Results header field (RFC 8601) or an ARC-Authentication-Results
 * one (RFC 8617 §4.1.1): who checked the message, and what SPF and DKIM said.
 *
 * DESCRIPTION
 *   parseAuthResults(value)  { instance, authservId, results }: `instance` the ARC `i=` (null for a
 *       plain Authentication-Results), `authservId` lower-cased, and one result per method
 *       ("dkim=pass header.d=example.com"): method and result lower-cased, props by
 *       "ptype.property" (lower-cased name, value as written, quotes removed). Comments, which
 *       may hold ";" and "=", are removed first; null when the value has no authserv-id.
 *   passedIdentities(parsed)  the domains the checker vouches for: `header.d` (else the domain
 *       of `header.i`) of every dkim=pass, and the domain of `smtp.mailfrom` and `smtp.helo` of
 *       every spf=pass, lower-cased, as { dkim, spf }.
 *
 * INVARIANTS
 *   Pure. Whether a header is to be believed is the caller's question (its authserv-id and its
 *   place in the message); this module only reads it.
 */

/** One method's result. */
export interface AuthResult {
  method: string;
  result: string;
  props: Record<string, string>;
}

/** A parsed Authentication-Results value. */
export interface AuthResults {
  instance: number | null;
  authservId: string;
  results: AuthResult[];
}

/** The value without its (possibly nested) comments; quoted strings are kept as they are. */
function withoutComments(value: string): string {
  let out = "";
  let depth = 0;
  let quoted = false;
  for (let i = 0; i < value.length; i++) {
    const ch = value[i]!;
    if (ch === "\\" && (quoted || depth > 0)) {
      if (depth === 0) out += ch + (value[i + 1] ?? "");
      i++;
      continue;
    }
    if (depth === 0 && ch === '"') quoted = !quoted;
    if (!quoted && ch === "(") {
      depth++;
      continue;
    }
    if (!quoted && ch === ")" && depth > 0) {
      depth--;
      out += depth === 0 ? " " : "";
      continue;
    }
    if (depth === 0) out += ch;
  }
  return out;
}

/** Splits at `sep` outside quoted strings. */
function splitOutsideQuotes(text: string, sep: RegExp): string[] {
  const out: string[] = [];
  let cur = "";
  let quoted = false;
  for (const ch of text) {
    if (ch === '"') quoted = !quoted;
    if (!quoted && sep.test(ch)) {
      out.push(cur);
      cur = "";
      continue;
    }
    cur += ch;
  }
  out.push(cur);
  return out;
}

const unquote = (v: string) =>
  v.length >= 2 && v.startsWith('"') && v.endsWith('"') ? v.slice(1, -1).replace(/\\(.)/g, "$1") : v;

/** See the header. */
export function parseAuthResults(value: string): AuthResults | null {
  const parts = splitOutsideQuotes(withoutComments(value.replace(/\r?\n/g, " ")), /;/).map((p) => p.trim());
  let instance: number | null = null;
  const inst = /^i\s*=\s*(\d+)$/i.exec(parts[0] ?? "");
  if (inst) {
    instance = Number(inst[1]);
    parts.shift();
  }
  const authservId = (parts.shift() ?? "").split(/\s+/)[0]?.toLowerCase() ?? "";
  if (authservId === "" || authservId.includes("=")) return null;
  const results: AuthResult[] = [];
  for (const part of parts) {
    const tokens = splitOutsideQuotes(part, /\s/).filter((t) => t !== "");
    const head = /^([a-z0-9_-]+)(?:\/[0-9]+)?\s*=\s*([a-z0-9_-]+)$/i.exec(tokens[0] ?? "");
    if (!head) continue;
    const props: Record<string, string> = {};
    for (const t of tokens.slice(1)) {
      const eq = t.indexOf("=");
      if (eq > 0) props[t.slice(0, eq).toLowerCase()] = unquote(t.slice(eq + 1));
    }
    results.push({ method: head[1]!.toLowerCase(), result: head[2]!.toLowerCase(), props });
  }
  return { instance, authservId, results };
}

/** The domain of an address or a bare domain, lower-cased, without a trailing dot or brackets. */
function domainOf(value: string | undefined): string | null {
  if (!value) return null;
  const v = value.trim().replace(/^<|>$/g, "");
  const d = (v.includes("@") ? v.slice(v.lastIndexOf("@") + 1) : v).toLowerCase().replace(/\.$/, "");
  return /^[a-z0-9.-]+\.[a-z0-9-]+$/.test(d) ? d : null;
}

/** See the header. */
export function passedIdentities(parsed: AuthResults): { dkim: string[]; spf: string[] } {
  const dkim = new Set<string>();
  const spf = new Set<string>();
  for (const r of parsed.results) {
    if (r.result !== "pass") continue;
    if (r.method === "dkim") {
      const d = domainOf(r.props["header.d"]) ?? domainOf(r.props["header.i"]);
      if (d) dkim.add(d);
    } else if (r.method === "spf") {
      for (const p of ["smtp.mailfrom", "smtp.helo"]) {
        const d = domainOf(r.props[p]);
        if (d) spf.add(d);
      }
    }
  }
  return { dkim: [...dkim], spf: [...spf] };
}
