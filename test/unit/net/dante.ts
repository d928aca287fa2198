// Test-only: runs Dante (Debian's dante-server, a real SOCKS5 server nobody here wrote) as a
// foreground child on 127.0.0.1 with a generated config in a temp dir.
//
// Username/password (RFC 1929): Dante checks it against the system password database
// (getpwnam + getspnam + crypt). Instead of adding a system user, the test preloads
// nss_wrapper (Debian's libnss-wrapper) with passwd/group/shadow files in the temp dir, so
// the user exists only for this Dante process.
//
// Needs: apt-get install -y dante-server libnss-wrapper (see test/fixtures/net/README.md).

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import net, { type AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";

/** The one user the username/password Dante knows. */
export const DANTE_USER = { username: "relay", password: "s3cret pässword" };

// SHA-512-crypt of DANTE_USER.password: `openssl passwd -6 -salt cohortDanteTest 's3cret pässword'`.
const DANTE_USER_HASH =
  "$6$cohortDanteTest$7IBL7j1AdGlw6TobgLyy9N1qix.9TS7HOV2xd5zB8X4o6hOUpxSsuyAzp0bweQYSNj5k4cIQrfMPYUsf6u1Zy0";

const INSTALL_HINT = "apt-get update && apt-get install -y dante-server libnss-wrapper";

/** Options for one Dante instance. */
export interface DanteOptions {
  /** "none": RFC 1928 no-auth only; "username": RFC 1929 username/password only. */
  method: "none" | "username";
  /** Target ports CONNECT must refuse by rule (REP 2). */
  blockPorts?: number[];
}

/** A running Dante. */
export interface DanteServer {
  port: number;
  /** Everything Dante logged so far. */
  log(): string;
  /** Stops the process group and removes the temp dir. */
  stop(): Promise<void>;
}

/** Path of danted, or throws with the install command. */
function findDanted(): string {
  for (const p of ["/usr/sbin/danted", "/usr/bin/danted"]) if (existsSync(p)) return p;
  const which = spawnSync("sh", ["-c", "command -v danted"], { encoding: "utf8" });
  if (which.status === 0 && which.stdout.trim()) return which.stdout.trim();
  throw new Error(`danted not found: the SOCKS5 tests need Dante. Install it with: ${INSTALL_HINT}`);
}

/** Path of libnss_wrapper.so, or throws with the install command. */
function findNssWrapper(): string {
  for (const dir of ["/usr/lib", "/usr/lib64", ...readdirSync("/usr/lib").map((d) => path.join("/usr/lib", d))]) {
    const candidate = path.join(dir, "libnss_wrapper.so");
    if (existsSync(candidate)) return candidate;
  }
  throw new Error(`libnss_wrapper.so not found: username/password SOCKS5 tests need it. Install with: ${INSTALL_HINT}`);
}

/** Dante configuration text. */
function config(port: number, opts: DanteOptions): string {
  const asRoot = process.getuid?.() === 0;
  const blocks = (opts.blockPorts ?? []).map(
    (p) => `socks block {\n  from: 127.0.0.0/8 to: 0.0.0.0/0 port = ${p}\n  log: connect error\n}`,
  );
  return [
    "logoutput: stderr",
    `internal: 127.0.0.1 port = ${port}`,
    "external: 127.0.0.1",
    "clientmethod: none",
    `socksmethod: ${opts.method}`,
    ...(asRoot ? ["user.privileged: root", "user.unprivileged: nobody"] : []),
    "client pass {\n  from: 127.0.0.0/8 to: 0.0.0.0/0\n  log: error\n}",
    ...blocks,
    "socks pass {\n  from: 127.0.0.0/8 to: 0.0.0.0/0\n  command: connect\n  log: connect disconnect error\n}",
    "",
  ].join("\n");
}

/** A port that was free a moment ago. */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Resolves once something accepts TCP connections on 127.0.0.1:port, or rejects at the deadline. */
async function waitForListen(port: number, child: ChildProcess, deadline: number): Promise<void> {
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error("danted exited");
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect({ host: "127.0.0.1", port }, () => {
        s.destroy();
        resolve(true);
      });
      s.on("error", () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error("danted did not start listening in time");
}

/** Starts Dante on a free 127.0.0.1 port (retrying if another process took the port). */
export async function startDante(opts: DanteOptions): Promise<DanteServer> {
  const danted = findDanted();
  const dir = mkdtempSync(path.join(os.tmpdir(), "cohort-dante-"));
  const env = { ...process.env, ...(opts.method === "username" ? writeUserDb(dir) : {}) };
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    writeFileSync(path.join(dir, "danted.conf"), config(port, opts));
    const args = ["-f", path.join(dir, "danted.conf"), "-p", path.join(dir, "danted.pid"), "-N", "1"];
    const child = spawn(danted, args, { env, detached: true, stdio: ["ignore", "ignore", "pipe"] });
    let log = "";
    child.stderr?.on("data", (d: Buffer) => (log += d.toString("utf8")));
    const server: DanteServer = { port, log: () => log, stop: () => stopDante(child, dir) };
    try {
      await waitForListen(port, child, Date.now() + 5_000);
      return server;
    } catch (e) {
      await stopDante(child, null);
      lastError = new Error(`${e instanceof Error ? e.message : String(e)}; danted log:\n${log}`);
    }
  }
  rmSync(dir, { recursive: true, force: true });
  throw lastError;
}

/** Writes passwd/group/shadow for nss_wrapper; returns the env that makes Dante read them. */
function writeUserDb(dir: string): Record<string, string> {
  const { username } = DANTE_USER;
  writeFileSync(
    path.join(dir, "passwd"),
    `root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n${username}:x:4242:4242::/nonexistent:/bin/false\n`,
  );
  writeFileSync(path.join(dir, "group"), `root:x:0:\nnogroup:x:65534:\n${username}:x:4242:\n`);
  writeFileSync(path.join(dir, "shadow"), `${username}:${DANTE_USER_HASH}:19000:0:99999:7:::\n`);
  return {
    LD_PRELOAD: findNssWrapper(),
    NSS_WRAPPER_PASSWD: path.join(dir, "passwd"),
    NSS_WRAPPER_GROUP: path.join(dir, "group"),
    NSS_WRAPPER_SHADOW: path.join(dir, "shadow"),
  };
}

/** Stops the Dante process group we started (SIGTERM, then SIGKILL after 2 s). */
async function stopDante(child: ChildProcess, dir: string | null): Promise<void> {
  const pid = child.pid;
  if (pid !== undefined && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    signalGroup(pid, "SIGTERM");
    const timer = setTimeout(() => signalGroup(pid, "SIGKILL"), 2_000);
    await exited;
    clearTimeout(timer);
  }
  // Dante's children leave with the mother; make sure none of this group lingers.
  if (pid !== undefined) signalGroup(pid, "SIGKILL");
  if (dir) rmSync(dir, { recursive: true, force: true });
}

/** Signals the process group led by `pid` (ours: spawned detached), ignoring "no such process". */
function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // Already gone.
  }
}
