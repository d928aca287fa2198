/**
 * `npm start`'s first step: applies the D1 migrations to the local state (.wrangler/state) and
 * prints one line, the migrations it applied or that none were due, instead of wrangler's table
 * redrawn after each one. On failure it prints wrangler's whole output and exits with its status.
 */
import { spawnSync } from "node:child_process";

const out = spawnSync(
  "npx",
  ["wrangler", "d1", "migrations", "apply", "DB", "--local", "--persist-to", ".wrangler/state"],
  {
    encoding: "utf8",
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false", CI: "true" },
  },
);
const text = `${out.stdout ?? ""}${out.stderr ?? ""}`;
if (out.status !== 0) {
  process.stderr.write(text);
  process.exit(out.status ?? 1);
}
// wrangler lists each migration it applied with a ✅ in its last table.
const applied = [...new Set([...text.matchAll(/│\s*(\d{4}_[\w-]+\.sql)\s*│\s*✅/g)].map((m) => m[1]!))];
console.log(
  applied.length > 0
    ? `  D1 migrations applied: ${applied.length} (${applied[0]} … ${applied[applied.length - 1]})`
    : "  D1 migrations: up to date",
);
