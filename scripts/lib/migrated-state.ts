/**
 * A fresh local state directory with the D1 migrations applied, for every local server the tests,
 * benchmarks and campaigns start: `wrangler d1 migrations apply --local` runs once per schema and
 * the migrated state is copied from then on.
 *
 * DESCRIPTION
 *   schemaKey(root)   the template's key: a hash of what decides its content (INVARIANTS).
 *   migratedState(dest, root?)  makes `dest` (created when missing) hold a local D1 with every
 *       migration of `root` (default: the current directory) applied. The first call for a given
 *       schema applies them with wrangler into a template under the system's temp directory; every
 *       later call, in this process or another, copies that template. Returns `dest`.
 *
 * INVARIANTS
 *   The template is keyed by a hash of what decides its content: every file of `migrations/`
 *   (name and bytes), wrangler.toml (the database's id names its file) and wrangler's version. A
 *   changed migration makes a new template; a stale one is never used.
 *   A template is complete or absent: it is built in a directory of its own and renamed into place
 *   when wrangler has finished (two processes racing both build, one rename wins, both copy a
 *   whole template).
 *   Applying migrations one by one costs wrangler about 18 s here (32 files); a copy costs
 *   milliseconds. What the copy holds is exactly what wrangler wrote.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { cp, mkdir, mkdtemp, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { WRANGLER_ENV } from "./keys";

const run = promisify(execFile);

/** The hash of the migrations, wrangler.toml and wrangler's version under `root`. */
export async function schemaKey(root: string): Promise<string> {
  const h = createHash("sha256");
  const dir = join(root, "migrations");
  for (const name of (await readdir(dir)).sort()) {
    h.update(`${name}\0`);
    h.update(await readFile(join(dir, name)));
  }
  h.update(await readFile(join(root, "wrangler.toml")));
  const wrangler = JSON.parse(await readFile(join(root, "node_modules/wrangler/package.json"), "utf8")) as {
    version: string;
  };
  h.update(wrangler.version);
  return h.digest("hex").slice(0, 16);
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** Builds the template at `template` unless it is there (see INVARIANTS). */
async function ensureTemplate(root: string, template: string): Promise<void> {
  if (await exists(template)) return;
  const building = await mkdtemp(`${template}.building-`);
  try {
    await run("npx", ["wrangler", "d1", "migrations", "apply", "DB", "--local", "--persist-to", building], {
      cwd: root,
      env: WRANGLER_ENV,
      maxBuffer: 16 << 20,
    });
    await rename(building, template).catch(async (e: unknown) => {
      // Another process put its template in place first: theirs is as good.
      if (!(await exists(template))) throw e;
    });
  } finally {
    await rm(building, { recursive: true, force: true });
  }
}

/** A local state at `dest` with the migrations applied (see the header). */
export async function migratedState(dest: string, root = process.cwd()): Promise<string> {
  const base = resolve(root);
  const template = join(tmpdir(), `cohort-migrated-${process.getuid?.() ?? 0}-${await schemaKey(base)}`);
  await ensureTemplate(base, template);
  await mkdir(dest, { recursive: true });
  await cp(template, dest, { recursive: true });
  return dest;
}
