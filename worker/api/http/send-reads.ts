/**
 * A send request's D1 reads in one call: its key, its recipients' suppressions and (in development)
 * its sender domains' owners, batched instead of read one after another as the request goes on.
 *
 * DESCRIPTION
 *   sendReads(c, keyHash, route)  for POST /emails and POST /emails/batch whose declared body
 *       (Content-Length) is at most PREFETCH_BODY_BYTES: reads the body (held for readBody, so
 *       the route reads the same bytes), and runs ONE D1 batch of
 *         - the key's look-up (db/sending-domains.ts keyAccessStatement, with its domains);
 *         - every unexpired suppression entry, of any scope, of the addresses the body's to, cc
 *           and bcc name, for the key's tenant or every tenant (db/routing.ts);
 *         - under COHORT_ENV development or test, the owners of the From domains and their
 *           parents (db/domains.ts verifiedOwners), which SenderPolicy asks for an unverified
 *           domain there.
 *       Returns the key (null: unknown or revoked) and the SendPrefetch the route hands on, or
 *       null for any other request, or when the batch failed (then the key is read alone, as
 *       before, and a failing suppression look-up leaves the message undecided, not refused).
 *   Why: each of those reads was a D1 round trip of its own, in sequence, on every send request;
 *   a batch is one. The reads answer the same questions at the same moment of the request as
 *   before (the suppressions are read per request, never cached), and a question the prefetch
 *   did not cover (an address the body named in another form, a topic's scopes, a domain not in
 *   the From fields) is read as before (classify/lookups.ts, domains/sender.ts).
 *
 * INVARIANTS
 *   A body is read before its key is checked only when it declares at most PREFETCH_BODY_BYTES:
 *   a request without a valid key never makes the worker read or parse more than that. What a
 *   request that fails here would answer (a bad key: 403; a body not JSON: 400 from the route)
 *   is unchanged, but for a body that declares a small length and then exceeds the request
 *   limit, refused with 413 before its key is checked.
 */
import type { Context } from "hono";
import type { AppEnv } from "./context";
import { holdBody, readBody, requestLimitBytes } from "./body";
import { keyAccessOf, keyAccessStatement, type KeyAccess, type KeyRow } from "../../db/sending-domains";
import { suppressionRowsStatement, type SuppressionRow } from "../../db/routing";
import type { SuppressionPrefetch } from "../../classify/lookups";
import { ownersOf, verifiedOwnersStatement, type OwnerRow } from "../../db/domains";
import { limitsOf } from "../../accept/limits";
import { lineage } from "../../domains/core/names";
import { settingsOf } from "../../settings/settings";

/** The largest declared body read before its key is checked, bytes. */
export const PREFETCH_BODY_BYTES = 64 * 1024;

/** At most this many addresses are looked up with the key; a larger request's are read as before. */
const MAX_ADDRESSES = 500;

/** What a send request read with its key (see the header): its suppression entries, and owners. */
export interface SendPrefetch extends SuppressionPrefetch {
  /** The names whose owners were read, and the owners (name → tenant) among them. */
  ownerNames: ReadonlySet<string>;
  owners: ReadonlyMap<string, string>;
}

/** The routes whose reads are batched with the key ("<METHOD> <path>", as auth.ts names them). */
const PREFETCHED = new Set(["POST /emails", "POST /emails/batch"]);

/** The bare address of a `Name <address>` or `address` field value, lower-cased. */
function bare(v: string): string {
  const m = /<([^<>]*)>\s*$/.exec(v);
  return (m ? m[1]! : v).trim().toLowerCase();
}

function strings(v: unknown): string[] {
  if (typeof v === "string") return [v];
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
}

/** The addresses and From domains the body names: an email's fields, or each of a batch's. */
function named(value: unknown): { addresses: string[]; domains: string[] } {
  const emails = (Array.isArray(value) ? value : [value]).filter(
    (e): e is Record<string, unknown> => e !== null && typeof e === "object",
  );
  const addresses = new Set<string>();
  const domains = new Set<string>();
  for (const e of emails) {
    for (const f of ["to", "cc", "bcc"]) for (const a of strings(e[f])) addresses.add(bare(a));
    const from = strings(e.from)[0];
    const sender = from === undefined ? "" : bare(from);
    const at = sender.lastIndexOf("@");
    if (at > 0) domains.add(sender.slice(at + 1));
  }
  return { addresses: addresses.size > MAX_ADDRESSES ? [] : [...addresses], domains: [...domains] };
}

function parsed(bytes: ArrayBuffer): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return null; // the route answers 400 for it, after the key
  }
}

/** See the header; `route` is the request's "<METHOD> <path>" (auth.ts). */
export async function sendReads(
  c: Context<AppEnv>,
  keyHash: string,
  route: string,
): Promise<{ access: KeyAccess | null; prefetch: SendPrefetch } | null> {
  if (!PREFETCHED.has(route)) return null;
  const declared = c.req.header("content-length");
  if (declared === undefined || !(Number(declared) <= PREFETCH_BODY_BYTES)) return null;
  const bytes = await readBody(c, requestLimitBytes(limitsOf(c.env)));
  holdBody(c, bytes);
  const { addresses, domains } = named(parsed(bytes));
  const names = settingsOf(c.env).local ? [...new Set(domains.flatMap((d) => lineage(d)))] : [];
  const nowMs = Date.now();
  const db = c.env.DB;
  let results: D1Result<unknown>[];
  try {
    results = await db.batch<unknown>([
      keyAccessStatement(db, keyHash, true),
      suppressionRowsStatement(db, keyHash, addresses, nowMs),
      ...(names.length > 0 ? [verifiedOwnersStatement(db, names)] : []),
    ]);
  } catch {
    return null; // read one after another instead: a look-up that fails then fails alone, as before
  }
  const [key, rows, owners] = results;
  const access = keyAccessOf((key?.results[0] as KeyRow | undefined) ?? null);
  return {
    access,
    prefetch: {
      tenant: access?.tenant ?? "",
      addresses: new Set(addresses),
      rows: (rows?.results ?? []) as SuppressionRow[],
      ownerNames: new Set(names),
      owners: ownersOf((owners?.results ?? []) as OwnerRow[]),
    },
  };
}
