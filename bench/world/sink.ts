/**
 * The mail world's SMTP sink: one process serves every domain, with one listener per domain on
 * its MX address and one port for all (the relay has one MX_PORT), and behaves as each domain's
 * kind says (world.ts). It records what a server sees: sessions, refusals, every RCPT reply and
 * every delivery, with times, so latency, deferrals and duplicates are measured by the server,
 * the same way for every client.
 *
 * DESCRIPTION
 *   startWorldSink(world, opts?)  listens on every domain's address (or opts.domains'), port
 *       opts.port (0: one free port for all, chosen again when another process holds it on some
 *       address). Speaks enough ESMTP for a relay (EHLO with PIPELINING, 8BITMIME,
 *       ENHANCEDSTATUSCODES and SIZE; MAIL, RCPT, DATA, RSET, NOOP, QUIT), greets at once, never
 *       offers STARTTLS or AUTH, and discards bodies. Returns a WorldSink:
 *     port                the port of every listener.
 *     startClock()        t = 0 for flaky domains' comeback (call it when a phase starts); the
 *                         clock also starts with the sink.
 *     stats()             counters since the last reset (SinkStats).
 *     deliveries()        per recipient address: the times (epoch ms) it was delivered.
 *     greylist()          per greylisted address: its first attempt, refusals and attempt times.
 *     waitFor(pred, timeoutMs)  resolves when pred(stats) holds (checked at every delivery and
 *                         every 200 ms), rejects after timeoutMs with the counters.
 *     reset()             starts new counters and records (sessions already open stay open; greylist
 *                         memory is kept only when opts.keepGreylist).
 *     stop()              closes every listener and connection.
 *   A session counts from its greeting (220) to its close. Its idle gaps are the times from the
 *   reply to one message's final dot to the next MAIL FROM on the same connection: the time the
 *   client holds the server's session between two transactions.
 *
 * INVARIANTS
 *   A greylisted recipient is accepted only at an attempt at least greylistMs after its first
 *   one (greylistRefusedTwice counts those refused more than once). A domain's open sessions never
 *   exceed its maxSessions (the 421 is sent before a session counts). Nothing here blocks the
 *   event loop for longer than one reply.
 */
import net, { type AddressInfo, type Socket } from "node:net";
import type { Domain, World } from "./world";

/** Counters of the sink since the last reset. */
export interface SinkStats {
  /** Connections greeted with 220. */
  sessions: number;
  /** Connections answered 421 at the greeting (a domain's session limit). */
  refused421: number;
  /** Connections reset at accept (down, or flaky not yet back). */
  refusedConnections: number;
  /** Connections accepted and never greeted (timeout domains). */
  silentConnections: number;
  transactions: number;
  rcptAccepted: number;
  rcptGreylisted: number;
  rcptUnknown: number;
  /** Recipients delivered (each time: a duplicate counts again). */
  delivered: number;
  /** Deliveries of an address already delivered. */
  duplicates: number;
  /** Recipients refused by a greylist more than once. */
  greylistRefusedTwice: number;
  /** Recipients refused by a greylist at least once. */
  greylistRefused: number;
  /** Idle gaps between transactions on one connection, ms. */
  idleGapsMs: number[];
  /** Sum over sessions of their open time, ms, and the most open at once, per the whole sink. */
  sessionMs: number;
  maxOpen: number;
}

/** What the greylist remembers of a recipient. */
export interface GreylistRecord {
  first: number;
  refusals: number;
  /** Every RCPT of the address at a greylisting domain, epoch ms (the accepted one last). */
  attempts: number[];
}

/** A running sink. */
export interface WorldSink {
  readonly port: number;
  startClock(): void;
  stats(): SinkStats;
  deliveries(): ReadonlyMap<string, number[]>;
  greylist(): ReadonlyMap<string, GreylistRecord>;
  /** Open sessions now, per domain name (only domains with any). */
  openSessions(): Record<string, number>;
  waitFor(pred: (s: SinkStats) => boolean, timeoutMs: number): Promise<SinkStats>;
  reset(): void;
  stop(): Promise<void>;
}

/** Sink options. */
export interface WorldSinkOptions {
  /** One port for every address (0: a free one). */
  port?: number;
  /** Serve only these domains (default: all of the world's). */
  domains?: Domain[];
  /** Keep the greylist's memory across reset() (a second client meets the same greylist state). */
  keepGreylist?: boolean;
}

const fresh = (): SinkStats => ({
  sessions: 0,
  refused421: 0,
  refusedConnections: 0,
  silentConnections: 0,
  transactions: 0,
  rcptAccepted: 0,
  rcptGreylisted: 0,
  rcptUnknown: 0,
  delivered: 0,
  duplicates: 0,
  greylistRefusedTwice: 0,
  greylistRefused: 0,
  idleGapsMs: [],
  sessionMs: 0,
  maxOpen: 0,
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The shared state of one sink. */
class SinkState {
  s = fresh();
  delivered = new Map<string, number[]>();
  /** Per greylisted address: its refusals and the time of every attempt (RCPT). */
  greylist = new Map<string, GreylistRecord>();
  open = new Map<string, number>();
  totalOpen = 0;
  clockStart = Date.now();
  resetAt = 0;
  waiters = new Set<() => void>();
  sockets = new Set<Socket>();

  reset(keepGreylist: boolean): void {
    this.s = fresh();
    this.resetAt = Date.now();
    this.delivered = new Map();
    if (!keepGreylist) this.greylist = new Map();
    for (const w of this.waiters) w();
  }

  notify(): void {
    for (const w of this.waiters) w();
  }
}

/** Serves one connection to `d` (see the header). */
function serve(st: SinkState, d: Domain, socket: Socket): void {
  st.sockets.add(socket);
  socket.on("close", () => st.sockets.delete(socket));
  socket.on("error", () => undefined);
  socket.setNoDelay(true);
  const now = Date.now();
  if (d.refuseUntilMs === null || (d.refuseUntilMs > 0 && now - st.clockStart < d.refuseUntilMs)) {
    st.s.refusedConnections++;
    socket.resetAndDestroy();
    return;
  }
  if (d.silent) {
    st.s.silentConnections++;
    socket.setTimeout(15 * 60_000, () => socket.destroy());
    return;
  }
  const open = st.open.get(d.name) ?? 0;
  if (d.maxSessions > 0 && open >= d.maxSessions) {
    st.s.refused421++;
    socket.end(`421 4.7.0 ${d.mxHost} Too many sessions from your address, try again later\r\n`);
    return;
  }
  st.open.set(d.name, open + 1);
  st.totalOpen++;
  st.s.sessions++;
  st.s.maxOpen = Math.max(st.s.maxOpen, st.totalOpen);
  socket.once("close", () => {
    const left = (st.open.get(d.name) ?? 1) - 1;
    if (left > 0) st.open.set(d.name, left);
    else st.open.delete(d.name);
    st.totalOpen--;
    st.s.sessionMs += Date.now() - Math.max(now, st.resetAt);
  });
  new Session(st, d, socket).start();
}

/** One SMTP session's protocol state. */
class Session {
  private buf = "";
  private busy = false;
  private inData = false;
  private rcpts: string[] = [];
  private mail = false;
  private lastDoneAt: number | null = null;
  private closed = false;

  constructor(
    private readonly st: SinkState,
    private readonly d: Domain,
    private readonly socket: Socket,
  ) {}

  start(): void {
    this.socket.setEncoding("latin1");
    this.socket.on("data", (chunk: string) => {
      this.buf += chunk;
      void this.pump();
    });
    this.socket.on("close", () => {
      this.closed = true;
    });
    this.socket.setTimeout(300_000, () => this.socket.destroy());
    this.write(`220 ${this.d.mxHost} ESMTP world sink`);
  }

  private write(line: string): void {
    if (!this.closed) this.socket.write(`${line}\r\n`);
  }

  /** Handles buffered commands one at a time (pipelined commands wait for the one before). */
  private async pump(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      while (!this.closed) {
        if (this.inData) {
          const end = this.buf.indexOf("\r\n.\r\n");
          if (end < 0) {
            // Keep the last 4 characters: the terminator may straddle two chunks.
            if (this.buf.length > 1 << 16) this.buf = this.buf.slice(-4);
            return;
          }
          this.buf = this.buf.slice(end + 5);
          this.inData = false;
          await this.finishData();
          continue;
        }
        const eol = this.buf.indexOf("\r\n");
        if (eol < 0) return;
        const line = this.buf.slice(0, eol);
        this.buf = this.buf.slice(eol + 2);
        await this.command(line);
      }
    } finally {
      this.busy = false;
    }
  }

  private async command(line: string): Promise<void> {
    const verb = line.slice(0, 4).toUpperCase();
    if (verb === "EHLO") {
      this.write(
        `250-${this.d.mxHost}\r\n250-PIPELINING\r\n250-8BITMIME\r\n250-ENHANCEDSTATUSCODES\r\n250 SIZE 52428800`,
      );
    } else if (verb === "HELO") {
      this.write(`250 ${this.d.mxHost}`);
    } else if (verb === "MAIL") {
      if (this.lastDoneAt !== null) this.st.s.idleGapsMs.push(Date.now() - this.lastDoneAt);
      this.lastDoneAt = null;
      [this.mail, this.rcpts] = [true, []];
      this.write("250 2.1.0 Ok");
    } else if (verb === "RCPT") {
      await this.rcpt(/<([^>]*)>/.exec(line)?.[1]?.toLowerCase() ?? "");
    } else if (verb === "DATA") {
      if (!this.mail || this.rcpts.length === 0) return this.write("554 5.5.1 Error: no valid recipients");
      this.inData = true;
      this.buf = `\r\n${this.buf}`; // an empty body ends with ".\r\n" at once
      this.write("354 End data with <CR><LF>.<CR><LF>");
    } else if (verb === "RSET") {
      [this.mail, this.rcpts] = [false, []];
      this.write("250 2.0.0 Ok");
    } else if (verb === "NOOP") {
      this.write("250 2.0.0 Ok");
    } else if (verb === "QUIT") {
      this.write("221 2.0.0 Bye");
      this.socket.end();
      this.closed = true;
    } else {
      this.write("502 5.5.2 Error: command not recognized");
    }
  }

  private async rcpt(address: string): Promise<void> {
    const d = this.d;
    if (d.rcptDelayMs > 0) await sleep(d.rcptDelayMs);
    if (!this.mail) return this.write("503 5.5.1 Error: need MAIL command");
    if (d.rejectsUnknown && address.startsWith("nosuch")) {
      this.st.s.rcptUnknown++;
      return this.write(`550 5.1.1 <${address}>: Recipient address rejected: User unknown in virtual mailbox table`);
    }
    if (d.greylistMs > 0) {
      const now = Date.now();
      const g = this.st.greylist.get(address);
      g?.attempts.push(now);
      if (!g || now - g.first < d.greylistMs) {
        if (!g) {
          this.st.greylist.set(address, { first: now, refusals: 1, attempts: [now] });
          this.st.s.greylistRefused++;
        } else if (++g.refusals === 2) this.st.s.greylistRefusedTwice++;
        this.st.s.rcptGreylisted++;
        return this.write(
          `451 4.7.1 <${address}>: Recipient address rejected: Greylisted, see https://postgrey.schweikert.ch/help/${d.name}.html`,
        );
      }
    }
    this.st.s.rcptAccepted++;
    this.rcpts.push(address);
    this.write("250 2.1.5 Ok");
  }

  private async finishData(): Promise<void> {
    if (this.d.dataDelayMs > 0) await sleep(this.d.dataDelayMs);
    const at = Date.now();
    const st = this.st;
    st.s.transactions++;
    for (const r of this.rcpts) {
      const times = st.delivered.get(r);
      if (times) {
        times.push(at);
        st.s.duplicates++;
      } else st.delivered.set(r, [at]);
      st.s.delivered++;
    }
    [this.mail, this.rcpts] = [false, []];
    this.write(`250 2.0.0 Ok: queued as W${st.s.transactions.toString(36).toUpperCase()}`);
    this.lastDoneAt = Date.now();
    st.notify();
  }
}

/** Listens on host:port; resolves the port, or rejects (EADDRINUSE and the like). */
function listen(server: net.Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const fail = (e: Error) => reject(e);
    server.once("error", fail);
    server.listen(port, host, () => {
      server.off("error", fail);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

const closeServer = (s: net.Server) => new Promise<void>((r) => s.close(() => r()));

/** Starts the sink (see the header). */
export async function startWorldSink(world: World, opts: WorldSinkOptions = {}): Promise<WorldSink> {
  const st = new SinkState();
  const domains = opts.domains ?? world.domains;
  if (domains.length === 0) throw new Error("the sink needs at least one domain");
  let servers: net.Server[] = [];
  let port = opts.port ?? 0;
  for (let attempt = 0; ; attempt++) {
    servers = [];
    try {
      for (const d of domains) {
        const server = net.createServer((socket) => serve(st, d, socket));
        servers.push(server);
        port = await listen(server, d.address, port);
      }
      break;
    } catch (e) {
      await Promise.all(servers.map((s) => (s.listening ? closeServer(s) : Promise.resolve())));
      // The chosen port was taken on some address by another process: try another one for all.
      if (opts.port || attempt >= 5 || (e as NodeJS.ErrnoException).code !== "EADDRINUSE") throw e;
      port = 0;
    }
  }
  const waitFor = (pred: (s: SinkStats) => boolean, timeoutMs: number) =>
    new Promise<SinkStats>((resolve, reject) => {
      const check = () => {
        if (!pred(st.s)) return;
        done();
        resolve(st.s);
      };
      const timer = setTimeout(() => {
        done();
        const { idleGapsMs: _gaps, ...counts } = st.s;
        reject(new Error(`the world sink did not get there in ${timeoutMs} ms: ${JSON.stringify(counts)}`));
      }, timeoutMs);
      const tick = setInterval(check, 200);
      const done = () => {
        clearTimeout(timer);
        clearInterval(tick);
        st.waiters.delete(check);
      };
      st.waiters.add(check);
      check();
    });
  return {
    port,
    startClock: () => {
      st.clockStart = Date.now();
    },
    stats: () => st.s,
    deliveries: () => st.delivered,
    greylist: () => st.greylist,
    openSessions: () => Object.fromEntries(st.open),
    waitFor,
    reset: () => st.reset(opts.keepGreylist === true),
    stop: async () => {
      for (const s of st.sockets) s.destroy();
      await Promise.all(servers.map(closeServer));
    },
  };
}
