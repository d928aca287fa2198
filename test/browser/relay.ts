/**
 * A local relay carrying real mail, for the CLI and browser tests: `wrangler dev` of a bundle
 * built at start (so concurrent source edits cannot restart it mid-test) on a fresh state and
 * free loopback ports, delivering (default transport, SMARTHOST) to the scripted SMTP
 * catcher (scripts/lib/smtp-catcher.ts: `reject-…` → 550 bounce, `tempfail-…` → 451 deferral).
 *
 * DESCRIPTION
 *   startRelay(vars?)  applies the migrations, creates an operator key (tenant "ops") and a tenant
 *                  key (tenant "acme"), starts the catcher and wrangler dev (with `vars` as
 *                  --var overrides), waits for /health.
 *                  Returns { url, operatorKey, tenantKey, smarthost, catcher, stop }.
 *   api(relay, key, method, path, body?)  one JSON call; throws on a non-2xx answer.
 *   waitFor(probe, ms, what)  polls until probe() answers something other than undefined.
 *
 * ERRORS
 *   startRelay() rejects (after stopping what it started) when wrangler exits early or /health
 *   does not answer within 90 s; wrangler's log is included.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { freePort, waitHealthy, wranglerDevArgs } from "../../scripts/lib/dev-server";
import { createKeys, WRANGLER_ENV } from "../../scripts/lib/keys";
import { migratedState } from "../../scripts/lib/migrated-state";
import { startCatcher, type Catcher } from "../../scripts/lib/smtp-catcher";

const run = promisify(execFile);
const ROOT = new URL("../..", import.meta.url).pathname;

/** A running relay. */
export interface Relay {
  url: string;
  operatorKey: string;
  tenantKey: string;
  /** The default transport's nexthop, "[127.0.0.1]:<port>" (the destination queue's name). */
  smarthost: string;
  catcher: Catcher;
  /** The tail of wrangler's output (for failure messages). */
  log: () => string;
  stop: () => Promise<void>;
}

function stopGroup(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.pid === undefined) return resolve();
    const kill = (sig: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, sig);
      } catch {
        /* gone */
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

/** Spawns wrangler dev on the bundle on fresh ports and waits for /health; returns its URL. */
async function serve(
  bundle: string,
  state: string,
  smarthost: string,
  mailboxPort: number,
  vars: Record<string, string>,
  started: (child: ChildProcess) => void,
  log: () => string,
): Promise<string> {
  const [port, inspector] = [await freePort(), await freePort()];
  const child = spawn(
    "npx",
    wranglerDevArgs({
      port,
      inspector,
      persistTo: state,
      script: [join(bundle, "index.js"), "--no-bundle", "--config", "wrangler.toml"],
      vars: { SMARTHOST: smarthost, DEV_MAILBOX_URL: `http://127.0.0.1:${mailboxPort}/messages`, ...vars },
    }),
    { env: WRANGLER_ENV, cwd: ROOT, detached: true, stdio: ["ignore", "pipe", "pipe"] },
  );
  started(child);
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(url, child, log, 90_000);
  return url;
}

/** Starts the relay (see header). */
export async function startRelay(vars: Record<string, string> = {}): Promise<Relay> {
  const state = await mkdtemp(join(tmpdir(), "cohort-ops-"));
  const catcher = await startCatcher({ scripted: true });
  let child: ChildProcess | null = null;
  let log = "";
  const stop = async () => {
    if (child) await stopGroup(child);
    await catcher.close();
    await rm(state, { recursive: true, force: true });
  };
  try {
    await migratedState(state, ROOT);
    const [operatorKey, tenantKey] = await createKeys([
      { tenant: "ops", name: "operator", persistTo: state, role: "operator" },
      { tenant: "acme", name: "tenant", persistTo: state },
    ]);
    // Bundle once and serve that bundle, so edits to the source tree while the tests run do not
    // make wrangler rebuild and restart the worker under them.
    const bundle = join(state, "bundle");
    await run("npx", ["wrangler", "deploy", "--dry-run", "--outdir", bundle], {
      env: WRANGLER_ENV,
      cwd: ROOT,
      maxBuffer: 16 << 20,
    });
    const smarthost = `[127.0.0.1]:${catcher.smtpPort}`;
    // A port found free can be taken by another process before wrangler binds it: start again on
    // new ports when that is why it failed (at most 3 times).
    for (let attempt = 1; ; attempt++) {
      try {
        const url = await serve(
          bundle,
          state,
          smarthost,
          catcher.httpPort,
          vars,
          (c) => {
            child = c;
            log = "";
            const append = (b: Buffer) => {
              log = (log + b.toString()).slice(-20_000);
            };
            c.stdout?.on("data", append);
            c.stderr?.on("data", append);
          },
          () => log,
        );
        return { url, operatorKey, tenantKey, smarthost, catcher, log: () => log, stop };
      } catch (e) {
        if (child) await stopGroup(child);
        if (attempt < 3 && /address already in use/i.test(log)) continue;
        throw e;
      }
    }
  } catch (e) {
    await stop();
    throw e;
  }
}

/** One JSON API call; throws with the body on a non-2xx answer. */
export async function api<T = any>(
  relay: Relay,
  key: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<T> {
  const res = await fetch(`${relay.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path} → ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

/** Polls `probe` every 250 ms until it answers something other than undefined. */
export async function waitFor<T>(probe: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Waits until every recipient of the email is in one of `states`; returns GET /relay/messages/:id. */
export function recipientsIn(relay: Relay, key: string, id: string, states: string[], timeoutMs = 30_000) {
  return waitFor(
    async () => {
      const m = await api<{ recipients: { email: string; status: string }[]; events: { type: string }[] }>(
        relay,
        key,
        "GET",
        `/relay/messages/${id}`,
      ).catch(() => undefined);
      return m && m.recipients.length > 0 && m.recipients.every((r) => states.includes(r.status)) ? m : undefined;
    },
    timeoutMs,
    `recipients of ${id} in ${states.join("|")}`,
  );
}
