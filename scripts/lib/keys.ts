/**
 * Creating API keys in a D1 database through wrangler (used by key:create, dev-key, the e2e,
 * browser and chaos servers and the benchmarks).
 *
 * DESCRIPTION
 *   storeKey({ key, tenant, name, persistTo, remote, role })  inserts the tenant (if new) and the
 *                                key's SHA-256 (with role "operator" when asked) with
 *                                `wrangler d1 execute DB`; the key itself never reaches
 *                                wrangler, a file or a log.
 *   keySql(key, { tenant, name, role })  that SQL, for a caller that runs it with more.
 *   createKey(opts)              a new random key, stored as above; returns it.
 *   createKeys([opts, …])        several, stored with one wrangler call; returns them in order.
 *
 * ERRORS
 *   Throws with wrangler's output when the command fails (e.g. migrations not applied).
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { generateApiKey, hashApiKey, insertKeySql } from "../../worker/db/api-keys";
import { keyRoleSql, type KeyRole } from "../../worker/db/admin";

const run = promisify(execFile);

/** Where and for whom to store a key. */
export interface KeyOptions {
  tenant: string;
  name?: string;
  /** Local state directory (wrangler --persist-to); default $COHORT_STATE_DIR or .wrangler/state. */
  persistTo?: string;
  /** Write to the deployed database instead of the local one. */
  remote?: boolean;
  /** "operator" keys may also use the admin API (/relay/queue, …); default "tenant". */
  role?: KeyRole;
  /** A wrangler environment (e.g. "production") for the database binding. */
  env?: string;
}

/** The environment wrangler runs with: no telemetry, no cf.json fetch. */
export const WRANGLER_ENV = {
  ...process.env,
  WRANGLER_SEND_METRICS: "false",
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  NO_COLOR: "1",
};

/** The SQL that stores `key` (its SHA-256 only) for the tenant, with its role. */
export async function keySql(key: string, opts: Pick<KeyOptions, "tenant" | "name" | "role">): Promise<string> {
  const hash = await hashApiKey(key);
  return (
    insertKeySql(opts.tenant, hash, opts.name ?? "", Date.now()) +
    (opts.role === "operator" ? ` ${keyRoleSql(hash, "operator")}` : "")
  );
}

/** Stores every key (hashed) with one `wrangler d1 execute`, where the first one's options say. */
async function storeAll(entries: { key: string; opts: KeyOptions }[]): Promise<void> {
  const opts = entries[0]!.opts;
  const sql = (await Promise.all(entries.map((e) => keySql(e.key, e.opts)))).join(" ");
  const where = [
    ...(opts.remote
      ? ["--remote"]
      : ["--local", "--persist-to", opts.persistTo ?? process.env.COHORT_STATE_DIR ?? ".wrangler/state"]),
    ...(opts.env ? ["--env", opts.env] : []),
  ];
  try {
    await run("npx", ["wrangler", "d1", "execute", "DB", ...where, "--command", sql], {
      env: WRANGLER_ENV,
      maxBuffer: 16 << 20,
    });
  } catch (e) {
    const out = e as { stdout?: string; stderr?: string };
    throw new Error(
      `wrangler d1 execute failed (are the migrations applied? npm run db:migrate:local)\n${out.stdout ?? ""}${out.stderr ?? ""}`,
    );
  }
}

/** Stores `key` (hashed) for the tenant. */
export async function storeKey(key: string, opts: KeyOptions): Promise<void> {
  await storeAll([{ key, opts }]);
}

/**
 * Creates and stores new keys, one per entry, with a single wrangler call (each call costs about
 * 3 s); every entry must name the same database (the first one's persistTo, remote and env are
 * used). Returns the keys in order.
 */
export async function createKeys<T extends KeyOptions[]>(list: [...T]): Promise<{ [K in keyof T]: string }> {
  const entries = list.map((opts) => ({ key: generateApiKey(), opts }));
  if (entries.length > 0) await storeAll(entries);
  return entries.map((e) => e.key) as { [K in keyof T]: string };
}

/** Creates and stores a new key; returns it. */
export async function createKey(opts: KeyOptions): Promise<string> {
  const key = generateApiKey();
  await storeKey(key, opts);
  return key;
}
