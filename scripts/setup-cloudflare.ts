/**
 * npm run setup:cloudflare [-- --dry-run] [--remote]
 *
 * Creates, idempotently and through wrangler, what the production environment of wrangler.toml
 * needs on your Cloudflare account (scripts/lib/setup-plan.ts): the D1 database (its id written
 * into wrangler.toml) and its migrations, the R2 bucket, the queues and their dead-letter queues,
 * and the WEBHOOK_SECRETS_KEY secret (generated when absent). With --remote it also creates the
 * first operator API key in the deployed database and prints it once. Then: npm run deploy.
 *
 * --dry-run prints every wrangler command it would run on an account that has nothing yet, and
 * runs none (no login needed). Secrets are never printed or put on a command line.
 */
import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { parseArgs, promisify } from "node:util";
import { generateApiKey } from "../worker/db/api-keys";
import { WRANGLER_ENV, storeKey } from "./lib/keys";
import { parseD1Id, planSetup, setDatabaseId, type Seen, type Step } from "./lib/setup-plan";
import { commandLine } from "./lib/command-line";

const run = promisify(execFile);
const { values } = commandLine(import.meta.url, () =>
  parseArgs({
    options: { "dry-run": { type: "boolean", default: false }, remote: { type: "boolean", default: false } },
  }),
);
const TOML = new URL("../wrangler.toml", import.meta.url);

async function wrangler(args: string[], stdin?: string): Promise<string> {
  if (stdin === undefined) {
    const { stdout } = await run("npx", ["wrangler", ...args], { env: WRANGLER_ENV, maxBuffer: 16 << 20 });
    return stdout;
  }
  return new Promise((resolve, reject) => {
    const child = spawn("npx", ["wrangler", ...args], { env: WRANGLER_ENV, stdio: ["pipe", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve(out) : reject(new Error(`wrangler ${args.slice(0, 3).join(" ")} exited ${code}`)),
    );
    child.stdin.end(stdin);
  });
}

/** What the account has now; a listing that fails (e.g. the worker is not deployed yet) counts as empty. */
async function observe(): Promise<Seen> {
  const safe = async (args: string[]) => wrangler(args).catch(() => "");
  const [d1, buckets, queues, secrets] = await Promise.all([
    safe(["d1", "list", "--json"]),
    safe(["r2", "bucket", "list"]),
    safe(["queues", "list"]),
    safe(["secret", "list", "--env", "production"]),
  ]);
  const names = (text: string, re: RegExp) => [...text.matchAll(re)].map((m) => m[1]!);
  let d1Names: string[] = [];
  try {
    d1Names = (JSON.parse(d1) as { name: string }[]).map((d) => d.name);
  } catch {
    d1Names = [];
  }
  let secretNames: string[] = [];
  try {
    secretNames = (JSON.parse(secrets) as { name: string }[]).map((s) => s.name);
  } catch {
    secretNames = [];
  }
  return {
    d1: d1Names,
    buckets: names(buckets, /^name:\s*(\S+)/gm),
    queues: names(queues, /│\s*[0-9a-f]{32}\s*│\s*([a-z0-9-]+)\s*│/gm).concat(names(queues, /^\s*([a-z0-9-]+)\s*$/gm)),
    secrets: secretNames,
  };
}

function show(step: Step): string {
  const stdin = step.stdin === "generated-secret" ? "   (value: 32 random bytes, base64, on stdin)" : "";
  return `npx wrangler ${step.args.join(" ")}${stdin}    # ${step.why}`;
}

async function main(): Promise<void> {
  const dry = values["dry-run"] ?? false;
  const seen: Seen = dry ? { d1: [], buckets: [], queues: [], secrets: [] } : await observe();
  const steps = planSetup(seen, { operatorKey: values.remote ?? false });
  if (dry) {
    console.log(
      "setup:cloudflare --dry-run: on an account that has nothing yet, these would run (existing resources are skipped):",
    );
    for (const s of steps) console.log(show(s));
    console.log("then: npm run deploy");
    return;
  }
  for (const step of steps) {
    console.error(`$ ${show(step)}`);
    if (step.args[0] === "d1" && step.args[1] === "execute") {
      const key = generateApiKey();
      await storeKey(key, {
        tenant: "operator",
        name: "first operator key",
        remote: true,
        env: "production",
        role: "operator",
      });
      console.error("The first operator API key (shown once; only its hash is stored):");
      console.log(key);
      continue;
    }
    const out = await wrangler(
      step.args,
      step.stdin === "generated-secret" ? randomBytes(32).toString("base64") : undefined,
    );
    if (step.writesDatabaseId) {
      const id = parseD1Id(out);
      if (id === null) throw new Error(`could not read the database id from wrangler's output:\n${out}`);
      writeFileSync(TOML, setDatabaseId(readFileSync(TOML, "utf8"), id));
      console.error(`wrote database_id ${id} into wrangler.toml [env.production]`);
    }
  }
  console.error("Done. Deploy with: npm run deploy");
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : String(e));
  process.exit(1);
});
