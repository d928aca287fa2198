/**
 * The local runtime under test: `wrangler dev` on a persisted state directory that survives
 * `kill -9` and restarts, with campaign-specific `--var`s, routes to local sinks in D1, and
 * process-tree helpers (kill -9, RSS).
 *
 * DESCRIPTION
 *   createRuntime(opts)   a snapshot of the worker's sources (see snapshot()), fresh temp state,
 *                         migrations applied (migrated-state.ts), an API key, an operator key
 *                         and the routes/transports given inserted into D1 (one wrangler call);
 *                         nothing running yet. Returns a Runtime:
 *     start()             spawns wrangler dev (own process group, same HTTP port every time) and
 *                         waits for GET /health; then wakes the Outbox sweepers (/__scheduled).
 *                         A port taken meanwhile ("Address already in use") is tried again: a new
 *                         one before the first start (`url` follows), the same one after.
 *     kill9()             SIGKILL to every process of the tree (wrangler, esbuild, workerd),
 *                         each by pid, collected from /proc before the first signal.
 *     stop()              SIGTERM then SIGKILL; dispose() also removes the snapshot and state.
 *   stopAllRuntimes()     stops every runtime not disposed yet (Ctrl-C).
 *     rssKb()             the summed RSS of the tree (kB), from /proc.
 *     sql(query)          runs SQL on the local D1 (wrangler d1 execute --json), rows back.
 *
 * ENVIRONMENT
 *   CHAOS_LOG_LEVEL       wrangler's --log-level (default warn; debug shows the ProxyWorker's
 *                         answers and workerd's kj exceptions).
 *   CHAOS_LOG_FILE        a file every line wrangler and workerd print is appended to.
 *
 * ERRORS
 *   start() rejects when wrangler exits early or /health does not answer within 90 s; the tail
 *   of wrangler's log is included.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { appendFileSync } from "node:fs";
import { cp, mkdtemp, readdir, readFile, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { freePort, wranglerDevArgs } from "../../../scripts/lib/dev-server";
import { stopNetworkCapture } from "../../../scripts/lib/cdp";
import { keySql, WRANGLER_ENV } from "../../../scripts/lib/keys";
import { generateApiKey } from "../../../worker/db/api-keys";
import { migratedState } from "../../../scripts/lib/migrated-state";

const run = promisify(execFile);
const REPO = fileURLToPath(new URL("../../..", import.meta.url));
/** What the worker is built from (it imports nothing else but node_modules). */
const SNAPSHOT = [
  "worker",
  "durable-objects",
  "migrations",
  "wrangler.toml",
  "package.json",
  "tsconfig.json",
  "worker-configuration.d.ts",
];

/**
 * Copies the worker's sources to `dir`, node_modules linked: wrangler dev watches its sources
 * and reloads (dropping in-flight work) whenever a file changes, and other people edit this tree
 * while a campaign runs. The campaign tests the tree as it was when it started.
 */
async function snapshot(dir: string): Promise<void> {
  await Promise.all(SNAPSHOT.map((name) => cp(join(REPO, name), join(dir, name), { recursive: true })));
  await symlink(join(REPO, "node_modules"), join(dir, "node_modules"), "dir");
}

/** A route: a domain pattern to a fixed relay nexthop "[127.0.0.1]:port". */
export interface ChaosRoute {
  pattern: string;
  transport: string;
  nexthop: string;
}

/** Runtime options. */
export interface RuntimeOptions {
  tenant: string;
  /** wrangler --var values (strings). */
  vars: Record<string, string>;
  routes: ChaosRoute[];
}

/** A restartable wrangler dev. */
export interface Runtime {
  url: string;
  key: string;
  /** A key with the operator role (admin routes). */
  operatorKey: string;
  state: string;
  start(): Promise<void>;
  kill9(): Promise<number>;
  stop(): Promise<void>;
  dispose(): Promise<void>;
  rssKb(): Promise<number>;
  sql<T = Record<string, unknown>>(query: string): Promise<T[]>;
  running(): boolean;
  log(): string;
  /** Error lines wrangler/workerd printed (the last 400, across restarts). */
  errors(): string[];
}

/** Pids of `root` and all its descendants, read from /proc. */
export async function processTree(root: number): Promise<number[]> {
  const parents = new Map<number, number[]>();
  for (const name of await readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = await readFile(`/proc/${name}/stat`, "utf8");
      // Field 4 (ppid) follows the command in parentheses, which may contain spaces.
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const list = parents.get(ppid) ?? [];
      list.push(Number(name));
      parents.set(ppid, list);
    } catch {
      /* exited meanwhile */
    }
  }
  const out: number[] = [];
  const walk = (pid: number) => {
    out.push(pid);
    for (const c of parents.get(pid) ?? []) walk(c);
  };
  walk(root);
  return out;
}

async function rssOf(pid: number): Promise<number> {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

function sqlQuote(s: string): string {
  return `'${s.replace(/'/g, "''")}'`;
}

function routeSql(routes: ChaosRoute[]): string {
  const transports = [...new Set(routes.map((r) => r.transport))];
  return [
    ...transports.map((t) => `INSERT OR IGNORE INTO transports (name, nexthop) VALUES (${sqlQuote(t)}, NULL);`),
    ...routes.map(
      (r) =>
        `INSERT INTO routes (tenant_id, pattern, transport, nexthop) VALUES (NULL, ${sqlQuote(r.pattern)}, ${sqlQuote(r.transport)}, ${sqlQuote(r.nexthop)});`,
    ),
  ].join("\n");
}

async function d1(cwd: string, state: string, command: string): Promise<string> {
  const { stdout } = await run(
    "npx",
    ["wrangler", "d1", "execute", "DB", "--local", "--persist-to", state, "--json", "--command", command],
    { cwd, env: WRANGLER_ENV, maxBuffer: 256 << 20 },
  );
  return stdout;
}

async function waitHealthy(url: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`wrangler dev exited (${child.exitCode ?? child.signalCode})\n${log()}`);
    try {
      if ((await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) })).status === 200) return;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`wrangler dev did not answer /health within 90 s\n${log()}`);
}

/** Stop functions of the runtimes not disposed yet (for Ctrl-C). */
const live = new Set<() => Promise<void>>();

/** Stops every runtime still running (on SIGINT/SIGTERM). */
/** `--var` values of the chaos command, over every campaign's own (see index.ts). */
export const overrideVars: Record<string, string> = {};

export async function stopAllRuntimes(): Promise<void> {
  await Promise.all([...live].map((stop) => stop().catch(() => undefined)));
}

/** Prepares state, key and routes; see the header. */
export async function createRuntime(opts: RuntimeOptions): Promise<Runtime> {
  const root = await mkdtemp(join(tmpdir(), "cohort-chaos-"));
  const src = join(root, "src"),
    state = join(root, "state");
  await snapshot(src);
  await migratedState(state, src);
  // The keys (hashed) and the routes with one wrangler call: each costs about 3 s.
  const [key, operatorKey] = [generateApiKey(), generateApiKey()];
  await d1(
    src,
    state,
    [
      await keySql(key, { tenant: opts.tenant, name: "chaos" }),
      await keySql(operatorKey, { tenant: opts.tenant, name: "chaos-operator", role: "operator" }),
      ...(opts.routes.length > 0 ? [routeSql(opts.routes)] : []),
    ].join(" "),
  );
  let port = await freePort();
  let url = `http://127.0.0.1:${port}`;
  let started = false;
  let child: ChildProcess | null = null;
  let output = "";
  const errors: string[] = [];
  const vars = { ...opts.vars, ...overrideVars };

  // A port found free may be taken before wrangler binds it (by a sink listening on port 0, or as
  // the inspector's): wrangler then exits with "Address already in use" and is started again, on
  // a new port before the first start, on the same one (a restart keeps its URL) after a pause.
  const start = async () => {
    for (let attempt = 1; ; attempt++) {
      try {
        await startOnce();
        started = true;
        return;
      } catch (e) {
        if (attempt >= 5 || !/address already in use/i.test(e instanceof Error ? e.message : String(e))) throw e;
        if (started) await new Promise((r) => setTimeout(r, 1000));
        else {
          port = await freePort();
          url = `http://127.0.0.1:${port}`;
        }
      }
    }
  };

  const startOnce = async () => {
    const inspector = await freePort();
    output = "";
    const c = spawn(
      "npx",
      wranglerDevArgs({
        port,
        inspector,
        persistTo: state,
        testScheduled: true,
        logLevel: process.env.CHAOS_LOG_LEVEL ?? "warn",
        vars,
      }),
      { cwd: src, env: WRANGLER_ENV, detached: true, stdio: ["ignore", "pipe", "pipe"] },
    );
    const append = (b: Buffer) => {
      const text = b.toString();
      if (process.env.CHAOS_LOG_FILE) appendFileSync(process.env.CHAOS_LOG_FILE, text);
      output = (output + text).slice(-20_000);
      for (const line of text.split("\n")) if (/error|exception|uncaught/i.test(line)) errors.push(line.slice(0, 600));
      if (errors.length > 400) errors.splice(0, errors.length - 400);
    };
    c.stdout?.on("data", append);
    c.stderr?.on("data", append);
    child = c;
    await waitHealthy(url, c, () => output);
    // wrangler's inspector proxy has the Worker send DevTools Network events for every subrequest
    // and keeps them, unread, in memory (scripts/lib/cdp.ts): a cost of local dev alone.
    await stopNetworkCapture(inspector);
    // Crons never fire locally: wake every Outbox shard's sweeper once, as the cron would.
    await fetch(`${url}/__scheduled?cron=${encodeURIComponent("*/10 * * * *")}`).catch(() => undefined);
  };

  const kill9 = async () => {
    const c = child;
    if (!c?.pid) return 0;
    const pids = await processTree(c.pid);
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        /* gone */
      }
    }
    try {
      process.kill(-c.pid, "SIGKILL");
    } catch {
      /* group gone */
    }
    if (c.exitCode === null && c.signalCode === null) await new Promise((r) => c.once("exit", r));
    child = null;
    return pids.length;
  };

  const stop = async () => {
    const c = child;
    if (!c?.pid || c.exitCode !== null || c.signalCode !== null) {
      child = null;
      return;
    }
    const pids = await processTree(c.pid);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        for (const pid of pids) {
          try {
            process.kill(pid, "SIGKILL");
          } catch {
            /* gone */
          }
        }
      }, 5000);
      c.once("exit", () => {
        clearTimeout(timer);
        resolve();
      });
      try {
        process.kill(-c.pid!, "SIGTERM");
      } catch {
        resolve();
      }
    });
    // workerd may outlive its parent for a moment; make sure nothing of the tree is left.
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        /* gone */
      }
    }
    child = null;
  };

  const rssKb = async () => {
    const c = child;
    if (!c?.pid) return 0;
    const rss = await Promise.all((await processTree(c.pid)).map(rssOf));
    return rss.reduce((a, b) => a + b, 0);
  };

  const sql = async <T>(query: string): Promise<T[]> => {
    const parsed = JSON.parse(await d1(src, state, query)) as { results: T[] }[];
    return parsed.flatMap((p) => p.results);
  };

  live.add(stop);
  return {
    get url() {
      return url;
    },
    key,
    operatorKey,
    state,
    start,
    kill9,
    stop,
    rssKb,
    sql,
    dispose: async () => {
      await stop();
      live.delete(stop);
      await rm(root, { recursive: true, force: true });
    },
    running: () => child !== null && child.exitCode === null && child.signalCode === null,
    log: () => output,
    errors: () => [...errors],
  };
}
