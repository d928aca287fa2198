/*
 * Private Postfix instances and Postfix's smtp-sink for end-to-end tests and benchmarks.
 *
 * What it does
 *   startReceivingMx()        a private Postfix that accepts every recipient (catch-all) and
 *                             delivers it with virtual(8) into one Maildir under its temp dir.
 *   startRelayingPostfix(..)  a private Postfix that relays everything to relayhost (e.g. a sink).
 *   startSmtpSink()           Postfix's smtp-sink on a free port, counting the messages it got.
 *   countLog(path)            counts accepted messages and delivery statuses in a Postfix log.
 *
 *   Each Postfix instance has its own config_directory, queue_directory, data_directory and
 *   maillog_file in a fresh temp dir, listens on 127.0.0.1 only (inet_interfaces, and an smtpd
 *   service line "127.0.0.1:PORT inet ... smtpd" on a free port), and is started with
 *   `postfix -c <confdir> start`. stop() runs `postfix -c <confdir> stop`, waits for the master
 *   to exit, SIGKILLs by pid any process left in the master's session, and removes the temp dir
 *   (kept when COHORT_POSTFIX_KEEP=1, for debugging). Nothing here touches the system instance.
 *
 * Assumptions
 *   Debian's postfix package (>= 3.4, for maillog_file/postlogd) is installed
 *   (scripts/postfix/install.sh), with binaries in /usr/sbin and a `postfix` user; Postfix
 *   instances must be started as root. Queue ids are Postfix's short hex form
 *   (enable_long_queue_ids = no, which the generated main.cf sets). Linux /proc is used to find
 *   leftover processes. No DNS is needed: relayhost is an IP literal.
 */

import { spawn, execFile, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { chmod, chown, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import net from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";

const SBIN = "/usr/sbin";
const POSTFIX = join(SBIN, "postfix");
const POSTCONF = join(SBIN, "postconf");
const SMTP_SINK = join(SBIN, "smtp-sink");
/** Upper bound on any single Postfix command (start, stop). */
const COMMAND_TIMEOUT_MS = 60_000;
/** How long to wait for a listener to accept connections after a start. */
const READY_TIMEOUT_MS = 20_000;
/** Attempts with a fresh port when the chosen one was taken between probe and bind. */
const PORT_ATTEMPTS = 4;

// ---------------------------------------------------------------------------------------------
// Last-resort cleanup: if the process exits without stop() (a crash, process.exit), kill what
// is still registered, by pid, synchronously. stop() unregisters.

/** Synchronous cleanups for what is running now, keyed by temp dir. */
const live = new Map<string, () => void>();
let exitHookInstalled = false;

/** Registers a synchronous last-resort cleanup for `key`. */
function registerLive(key: string, cleanup: () => void): void {
  live.set(key, cleanup);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once("exit", () => {
    for (const fn of live.values()) {
      try {
        fn();
      } catch {
        // Best effort only.
      }
    }
    live.clear();
  });
}

// ---------------------------------------------------------------------------------------------
// Environment checks

/** Why Postfix instances cannot run here, or null when they can. */
export function postfixUnavailableReason(): string | null {
  if (process.platform !== "linux") return "Postfix harness needs Linux";
  if (process.getuid?.() !== 0) return "Postfix instances must be started as root (CI runs as root)";
  for (const bin of [POSTFIX, POSTCONF, SMTP_SINK, join(SBIN, "smtp-source")]) {
    if (!existsSync(bin)) return `${bin} is missing: run scripts/postfix/install.sh`;
  }
  return null;
}

/** True when the process runs as root. */
export function isRoot(): boolean {
  return process.getuid?.() === 0;
}

/** Postfix's mail_version (e.g. "3.7.11"), from the compiled-in defaults. */
export async function postfixVersion(): Promise<string> {
  const { stdout } = await run(POSTCONF, ["-d", "-h", "mail_version"]);
  return stdout.trim();
}

// ---------------------------------------------------------------------------------------------
// Log counting

/** Counts from a Postfix log (see countLog). */
export interface LogCounts {
  /** Distinct queue ids the queue manager took in: qmgr "from=<…>, size=…, nrcpt=…". */
  accepted: number;
  /** Sum of nrcpt over those distinct queue ids. */
  recipients: number;
  /** smtpd "client=" lines: messages received over SMTP (one per transaction with a queue id). */
  received: number;
  /** Delivery attempts per status ("status=sent", "status=deferred", "status=bounced", …). */
  sent: number;
  deferred: number;
  bounced: number;
  expired: number;
  /** qmgr "removed": queue files finished with. */
  removed: number;
  /** smtpd "NOQUEUE: reject" lines. */
  rejected: number;
  /** The first few fatal/panic/error/warning lines, for diagnostics. */
  problems: string[];
}

/** The parts of a log line after "postfix/<program>[pid]: ". */
interface LogEntry {
  program: string;
  text: string;
}

const LINE = /\spostfix[^\s/]*\/([\w.-]+)\[\d+\]: (.*)$/;
const QUEUE_ID = /^([0-9A-F]{6,}): (.*)$/;
const PROBLEM = /^(fatal|panic|error|warning): /;

/** Parses the text of a Postfix log (maillog_file format) into counts. */
export function parseLog(text: string): LogCounts {
  const counts: LogCounts = {
    accepted: 0,
    recipients: 0,
    received: 0,
    sent: 0,
    deferred: 0,
    bounced: 0,
    expired: 0,
    removed: 0,
    rejected: 0,
    problems: [],
  };
  const seen = new Set<string>();
  for (const line of text.split("\n")) {
    const entry = toEntry(line);
    if (!entry) continue;
    if (PROBLEM.test(entry.text)) {
      if (counts.problems.length < 20) counts.problems.push(line);
      continue;
    }
    if (entry.text.startsWith("NOQUEUE: reject:")) {
      counts.rejected++;
      continue;
    }
    const m = QUEUE_ID.exec(entry.text);
    if (!m) continue;
    const [, queueId = "", rest = ""] = m;
    countQueueEntry(counts, seen, entry.program, queueId, rest);
  }
  return counts;
}

/** Splits a log line into program and text, or null for lines that are not Postfix's. */
function toEntry(line: string): LogEntry | null {
  const m = LINE.exec(line);
  if (!m) return null;
  return { program: m[1] ?? "", text: m[2] ?? "" };
}

const FROM = /^from=<[^>]*>, size=\d+, nrcpt=(\d+)/;
const STATUS = /, status=([a-z]+)/;

/** Adds one "<queue id>: …" entry to the counts. */
function countQueueEntry(counts: LogCounts, seen: Set<string>, program: string, queueId: string, rest: string): void {
  if (program === "smtpd" && rest.startsWith("client=")) {
    counts.received++;
    return;
  }
  if (program === "qmgr") {
    if (rest === "removed") {
      counts.removed++;
      seen.delete(queueId); // Postfix reuses a short queue id once its file is gone
      return;
    }
    const from = FROM.exec(rest);
    if (from && !seen.has(queueId)) {
      seen.add(queueId);
      counts.accepted++;
      counts.recipients += Number(from[1]);
    }
    if (from) return;
  }
  const status = rest.startsWith("to=<") ? STATUS.exec(rest) : null;
  switch (status?.[1]) {
    case "sent":
      counts.sent++;
      break;
    case "deferred":
      counts.deferred++;
      break;
    case "bounced":
      counts.bounced++;
      break;
    case "expired":
      counts.expired++;
      break;
    default:
      break;
  }
}

/** Reads a Postfix log file (missing file: all zero) and counts it with parseLog. */
export function countLog(path: string): LogCounts {
  let text = "";
  try {
    text = readFileSync(path, "latin1");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
  return parseLog(text);
}

/** Polls `read` every `intervalMs` until `done` holds; rejects after `timeoutMs` with `describe`. */
export async function waitUntil<T>(
  read: () => T,
  done: (value: T) => boolean,
  options: { timeoutMs: number; intervalMs?: number; describe?: (value: T) => string },
): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  const interval = options.intervalMs ?? 100;
  for (;;) {
    const value = read();
    if (done(value)) return value;
    if (Date.now() >= deadline) {
      const what = options.describe ? options.describe(value) : JSON.stringify(value);
      throw new Error(`timed out after ${options.timeoutMs} ms waiting; last: ${what}`);
    }
    await sleep(interval);
  }
}

// ---------------------------------------------------------------------------------------------
// Private Postfix instances

/** A running private Postfix instance. */
export interface PostfixInstance {
  /** What it is for: "mx" (catch-all Maildir) or "relay" (everything to relayhost). */
  readonly role: "mx" | "relay";
  /** Always 127.0.0.1. */
  readonly host: string;
  /** Port of its smtpd. */
  readonly port: number;
  /** Temp dir holding everything below. */
  readonly root: string;
  readonly configDirectory: string;
  readonly queueDirectory: string;
  /** Its maillog_file. */
  readonly maillog: string;
  /** MX only: the Maildir every recipient is delivered to (new/ holds the messages). */
  readonly maildir: string | null;
  /** Counts its log now (see parseLog). */
  countLog(): LogCounts;
  /** Polls its log until `done` holds (default timeout 60 s). */
  waitForLog(done: (c: LogCounts) => boolean, timeoutMs?: number): Promise<LogCounts>;
  /** MX only: how many messages are in the Maildir (new/ and cur/). */
  countMaildir(): number;
  /** MX only: paths of the delivered message files. */
  listMaildir(): string[];
  /** Files in incoming/active/deferred/hold/maildrop: 0 when everything has been handled. */
  countQueueFiles(): number;
  /** Stops the instance, kills leftovers, removes the temp dir. Safe to call twice. */
  stop(): Promise<void>;
}

/** Options shared by both kinds of instance. */
export interface PostfixOptions {
  /** Extra main.cf lines ("name = value"), applied last. */
  mainCf?: Record<string, string>;
  /** myhostname. Default "mx.cohort.test" (MX) or "relay.cohort.test" (relay). */
  hostname?: string;
}

/** Options for startReceivingMx. */
export interface ReceivingMxOptions extends PostfixOptions {
  /**
   * Recipient domains to accept. Default: every domain (a static: catch-all table), so any
   * recipient of any test domain is accepted and delivered to the one Maildir.
   */
  domains?: string[];
}

/** Options for startRelayingPostfix. */
export interface RelayingPostfixOptions extends PostfixOptions {
  /** Where to relay everything, as host and port (an IP literal: no DNS is used). */
  relayhost: { host: string; port: number };
}

/**
 * Starts a private Postfix that accepts mail for every recipient (or for `domains`) on a free
 * 127.0.0.1 port and delivers each into one Maildir under its temp dir.
 */
export async function startReceivingMx(options: ReceivingMxOptions = {}): Promise<PostfixInstance> {
  const domains = options.domains?.length ? options.domains.join(", ") : "static:catch-all";
  return startInstance("mx", options, (dirs, ids) => ({
    myhostname: options.hostname ?? "mx.cohort.test",
    mydestination: "",
    relay_domains: "",
    virtual_mailbox_domains: domains,
    virtual_mailbox_base: dirs.mail,
    // Every recipient maps to the same Maildir (trailing slash = Maildir format).
    virtual_mailbox_maps: "static:sink/",
    virtual_uid_maps: `static:${ids.uid}`,
    virtual_gid_maps: `static:${ids.gid}`,
    virtual_minimum_uid: "1",
    relayhost: "",
  }));
}

/** Starts a private Postfix on a free 127.0.0.1 port that relays all mail to `relayhost`. */
export async function startRelayingPostfix(options: RelayingPostfixOptions): Promise<PostfixInstance> {
  const { host, port } = options.relayhost;
  if (net.isIP(host) === 0) throw new Error(`relayhost must be an IP literal, got ${host}`);
  return startInstance("relay", options, () => ({
    myhostname: options.hostname ?? "relay.cohort.test",
    mydestination: "",
    relay_domains: "",
    virtual_mailbox_domains: "",
    relayhost: `[${host}]:${port}`,
  }));
}

interface InstanceDirs {
  root: string;
  conf: string;
  queue: string;
  data: string;
  mail: string;
  maillog: string;
}

interface Ids {
  uid: number;
  gid: number;
}

/** Creates the temp tree and config, starts Postfix (retrying on a port race), returns it. */
async function startInstance(
  role: "mx" | "relay",
  options: PostfixOptions,
  roleSettings: (dirs: InstanceDirs, ids: Ids) => Record<string, string>,
): Promise<PostfixInstance> {
  const reason = postfixUnavailableReason();
  if (reason) throw new Error(reason);
  const ids = await lookupIds("postfix");
  const root = await mkdtemp(join(tmpdir(), `cohort-postfix-${role}-`));
  const dirs: InstanceDirs = {
    root,
    conf: join(root, "conf"),
    queue: join(root, "queue"),
    data: join(root, "data"),
    mail: join(root, "mail"),
    maillog: join(root, "maillog"),
  };
  let started = false;
  registerLive(root, () => {
    const master = readMasterPid(dirs.queue);
    if (master !== null) {
      for (const pid of sessionMembers(master)) killQuietly(pid);
      killQuietly(master);
    }
    if (process.env.COHORT_POSTFIX_KEEP !== "1") rmSync(root, { recursive: true, force: true });
  });
  try {
    // The postfix user must be able to traverse the tree; only root may write conf and queue.
    await chmod(root, 0o755);
    for (const d of [dirs.conf, dirs.queue, dirs.data, dirs.mail]) await mkdir(d, { mode: 0o755 });
    await chown(dirs.data, ids.uid, ids.gid);
    await chmod(dirs.data, 0o700);
    await chown(dirs.mail, ids.uid, ids.gid);
    const settings = { ...baseSettings(dirs), ...roleSettings(dirs, ids), ...options.mainCf };
    await writeFile(join(dirs.conf, "main.cf"), formatMainCf(settings), { mode: 0o644 });
    let lastError: unknown = null;
    for (let attempt = 0; attempt < PORT_ATTEMPTS; attempt++) {
      const port = await findFreePort();
      await writeFile(join(dirs.conf, "master.cf"), formatMasterCf(port), { mode: 0o644 });
      try {
        await run(POSTFIX, ["-c", dirs.conf, "start"]);
        started = true;
        await waitForListener("127.0.0.1", port, READY_TIMEOUT_MS);
        return makeInstance(role, dirs, port);
      } catch (e) {
        lastError = e;
        if (started) await stopPostfix(dirs);
        started = false;
        const log = tail(dirs.maillog, 20);
        if (!/Address already in use/.test(log)) throw withLog(e, log);
      }
    }
    throw withLog(lastError, tail(dirs.maillog, 20));
  } catch (e) {
    if (started) await stopPostfix(dirs);
    await removeTree(dirs.root);
    live.delete(root);
    throw e;
  }
}

/** Settings common to both roles: private dirs, loopback only, log to a file, no DNS, no TLS. */
function baseSettings(dirs: InstanceDirs): Record<string, string> {
  return {
    compatibility_level: "3.6",
    queue_directory: dirs.queue,
    data_directory: dirs.data,
    mail_owner: "postfix",
    setgid_group: "postdrop",
    inet_interfaces: "127.0.0.1",
    inet_protocols: "ipv4",
    mynetworks_style: "host",
    mynetworks: "127.0.0.0/8",
    mydomain: "cohort.test",
    myorigin: "$myhostname",
    maillog_file: dirs.maillog,
    maillog_file_prefixes: dirs.root,
    syslog_name: "postfix",
    enable_long_queue_ids: "no",
    alias_maps: "",
    alias_database: "",
    local_recipient_maps: "",
    local_transport: "error:5.1.1 no local delivery in the test harness",
    biff: "no",
    append_dot_mydomain: "no",
    smtpd_banner: "$myhostname ESMTP",
    smtpd_peername_lookup: "no",
    smtp_host_lookup: "native",
    smtp_dns_support_level: "disabled",
    smtp_tls_security_level: "none",
    smtpd_tls_security_level: "none",
    delay_warning_time: "0h",
    // Fail fast rather than retrying for days if something is wrong.
    maximal_queue_lifetime: "1h",
    bounce_queue_lifetime: "1h",
  };
}

/** main.cf text from name/value pairs. */
function formatMainCf(settings: Record<string, string>): string {
  const lines = ["# Generated by test/e2e/postfix/harness.ts for one private instance."];
  for (const [name, value] of Object.entries(settings)) {
    if (/[\r\n]/.test(value) || !/^\w+$/.test(name)) throw new Error(`bad main.cf setting ${name}`);
    lines.push(`${name} = ${value}`);
  }
  return `${lines.join("\n")}\n`;
}

/** master.cf with only the services these instances use; smtpd on 127.0.0.1:port; no chroot. */
function formatMasterCf(port: number): string {
  // service type private unpriv chroot wakeup maxproc command
  const services = [
    `127.0.0.1:${port} inet n - n - - smtpd`,
    "pickup unix n - n 60 1 pickup",
    "cleanup unix n - n - 0 cleanup",
    "qmgr unix n - n 300 1 qmgr",
    "rewrite unix - - n - - trivial-rewrite",
    "bounce unix - - n - 0 bounce",
    "defer unix - - n - 0 bounce",
    "trace unix - - n - 0 bounce",
    "verify unix - - n - 1 verify",
    "flush unix n - n 1000? 0 flush",
    "proxymap unix - - n - - proxymap",
    "smtp unix - - n - - smtp",
    "relay unix - - n - - smtp",
    "showq unix n - n - - showq",
    "error unix - - n - - error",
    "retry unix - - n - - error",
    "discard unix - - n - - discard",
    "local unix - n n - - local",
    "virtual unix - n n - - virtual",
    "anvil unix - - n - 1 anvil",
    "scache unix - - n - 1 scache",
    "postlog unix-dgram n - n - 1 postlogd",
  ];
  return `# Generated by test/e2e/postfix/harness.ts for one private instance.\n${services.join("\n")}\n`;
}

/** Wraps a running instance's directories into the PostfixInstance interface. */
function makeInstance(role: "mx" | "relay", dirs: InstanceDirs, port: number): PostfixInstance {
  const maildir = role === "mx" ? join(dirs.mail, "sink") : null;
  let stopped: Promise<void> | null = null;
  const listMaildir = (): string[] => {
    if (!maildir) return [];
    const files: string[] = [];
    for (const sub of ["new", "cur"]) {
      const dir = join(maildir, sub);
      if (!existsSync(dir)) continue;
      for (const name of readdirSync(dir)) files.push(join(dir, name));
    }
    return files;
  };
  const instance: PostfixInstance = {
    role,
    host: "127.0.0.1",
    port,
    root: dirs.root,
    configDirectory: dirs.conf,
    queueDirectory: dirs.queue,
    maillog: dirs.maillog,
    maildir,
    countLog: () => countLog(dirs.maillog),
    waitForLog: (done, timeoutMs = 60_000) =>
      waitUntil(() => countLog(dirs.maillog), done, {
        timeoutMs,
        describe: (c) => JSON.stringify({ ...c, problems: c.problems.slice(0, 5) }),
      }),
    countMaildir: () => listMaildir().length,
    listMaildir,
    countQueueFiles: () => countFiles(dirs.queue, ["incoming", "active", "deferred", "hold", "maildrop"]),
    stop: () => {
      stopped ??= (async () => {
        await stopPostfix(dirs);
        if (process.env.COHORT_POSTFIX_KEEP !== "1") await removeTree(dirs.root);
        live.delete(dirs.root);
      })();
      return stopped;
    },
  };
  return instance;
}

/** `postfix stop`, wait for the master to exit, then SIGKILL anything left in its session. */
async function stopPostfix(dirs: InstanceDirs): Promise<void> {
  const masterPid = readMasterPid(dirs.queue);
  try {
    await run(POSTFIX, ["-c", dirs.conf, "stop"]);
  } catch {
    // Not running, or stop failed: the kill below still cleans up.
  }
  if (masterPid === null) return;
  const gone = await waitForExit(masterPid, 10_000);
  for (const pid of sessionMembers(masterPid)) killQuietly(pid);
  if (!gone) killQuietly(masterPid);
  await waitForExit(masterPid, 5_000);
}

/** The master's pid from <queue>/pid/master.pid, or null. */
function readMasterPid(queueDir: string): number | null {
  try {
    const pid = Number.parseInt(readFileSync(join(queueDir, "pid", "master.pid"), "utf8").trim(), 10);
    return Number.isInteger(pid) && pid > 1 ? pid : null;
  } catch {
    return null;
  }
}

/** Pids of live processes whose session id is `sid` (the master calls setsid()). */
function sessionMembers(sid: number): number[] {
  const pids: number[] = [];
  let entries: string[] = [];
  try {
    entries = readdirSync("/proc");
  } catch {
    return pids;
  }
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      // Fields after the parenthesised command: state ppid pgrp session …
      const after = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(after[3]) === sid) pids.push(Number(name));
    } catch {
      // The process went away while we looked.
    }
  }
  return pids;
}

/** True when `pid` exists (and is not a zombie). */
function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

/** Waits until `pid` is gone; resolves false after `timeoutMs`. */
async function waitForExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return true;
    await sleep(50);
  }
  return !isAlive(pid);
}

/** SIGKILL by pid, ignoring "no such process". */
function killQuietly(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // Already gone.
  }
}

/** Counts regular files below the named subdirectories of `base` (depth-limited walk). */
function countFiles(base: string, subdirs: string[]): number {
  let count = 0;
  const walk = (dir: string, depth: number): void => {
    if (depth > 4 || !existsSync(dir)) return;
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      const st = statSync(path);
      if (st.isDirectory()) walk(path, depth + 1);
      else count++;
    }
  };
  for (const sub of subdirs) walk(join(base, sub), 0);
  return count;
}

// ---------------------------------------------------------------------------------------------
// smtp-sink

/** A running smtp-sink. */
export interface SmtpSink {
  readonly host: string;
  readonly port: number;
  /** Messages received so far ("." seen), from smtp-sink's -c counters. */
  messages(): number;
  /** SMTP sessions ended so far (includes the readiness probe). */
  sessions(): number;
  /** Resolves with the message count once it reaches `count`; rejects after `timeoutMs`. */
  waitForMessages(count: number, timeoutMs: number): Promise<number>;
  /** Dump directory (when started with dump: true): one file per message. */
  readonly dumpDirectory: string | null;
  /** Stops the sink (SIGTERM, then SIGKILL) and removes its temp dir. Safe to call twice. */
  stop(): Promise<void>;
}

/** Options for startSmtpSink. */
export interface SmtpSinkOptions {
  /** Write every message to a file under dumpDirectory (slower). Default false. */
  dump?: boolean;
  /** Extra smtp-sink arguments placed before the address (e.g. ["-w", "1"]). */
  extraArgs?: string[];
  /** listen(2) backlog. Default 256. */
  backlog?: number;
}

const COUNTERS = /sess=(\d+) quit=(\d+) mesg=(\d+)/g;

/** Starts Postfix's smtp-sink on a free 127.0.0.1 port, counting messages through `-c`. */
export async function startSmtpSink(options: SmtpSinkOptions = {}): Promise<SmtpSink> {
  if (!existsSync(SMTP_SINK)) throw new Error(`${SMTP_SINK} is missing: run scripts/postfix/install.sh`);
  const root = await mkdtemp(join(tmpdir(), "cohort-smtp-sink-"));
  let current: ChildProcess | null = null;
  registerLive(root, () => {
    if (current?.pid !== undefined && current.exitCode === null) killQuietly(current.pid);
    rmSync(root, { recursive: true, force: true });
  });
  let lastError: unknown = null;
  try {
    const asRoot = isRoot();
    const user = asRoot ? "nobody" : userInfo().username;
    const dumpDirectory = options.dump ? join(root, "dump") : null;
    if (dumpDirectory) {
      await mkdir(dumpDirectory, { mode: 0o755 });
      if (asRoot) {
        const ids = await lookupIds(user);
        await chown(dumpDirectory, ids.uid, ids.gid);
      }
    }
    for (let attempt = 0; attempt < PORT_ATTEMPTS; attempt++) {
      const port = await findFreePort();
      const args = [
        "-c",
        "-4",
        ...(asRoot ? ["-u", user] : []),
        "-h",
        "sink.cohort.test",
        ...(dumpDirectory ? ["-d", join(dumpDirectory, "msg.")] : []),
        ...(options.extraArgs ?? []),
        `127.0.0.1:${port}`,
        String(options.backlog ?? 256),
      ];
      const child = spawn(SMTP_SINK, args, { stdio: ["ignore", "pipe", "pipe"] });
      current = child;
      const sink = new SinkProcess(child, port, root, dumpDirectory);
      try {
        await sink.ready(READY_TIMEOUT_MS);
        return sink;
      } catch (e) {
        lastError = e;
        await sink.kill();
        if (!/in use/i.test(sink.stderrText())) throw e;
      }
    }
    throw lastError;
  } catch (e) {
    await removeTree(root);
    live.delete(root);
    throw e;
  }
}

/** smtp-sink child process with parsed counters. */
class SinkProcess implements SmtpSink {
  readonly host = "127.0.0.1";
  private sess = 0;
  private mesg = 0;
  private partial = "";
  private stderr = "";
  private exited = false;
  private readonly exitedPromise: Promise<void>;
  private waiters: { count: number; resolve: (n: number) => void }[] = [];
  private stopping: Promise<void> | null = null;

  constructor(
    private readonly child: ChildProcess,
    readonly port: number,
    private readonly root: string,
    readonly dumpDirectory: string | null,
  ) {
    this.exitedPromise = new Promise((resolve) => {
      child.once("exit", () => {
        this.exited = true;
        resolve();
      });
      child.once("error", (e) => {
        this.stderr += `${e.message}\n`;
        this.exited = true;
        resolve();
      });
    });
    child.stdout?.setEncoding("latin1");
    child.stdout?.on("data", (chunk: string) => this.onCounters(chunk));
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => {
      if (this.stderr.length < 10_000) this.stderr += chunk;
    });
  }

  /** Parses "\rsess=N quit=N mesg=N" updates; wakes waiters whose count is reached. */
  private onCounters(chunk: string): void {
    const text = this.partial + chunk;
    const cut = text.lastIndexOf("\r");
    this.partial = cut >= 0 ? text.slice(cut) : text;
    // The last update may be incomplete; parse whole ones only (each begins with \r).
    const complete = cut >= 0 ? text.slice(0, cut) : "";
    for (const m of complete.matchAll(COUNTERS)) {
      this.sess = Number(m[1]);
      this.mesg = Number(m[3]);
    }
    // A complete-looking tail ("mesg=N" followed by nothing yet) is taken as well; a later
    // update only increases the numbers.
    for (const m of this.partial.matchAll(COUNTERS)) {
      this.sess = Math.max(this.sess, Number(m[1]));
      this.mesg = Math.max(this.mesg, Number(m[3]));
    }
    const still: typeof this.waiters = [];
    for (const w of this.waiters) {
      if (this.mesg >= w.count) w.resolve(this.mesg);
      else still.push(w);
    }
    this.waiters = still;
  }

  messages(): number {
    return this.mesg;
  }

  sessions(): number {
    return this.sess;
  }

  stderrText(): string {
    return this.stderr;
  }

  /** Resolves once a TCP connection succeeds; rejects if the process exits first. */
  async ready(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.exited) throw new Error(`smtp-sink exited: ${this.stderr.trim()}`);
      if (await canConnect(this.host, this.port)) return;
      await sleep(50);
    }
    throw new Error(`smtp-sink not listening on ${this.port} after ${timeoutMs} ms`);
  }

  waitForMessages(count: number, timeoutMs: number): Promise<number> {
    if (this.mesg >= count) return Promise.resolve(this.mesg);
    return new Promise<number>((resolve, reject) => {
      const waiter = {
        count,
        resolve: (n: number) => {
          clearTimeout(timer);
          resolve(n);
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`smtp-sink got ${this.mesg} of ${count} messages in ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }

  /** Ends the process by pid: SIGTERM, then SIGKILL after 3 s. */
  async kill(): Promise<void> {
    if (this.exited || this.child.pid === undefined) return;
    this.child.kill("SIGTERM");
    const timedOut = await Promise.race([this.exitedPromise.then(() => false), sleep(3_000).then(() => true)]);
    if (timedOut) {
      this.child.kill("SIGKILL");
      await Promise.race([this.exitedPromise, sleep(3_000)]);
    }
  }

  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await this.kill();
      await removeTree(this.root);
      live.delete(this.root);
    })();
    return this.stopping;
  }
}

// ---------------------------------------------------------------------------------------------
// Small helpers

/** Runs a command with a timeout; rejects with its output on a non-zero exit. */
function run(file: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
  const env = { ...process.env };
  delete env.MAIL_CONFIG;
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout: COMMAND_TIMEOUT_MS, env, encoding: "utf8" }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${file} ${args.join(" ")} failed: ${error.message}\n${stdout}${stderr}`));
      else resolve({ stdout, stderr });
    });
  });
}

/** uid and gid of a system user, from getent. */
async function lookupIds(user: string): Promise<Ids> {
  const { stdout } = await run("/usr/bin/getent", ["passwd", user]);
  const fields = stdout.trim().split(":");
  const uid = Number(fields[2]);
  const gid = Number(fields[3]);
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) throw new Error(`no such user ${user}`);
  return { uid, gid };
}

/** A port that was free on 127.0.0.1 a moment ago (callers retry on a bind race). */
export function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error("no port"))));
    });
  });
}

/** True when a TCP connection to host:port succeeds within 1 s (closed right away). */
function canConnect(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

/** Waits until host:port accepts a TCP connection reading its 220 greeting. */
async function waitForListener(host: string, port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await readsGreeting(host, port)) return;
    await sleep(100);
  }
  throw new Error(`nothing answered on ${host}:${port} within ${timeoutMs} ms`);
}

/** Connects, waits for a "220" line, sends QUIT. */
function readsGreeting(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    let text = "";
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(2_000, () => done(false));
    socket.setEncoding("latin1");
    socket.on("data", (d: string) => {
      text += d;
      if (/^220[ -]/.test(text)) {
        socket.write("QUIT\r\n");
        done(true);
      } else if (text.length > 3 && !text.startsWith("220")) {
        done(false);
      }
    });
    socket.once("error", () => done(false));
    socket.once("end", () => done(false));
  });
}

/** The last `lines` lines of a file, or "" when it is missing. */
function tail(path: string, lines: number): string {
  try {
    return readFileSync(path, "utf8")
      .split("\n")
      .slice(-lines - 1)
      .join("\n");
  } catch {
    return "";
  }
}

/** Adds the log tail to an error's message. */
function withLog(e: unknown, log: string): Error {
  const message = e instanceof Error ? e.message : String(e);
  return new Error(log ? `${message}\n--- maillog tail ---\n${log}` : message);
}

/** Removes a temp tree (bounded retries for files still being closed). */
async function removeTree(path: string): Promise<void> {
  await rm(path, { recursive: true, force: true, maxRetries: 3, retryDelay: 100 });
}

/** Resolves after `ms`. */
function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
