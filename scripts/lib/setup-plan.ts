/**
 * What `npm run setup:cloudflare` must create, from what the account already has (pure).
 *
 * DESCRIPTION
 *   RESOURCES            the names the production environment of wrangler.toml binds: the D1
 *                        database, the R2 bucket, the queues (email-events among them) and a dead-letter queue for each.
 *   planSetup(seen, opts)  the wrangler commands to run, in order, each with why: a create for
 *                        every resource not in `seen`, the D1 migrations (always: applying them is
 *                        idempotent), WEBHOOK_SECRETS_KEY when the worker has no such secret (its
 *                        value generated and given on stdin, never on the command line), and with
 *                        opts.operatorKey the first operator API key (inserted hashed).
 *   parseD1Id(output)    the database id in `wrangler d1 create` output (TOML or JSON), or null.
 *   setDatabaseId(toml, id)  wrangler.toml with the production database id written in.
 *
 * INVARIANTS
 *   Run again on an account that has everything, the plan creates nothing.
 */

export const RESOURCES = {
  d1: "cohort",
  bucket: "cohort-bodies",
  // email-events: Cloudflare Email Service's sending events; each sending domain's event
  // subscription is pointed at it in the dashboard (docs/deliverability.md).
  queues: ["classify", "classify-bulk", "deliver", "webhooks", "webhooks-slow", "email-events"],
  deadLetterQueues: [
    "classify-dlq",
    "classify-bulk-dlq",
    "deliver-dlq",
    "webhooks-dlq",
    "webhooks-slow-dlq",
    "email-events-dlq",
  ],
  secrets: ["WEBHOOK_SECRETS_KEY"],
} as const;

/** What the account has (names). */
export interface Seen {
  d1: string[];
  buckets: string[];
  queues: string[];
  secrets: string[];
}

/** One wrangler invocation. */
export interface Step {
  args: string[];
  why: string;
  /** What goes on stdin: a generated secret (never printed). */
  stdin?: "generated-secret";
  /** A D1 create whose id must be written into wrangler.toml. */
  writesDatabaseId?: boolean;
}

const ENV = ["--env", "production"];

/** The commands to run (see header). */
export function planSetup(seen: Seen, opts: { operatorKey: boolean }): Step[] {
  const steps: Step[] = [];
  if (!seen.d1.includes(RESOURCES.d1))
    steps.push({
      args: ["d1", "create", RESOURCES.d1],
      why: "the D1 database (index, routes, keys)",
      writesDatabaseId: true,
    });
  steps.push({ args: ["d1", "migrations", "apply", "DB", "--remote", ...ENV], why: "the D1 schema (idempotent)" });
  if (!seen.buckets.includes(RESOURCES.bucket))
    steps.push({
      args: ["r2", "bucket", "create", RESOURCES.bucket],
      why: "the R2 bucket for message bodies over INLINE_BODY_BYTES",
    });
  for (const q of [...RESOURCES.queues, ...RESOURCES.deadLetterQueues]) {
    if (!seen.queues.includes(q))
      steps.push({ args: ["queues", "create", q], why: q.endsWith("-dlq") ? "a dead-letter queue" : "a queue" });
  }
  for (const s of RESOURCES.secrets) {
    if (!seen.secrets.includes(s))
      steps.push({
        args: ["secret", "put", s, ...ENV],
        why: "seals webhook signing secrets at rest (32 random bytes)",
        stdin: "generated-secret",
      });
  }
  if (opts.operatorKey)
    steps.push({
      args: ["d1", "execute", "DB", "--remote", ...ENV, "--command", "<INSERT of the new operator key's SHA-256>"],
      why: "the first operator API key (shown once)",
    });
  return steps;
}

/** The database id `wrangler d1 create` printed, or null. */
export function parseD1Id(output: string): string | null {
  const m = /"?(?:database_id|uuid)"?\s*[=:]\s*"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"/i.exec(
    output,
  );
  return m ? m[1]!.toLowerCase() : null;
}

/** wrangler.toml with the production database id set (the line after "Written by `npm run setup:cloudflare`."). */
export function setDatabaseId(toml: string, id: string): string {
  const re = /(\[\[env\.production\.d1_databases\]\][\s\S]*?database_id = ")[0-9a-f-]{36}(")/;
  if (!re.test(toml)) throw new Error("wrangler.toml has no [[env.production.d1_databases]] database_id to set");
  return toml.replace(re, `$1${id}$2`);
}
