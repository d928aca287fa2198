/**
 * Scripted SMTP servers (smtp-server from npm, in Node) for the delivery tests' globalSetup, each
 * with one behaviour the relay must cope with, and one HTTP endpoint where the Workers-runtime
 * tests read what each of them saw.
 *
 * DESCRIPTION
 *   startScriptedSinks(specs)  starts one smtp-server per spec on its host (default 127.0.0.1) and
 *       port (default 0 = free), and an HTTP server on 127.0.0.1:0 answering
 *       GET /sinks/<name> with SinkStats as JSON. Returns { ports, statsUrl, close }.
 *   Behaviours (SinkSpec):
 *     maxClients    smtp-server's own limit: beyond it a new connection gets
 *                   "421 … Too many connected clients" at the greeting.
 *     dataDelayMs   each message is answered this long after its last byte (keeps sessions open,
 *                   so concurrency is exercised).
 *     dropFirstData the first DATA of each recipient set has its connection destroyed after the
 *                   first chunk arrived (no reply to the final dot); later ones are accepted.
 *     greeting554   every connection is refused with a 554 greeting.
 *     tls           STARTTLS offered with this key and certificate (PEM); otherwise not offered.
 *     auth          AUTH required (PLAIN/LOGIN or the methods named) with this username/password;
 *                   a wrong password gets 535 5.7.8. Otherwise AUTH is not offered.
 *     mailFromReply the first `times` MAIL FROM commands are answered with this reply (code and
 *                   text, e.g. a provider's throttling 421); later ones are accepted. The server
 *                   then neither advertises nor adds enhanced status codes of its own, so the
 *                   reply goes out as written (as Yahoo's MX hosts send it).
 *   SinkStats: connections (TCP), sessions (past the greeting checks), maxConcurrent (sessions at
 *   once), refused (connections without a session: 421/554 greetings), drops, authFailures, and
 *   messages [{ mailFrom, rcptTo, body (base64), user, secure }].
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo, Server as NetServer, Socket } from "node:net";
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from "smtp-server";

/** One scripted server. */
export interface SinkSpec {
  name: string;
  host?: string;
  port?: number;
  maxClients?: number;
  dataDelayMs?: number;
  dropFirstData?: boolean;
  greeting554?: boolean;
  tls?: { key: string; cert: string };
  auth?: { username: string; password: string; methods?: string[] };
  mailFromReply?: { code: number; text: string; times: number };
}

/** A message as a scripted server received it. */
export interface SinkMessage {
  mailFrom: string;
  rcptTo: string[];
  body: string;
  user: string | null;
  secure: boolean;
}

/** What a scripted server saw. */
export interface SinkStats {
  connections: number;
  sessions: number;
  maxConcurrent: number;
  refused: number;
  drops: number;
  authFailures: number;
  messages: SinkMessage[];
}

/** The running servers. */
export interface ScriptedSinks {
  ports: Record<string, number>;
  statsUrl: string;
  close: () => Promise<void>;
}

type CodedError = Error & { responseCode?: number };

function coded(code: number, text: string): CodedError {
  const e: CodedError = new Error(text);
  e.responseCode = code;
  return e;
}

/** Options that make smtp-server behave as `spec` says, recording into `stats`. */
function optionsOf(spec: SinkSpec, stats: SinkStats, server: () => SMTPServer): SMTPServerOptions {
  const live = new Set<string>();
  const dropped = new Set<string>();
  let refusedMail = 0;
  const disabled = [...(spec.tls ? [] : ["STARTTLS"]), ...(spec.auth ? [] : ["AUTH"])];
  return {
    logger: false,
    disableReverseLookup: true,
    hideENHANCEDSTATUSCODES: spec.mailFromReply !== undefined,
    closeTimeout: 50,
    disabledCommands: disabled,
    authOptional: !spec.auth,
    ...(spec.auth ? { authMethods: spec.auth.methods ?? ["PLAIN", "LOGIN"] } : {}),
    ...(spec.tls ? { key: spec.tls.key, cert: spec.tls.cert } : {}),
    ...(spec.maxClients ? { maxClients: spec.maxClients } : {}),
    onConnect: (session, callback) => {
      if (spec.greeting554) return callback(coded(554, "not accepting mail here"));
      stats.sessions++;
      live.add(session.id);
      stats.maxConcurrent = Math.max(stats.maxConcurrent, live.size);
      callback();
    },
    onClose: (session) => void live.delete(session.id),
    onMailFrom: (_address, _session, callback) => {
      const r = spec.mailFromReply;
      if (r && refusedMail < r.times) {
        refusedMail++;
        return callback(coded(r.code, r.text));
      }
      callback();
    },
    onAuth: (auth, _session, callback) => {
      const want = spec.auth!;
      if (auth.username === want.username && auth.password === want.password)
        return callback(null, { user: auth.username });
      stats.authFailures++;
      callback(coded(535, "Authentication credentials invalid"));
    },
    onData: (stream, session, callback) => {
      const key = session.envelope.rcptTo.map((r) => r.address).join(",");
      if (spec.dropFirstData && !dropped.has(key)) {
        dropped.add(key);
        stream.once("data", () => dropConnection(server(), session, stats));
        stream.on("error", () => undefined);
        return;
      }
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        stats.messages.push({
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          rcptTo: session.envelope.rcptTo.map((r) => r.address),
          body: Buffer.concat(chunks).toString("base64"),
          user: typeof session.user === "string" ? session.user : null,
          secure: session.secure,
        });
        setTimeout(() => callback(), spec.dataDelayMs ?? 0);
      });
    },
  };
}

/** Destroys the TCP connection of `session` (smtp-server keeps its connections in a Set). */
function dropConnection(server: SMTPServer, session: SMTPServerSession, stats: SinkStats): void {
  const conns = (server as unknown as { connections: Set<{ id: string; _socket: Socket }> }).connections;
  for (const c of conns) {
    if (c.id !== session.id) continue;
    stats.drops++;
    c._socket.destroy();
  }
}

function listen(server: NetServer, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
  });
}

/** Starts one scripted server; returns its port and its close function. */
async function startOne(spec: SinkSpec, stats: SinkStats): Promise<{ port: number; close: () => Promise<void> }> {
  let smtp: SMTPServer | null = null;
  smtp = new SMTPServer(optionsOf(spec, stats, () => smtp!));
  // Dropped and reset connections are the point of some sinks; never let them end the process.
  smtp.on("error", () => undefined);
  smtp.server.on("connection", () => void stats.connections++);
  const port = await listen(smtp.server, spec.host ?? "127.0.0.1", spec.port ?? 0);
  return { port, close: () => new Promise<void>((r) => smtp!.close(() => r())) };
}

function statsServer(all: Map<string, SinkStats>): Server {
  return createServer((req, res) => {
    const name = /^\/sinks\/([\w-]+)$/.exec(req.url ?? "")?.[1];
    const stats = name ? all.get(name) : undefined;
    if (!stats) return void res.writeHead(404).end();
    res
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify({ ...stats, refused: stats.connections - stats.sessions }));
  });
}

/** Starts every server of `specs` and the stats endpoint (see header). */
export async function startScriptedSinks(specs: SinkSpec[]): Promise<ScriptedSinks> {
  const all = new Map<string, SinkStats>();
  const closers: (() => Promise<void>)[] = [];
  const ports: Record<string, number> = {};
  const http = statsServer(all);
  const close = async () => {
    http.closeAllConnections();
    await Promise.all([...closers.map((c) => c()), new Promise<void>((r) => http.close(() => r()))]);
  };
  try {
    for (const spec of specs) {
      const stats: SinkStats = {
        connections: 0,
        sessions: 0,
        maxConcurrent: 0,
        refused: 0,
        drops: 0,
        authFailures: 0,
        messages: [],
      };
      all.set(spec.name, stats);
      const one = await startOne(spec, stats);
      closers.push(one.close);
      ports[spec.name] = one.port;
    }
    const port = await listen(http, "127.0.0.1", 0);
    return { ports, statsUrl: `http://127.0.0.1:${port}/sinks`, close };
  } catch (e) {
    await close();
    throw e;
  }
}
