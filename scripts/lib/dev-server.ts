/**
 * Starts `wrangler dev` on a private state directory and free loopback ports, for the e2e tests
 * and bench:accept; stops it (its whole process group) and removes the state afterwards.
 *
 * DESCRIPTION
 *   startDevServer({ tenant, vars, meter, role, testScheduled, logLevel })  applies the migrations to a fresh temp
 *                               state, creates an API key for `tenant` (an operator key with
 *                               role "operator"), starts wrangler dev (with --test-scheduled:
 *                               GET /__scheduled runs the cron handler) on 127.0.0.1 (HTTP and
 *                               inspector ports chosen free; `vars` override wrangler.toml's
 *                               [vars] with --var; `frozen` serves a bundle built once at the
 *                               start, see frozenBundle; the meter is off, METER "off", as
 *                               deployed, unless `meter`: GET /relay/dev/meter then counts,
 *                               at the cost of the Worker's CPU time), waits for GET /health → 200; starts
 *                               again on new ports (up to 3 times) when a port it found free
 *                               was taken before wrangler bound it ("Address already in use").
 *                               Returns { url, key, state, inspector, pid, stop }. Before it
 *                               returns, it turns off the Network events wrangler's inspector
 *                               proxy has the Worker send for every subrequest (cdp.ts,
 *                               stopNetworkCapture: a cost of local dev alone, which halved
 *                               delivery under a submission flood).
 *   startWrangler(o)            the start itself (ports, the retry, /health, the Network capture
 *                               off) for any wrangler.toml: this server's and bench:mix's floor.
 *   freePort(port?)             a free TCP port on 127.0.0.1 (or `port`, rejecting when taken).
 *   wranglerDevArgs(o)          `wrangler dev`'s arguments on 127.0.0.1 (for every local server:
 *                               this one, the chaos runtime's, the CLI and browser tests').
 *   waitHealthy(url, child, log, limitMs?)  waits for GET /health → 200 (default 60 s).
 *   devFetch(url, init?, onReset?, resendRefused?, onRefused?)  fetch() to a wrangler dev
 *                               that sends a request again (up to 5 times) when wrangler's
 *                               ProxyWorker answers its own 503 "Your worker restarted
 *                               mid-request": it lost a pooled connection to workerd that kj
 *                               had just closed as idle (workers-sdk#14641), the request never
 *                               reached the Worker and nothing restarted. `onReset` is called
 *                               for each. A 429 with Retry-After (the relay's back-pressure at
 *                               accept: nothing was queued) is sent again after that many
 *                               seconds, up to 30 times, unless `resendRefused` is false;
 *                               `onRefused` is called for each. Every other answer is returned.
 *                               `init` may be a function, called for each attempt (a fresh
 *                               AbortSignal.timeout for each, say).
 *   isDevProxyReset(status, text)  whether an answer is that 503.
 *
 * ENVIRONMENT
 *   DEV_LOG_FILE                a file every line wrangler and workerd print is appended to.
 *
 * ERRORS
 *   Rejects (after stopping what it started) when wrangler exits early or /health does not
 *   answer within 60 s; wrangler's log is included.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { appendFileSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { KeyRole } from "../../worker/db/admin";
import { stopNetworkCapture } from "./cdp";
import { createKey, WRANGLER_ENV } from "./keys";
import { migratedState } from "./migrated-state";

const run = promisify(execFile);

/** A running dev server. */
export interface DevServer {
  url: string;
  key: string;
  /** The server's local state directory (wrangler --persist-to). */
  state: string;
  /** wrangler's inspector port (Chrome DevTools Protocol, e.g. for CPU profiles). */
  inspector: number;
  /** The process group of wrangler and workerd (its leader's pid), e.g. to read their CPU time. */
  pid: number;
  stop: () => Promise<void>;
}

const DEV_PROXY_RESET = /^Your worker restarted mid-request/;

/** Whether an answer is wrangler dev's ProxyWorker 503 for a lost connection to workerd. */
export function isDevProxyReset(status: number, text: string): boolean {
  return status === 503 && DEV_PROXY_RESET.test(text);
}

/** fetch() that sends again what wrangler dev's proxy dropped (see the header). */
export async function devFetch(
  url: string,
  init: RequestInit | (() => RequestInit) = {},
  onReset: () => void = () => undefined,
  resendRefused = true,
  onRefused: () => void = () => undefined,
): Promise<Response> {
  for (let attempt = 0, refused = 0; ; attempt++) {
    const res = await fetch(url, typeof init === "function" ? init() : init);
    if (res.status === 429 && resendRefused && refused < 30 && res.headers.has("retry-after")) {
      await res.arrayBuffer();
      refused++;
      onRefused();
      attempt--;
      await new Promise((r) => setTimeout(r, 1000 * (Number(res.headers.get("retry-after")) || 1)));
      continue;
    }
    if (res.status !== 503 || attempt >= 5) return res;
    const text = await res.text();
    if (!isDevProxyReset(res.status, text))
      return new Response(text, { status: res.status, statusText: res.statusText, headers: res.headers });
    onReset();
  }
}

/**
 * `wrangler dev`'s arguments (after `npx`): `script` (the entry and its flags, as `-c <config>` or
 * `<bundle> --no-bundle --config <toml>`), then the loopback address and ports, the state under
 * `persistTo`, no interactive session, the log level, and each of `vars` as `--var`.
 */
export function wranglerDevArgs(o: {
  port: number;
  inspector: number;
  persistTo: string;
  script?: readonly string[];
  logLevel?: string;
  testScheduled?: boolean;
  vars?: Record<string, string>;
}): string[] {
  return [
    "wrangler",
    "dev",
    ...(o.script ?? []),
    "--ip",
    "127.0.0.1",
    "--port",
    String(o.port),
    "--inspector-port",
    String(o.inspector),
    "--persist-to",
    o.persistTo,
    "--show-interactive-dev-session=false",
    "--log-level",
    o.logLevel ?? "warn",
    ...(o.testScheduled ? ["--test-scheduled"] : []),
    ...Object.entries(o.vars ?? {}).flatMap(([k, v]) => ["--var", `${k}:${v}`]),
  ];
}

/** A free TCP port on 127.0.0.1: any (0), or `port` itself, rejecting when it is taken. */
export function freePort(port = 0): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(port, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** Stops a child's whole process group: SIGTERM, then SIGKILL after 5 s. */
export function stopGroup(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.pid === undefined) return resolve();
    const kill = (sig: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, sig);
      } catch {
        /* already gone */
      }
    };
    const timer = setTimeout(() => kill("SIGKILL"), 5000);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    kill("SIGTERM");
  });
}

/** Waits until `url`/health answers 200; rejects when `child` exits first or after `limitMs`. */
export async function waitHealthy(
  url: string,
  child: ChildProcess,
  log: () => string,
  limitMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`wrangler dev exited with ${child.exitCode}\n${log()}`);
    try {
      if ((await fetch(`${url}/health`)).status === 200) return;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`wrangler dev did not answer /health within ${limitMs / 1000} s\n${log()}`);
}

/**
 * Bundles the Worker once into `<state>/bundle` and returns a copy of wrangler.toml that serves
 * that bundle unbundled: wrangler dev then watches only the copy, so edits to the source tree
 * during a long run (other people working in it) cannot restart the Worker mid-run.
 */
async function frozenBundle(state: string): Promise<string> {
  const dir = join(state, "bundle");
  await run("npx", ["wrangler", "deploy", "--dry-run", "--outdir", dir], { env: WRANGLER_ENV, maxBuffer: 16 << 20 });
  const toml = (await readFile("wrangler.toml", "utf8")).replace(/^main = .*$/m, 'main = "index.js"\nno_bundle = true');
  const path = join(dir, "wrangler.toml");
  await writeFile(path, toml);
  return path;
}

/** Starts a private wrangler dev and returns its URL, an API key and a stop function. */
export async function startDevServer(opts: {
  tenant: string;
  vars?: Record<string, string>;
  meter?: boolean;
  frozen?: boolean;
  role?: KeyRole;
  testScheduled?: boolean;
  logLevel?: "warn" | "info";
}): Promise<DevServer> {
  const vars = { METER: opts.meter ? "on" : "off", ...opts.vars };
  const state = await mkdtemp(join(tmpdir(), "cohort-dev-"));
  await migratedState(state);
  const key = await createKey({ tenant: opts.tenant, name: "dev-server", persistTo: state, role: opts.role });
  const config = opts.frozen
    ? [
        "-c",
        await frozenBundle(state).catch(async (e: unknown) => {
          await rm(state, { recursive: true, force: true });
          throw e;
        }),
      ]
    : [];
  try {
    const w = await startWrangler({
      persistTo: state,
      script: config,
      ...(opts.logLevel ? { logLevel: opts.logLevel } : {}),
      ...(opts.testScheduled ? { testScheduled: true } : {}),
      vars,
    });
    const stop = async () => {
      await w.stop();
      await rm(state, { recursive: true, force: true });
    };
    return { url: w.url, key, state, inspector: w.inspector, pid: w.pid, stop };
  } catch (e) {
    await rm(state, { recursive: true, force: true });
    throw e;
  }
}

/** A running wrangler dev (startWrangler): its URL, inspector port, process group leader and stop. */
export interface Wrangler {
  url: string;
  inspector: number;
  pid: number;
  /** Stops its whole process group. */
  stop: () => Promise<void>;
}

/**
 * Starts wrangler dev with `o` (wranglerDevArgs, on ports found free) and waits for GET /health and
 * the Network capture turned off (see the header); starts again on new ports (up to 3 times) when
 * a port found free was taken before wrangler bound it. Rejects after stopping what it started.
 */
export async function startWrangler(
  o: Omit<Parameters<typeof wranglerDevArgs>[0], "port" | "inspector">,
): Promise<Wrangler> {
  // A port found free can be taken by another process before wrangler binds it: start again on
  // new ports when that is why it failed (at most 3 times).
  for (let attempt = 1; ; attempt++) {
    const [port, inspector] = [await freePort(), await freePort()];
    const child = spawn("npx", wranglerDevArgs({ ...o, port, inspector }), {
      env: WRANGLER_ENV,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    const append = (b: Buffer) => {
      output = (output + b.toString()).slice(-20_000);
      if (process.env.DEV_LOG_FILE) appendFileSync(process.env.DEV_LOG_FILE, b.toString());
    };
    child.stdout?.on("data", append);
    child.stderr?.on("data", append);
    const url = `http://127.0.0.1:${port}`;
    try {
      await waitHealthy(url, child, () => output);
      await stopNetworkCapture(inspector).catch((e: unknown) => {
        throw new Error(
          `wrangler dev: turning off its DevTools Network capture failed: ${e instanceof Error ? e.message : String(e)}\n${output}`,
        );
      });
    } catch (e) {
      await stopGroup(child);
      if (attempt < 3 && /address already in use/i.test(output)) continue;
      throw e;
    }
    return { url, inspector, pid: child.pid!, stop: () => stopGroup(child) };
  }
}
