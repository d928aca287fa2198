/**
 * The floor as a side of bench:mix (--floor): bench/floor/worker.ts under its own private
 * `wrangler dev`, on the same runtime and flags as the relay, routed to the world's sink as
 * Postfix is (each domain's address, no DNS).
 *
 * DESCRIPTION
 *   startFloorSide(world, o)  writes a wrangler.toml (the floor's entry, ROUTES and PORT vars, one
 *       SQLite-backed class; RUNGS from o.rungs, bench/floor/worker.ts) in a temp directory, bundles the floor once and serves that bundle
 *       (as the relay's frozen server), and starts it as the relay's server is started
 *       (scripts/lib/dev-server.ts startWrangler: free loopback ports, again on new ones when
 *       one was taken, GET /health, the inspector's Network capture off). send() makes the relay side's requests (the same bodies, paths and
 *       a 429's retry), with no key. cpu() reads wrangler's process group, as the relay's.
 *
 * ERRORS
 *   Rejects when wrangler exits early or /health does not answer in 60 s (after stopping it).
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startWrangler } from "../../scripts/lib/dev-server";
import { WRANGLER_ENV } from "../../scripts/lib/keys";
import { apiSender, type MixSide } from "./sides";
import { byGroup, cpuSample } from "./cpu";
import type { World } from "./world";

const run = promisify(execFile);
const ENTRY = fileURLToPath(new URL("../floor/worker.ts", import.meta.url));

/** The floor's wrangler.toml (the relay's compatibility date and flags, the routes as a var), serving its bundle. */
async function floorToml(dir: string, world: World, sinkPort: number, rungs: string): Promise<string> {
  const relay = await readFile(fileURLToPath(new URL("../../wrangler.toml", import.meta.url)), "utf8");
  const date = /^compatibility_date = .*$/m.exec(relay)?.[0] ?? "";
  const flags = /^compatibility_flags = .*$/m.exec(relay)?.[0] ?? "";
  const routes = Object.fromEntries(world.domains.map((d) => [d.name, d.address]));
  const toml = [
    `name = "cohort-floor"`,
    `main = ${JSON.stringify(ENTRY)}`,
    date,
    flags,
    "send_metrics = false",
    "keep_names = false",
    "[vars]",
    `ROUTES = ${JSON.stringify(JSON.stringify(routes))}`,
    `PORT = "${sinkPort}"`,
    `RUNGS = ${JSON.stringify(rungs)}`,
    "[[durable_objects.bindings]]",
    `name = "FLOOR"`,
    `class_name = "Floor"`,
    "[[durable_objects.bindings]]",
    `name = "HOP"`,
    `class_name = "Hop"`,
    "[[d1_databases]]",
    `binding = "DB"`,
    `database_name = "floor"`,
    `database_id = "floor"`,
    "[[migrations]]",
    `tag = "v1"`,
    `new_sqlite_classes = ["Floor", "Hop"]`,
  ].join("\n");
  const path = join(dir, "wrangler.toml");
  await writeFile(path, `${toml}\n`);
  // Bundled once and served unbundled, as the relay's server is (dev-server.ts frozenBundle), so
  // that no watcher's rebuild runs during the measurement.
  const bundle = join(dir, "bundle");
  await run("npx", ["wrangler", "deploy", "--dry-run", "-c", path, "--outdir", bundle], {
    env: WRANGLER_ENV,
    maxBuffer: 16 << 20,
  });
  const frozen = join(bundle, "wrangler.toml");
  await writeFile(frozen, `${toml.replace(/^main = .*$/m, 'main = "worker.js"\nno_bundle = true')}\n`);
  return frozen;
}

/** The floor under wrangler dev (see the header). */
export async function startFloorSide(
  world: World,
  o: { sinkPort: number; rungs?: string },
): Promise<MixSide & { pid: number }> {
  const dir = await mkdtemp(join(tmpdir(), "cohort-floor-"));
  const w = await floorToml(dir, world, o.sinkPort, o.rungs ?? "")
    .then((toml) => startWrangler({ persistTo: join(dir, "state"), script: ["-c", toml] }))
    .catch(async (e: unknown) => {
      await rm(dir, { recursive: true, force: true });
      throw e;
    });
  const { url, pid } = w;
  const stop = async () => {
    await w.stop();
    await rm(dir, { recursive: true, force: true });
  };
  return {
    name: "floor",
    pid,
    ...apiSender("floor", url, {}),
    cpu: () => cpuSample(byGroup(pid)),
    stop,
  };
}
