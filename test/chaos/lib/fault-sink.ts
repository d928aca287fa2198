/**
 * A small SMTP receiver on node:net that misbehaves on purpose, one fault per sink, for the
 * SMTP fault campaign. Healthy sessions speak plain RFC 5321 (EHLO, MAIL, RCPT, DATA, RSET,
 * NOOP, QUIT); the fault applies to the first `faultySessions` sessions (or to every session).
 *
 * DESCRIPTION
 *   startFaultSink({ fault, faultySessions })  listens on 127.0.0.1, a free port. Faults:
 *     healthy           a healthy receiver (the bystander of the greeting timeout).
 *     refused           nothing listens until open() is called (connection refused).
 *     greeting-timeout  the connection is accepted and no greeting is ever sent.
 *     greeting-421      "421 4.3.2" instead of the greeting, then close.
 *     session-cap       a second simultaneous session gets "421 4.7.0 Too many connections",
 *                       and MAIL after 3 transactions in a session "421 4.7.0 Too many
 *                       messages in this session" (then close).
 *     drop-in-data      the connection is dropped after the first DATA bytes arrive.
 *     drop-after-dot    the whole message arrives (kept as a received copy), then the
 *                       connection is dropped before the reply to the final dot.
 *     tls-fail          STARTTLS is offered; after "220 Ready" garbage is sent instead of a
 *                       TLS handshake and the connection closed.
 *     rcpt-452          the third and later RCPT of a transaction get "452 4.5.3 Too many
 *                       recipients" (every session: the client must retry the rest).
 *     size-552          the reply to the final dot is "552 5.3.4 Message too big" (every session).
 *     trickle           every reply is written one byte per 100 ms (every session).
 *     invalid-reply     the EHLO reply is a line without a reply code.
 *   Returns { port, received (copies: mailFrom, rcptTo, data, atMs, dropped), sessions(),
 *   open(), close() }.
 */
import { createServer, type Server, type Socket } from "node:net";
import { freePort } from "../../../scripts/lib/dev-server";

/** The faults a sink can have. */
export type Fault =
  | "healthy"
  | "refused"
  | "greeting-timeout"
  | "greeting-421"
  | "session-cap"
  | "drop-in-data"
  | "drop-after-dot"
  | "tls-fail"
  | "rcpt-452"
  | "size-552"
  | "trickle"
  | "invalid-reply";

/** A message as the sink received it. */
export interface Received {
  mailFrom: string;
  rcptTo: string[];
  data: string;
  atMs: number;
  /** The connection was dropped before the reply to the final dot. */
  dropped: boolean;
}

/** A running fault sink. */
export interface FaultSink {
  port: number;
  received: Received[];
  sessions(): number;
  open(): Promise<void>;
  close(): Promise<void>;
}

/** Sink options. */
export interface FaultSinkOptions {
  fault: Fault;
  /** Sessions (0-based order of arrival) below this number misbehave. Default Infinity. */
  faultySessions?: number;
}

type Session = {
  sock: Socket;
  faulty: boolean;
  from: string;
  rcpts: string[];
  inData: boolean;
  data: string;
  buf: string;
  out: Promise<void>;
  txns: number;
};

/** Transactions a session-cap sink allows per session. */
const TXNS_PER_SESSION = 3;

function writer(fault: Fault): (s: Session, text: string) => void {
  return (s, text) => {
    if (fault !== "trickle") {
      if (!s.sock.destroyed) s.sock.write(text);
      return;
    }
    // One byte every 100 ms, in order across replies.
    s.out = s.out.then(async () => {
      for (const ch of Buffer.from(text)) {
        if (s.sock.destroyed) return;
        s.sock.write(Buffer.from([ch]));
        await new Promise((r) => setTimeout(r, 100));
      }
    });
  };
}

/** Starts a sink with one fault (see the header). */
export async function startFaultSink(opts: FaultSinkOptions): Promise<FaultSink> {
  const { fault } = opts;
  const faultySessions = opts.faultySessions ?? Infinity;
  const received: Received[] = [];
  const sockets = new Set<Socket>();
  const write = writer(fault);
  let sessions = 0;
  let active = 0;

  const command = (s: Session, line: string) => {
    const verb = line.slice(0, 4).toUpperCase();
    const f = s.faulty;
    if (verb === "EHLO") {
      if (f && fault === "invalid-reply") return write(s, "hello, this is not an SMTP reply\r\n");
      const tls = fault === "tls-fail" && f ? "250-STARTTLS\r\n" : "";
      return write(s, `250-sink.chaos\r\n${tls}250-8BITMIME\r\n250 SIZE 10485760\r\n`);
    }
    if (verb === "HELO") return write(s, "250 sink.chaos\r\n");
    if (verb === "STAR" && fault === "tls-fail" && f) {
      write(s, "220 2.0.0 Ready to start TLS\r\n");
      s.sock.write("this is not a TLS ServerHello\r\n");
      setTimeout(() => s.sock.destroy(), 50);
      return;
    }
    if (verb === "MAIL" && fault === "session-cap" && s.txns >= TXNS_PER_SESSION) {
      write(s, "421 4.7.0 Too many messages in this session, closing\r\n");
      setTimeout(() => s.sock.destroy(), 20);
      return;
    }
    if (verb === "MAIL") {
      s.from = line.slice(10).trim();
      s.rcpts = [];
      return write(s, "250 2.1.0 Ok\r\n");
    }
    if (verb === "RCPT") {
      if (fault === "rcpt-452" && f && s.rcpts.length >= 2) return write(s, "452 4.5.3 Too many recipients\r\n");
      s.rcpts.push(line.slice(8).trim().replace(/^<|>$/g, ""));
      return write(s, "250 2.1.5 Ok\r\n");
    }
    if (verb === "DATA") {
      if (s.rcpts.length === 0) return write(s, "554 5.5.1 No valid recipients\r\n");
      s.inData = true;
      s.data = "";
      return write(s, "354 End data with <CR><LF>.<CR><LF>\r\n");
    }
    if (verb === "RSET") {
      s.from = "";
      s.rcpts = [];
      return write(s, "250 2.0.0 Ok\r\n");
    }
    if (verb === "NOOP") return write(s, "250 2.0.0 Ok\r\n");
    if (verb === "QUIT") {
      write(s, "221 2.0.0 Bye\r\n");
      void s.out.then(() => s.sock.end());
      return;
    }
    write(s, "502 5.5.2 Command not recognized\r\n");
  };

  const endOfData = (s: Session) => {
    s.inData = false;
    const copy: Received = { mailFrom: s.from, rcptTo: [...s.rcpts], data: s.data, atMs: Date.now(), dropped: false };
    if (fault === "drop-after-dot" && s.faulty) {
      received.push({ ...copy, dropped: true });
      s.sock.destroy();
      return;
    }
    if (fault === "size-552" && s.faulty) return write(s, "552 5.3.4 Message too big for this system\r\n");
    received.push(copy);
    s.txns++;
    write(s, "250 2.0.0 Ok: queued\r\n");
  };

  const feed = (s: Session, chunk: string) => {
    s.buf += chunk;
    for (;;) {
      if (s.inData) {
        if (fault === "drop-in-data" && s.faulty && s.buf.length > 0) {
          s.sock.destroy();
          return;
        }
        const end = s.buf.indexOf("\r\n.\r\n");
        const atStart = s.data === "" && s.buf.startsWith(".\r\n");
        if (end < 0 && !atStart) {
          s.data += s.buf.slice(0, Math.max(0, s.buf.length - 4));
          s.buf = s.buf.slice(Math.max(0, s.buf.length - 4));
          return;
        }
        const cut = atStart ? 0 : end + 2;
        s.data += s.buf.slice(0, cut);
        s.buf = s.buf.slice(cut + 3);
        endOfData(s);
        continue;
      }
      const nl = s.buf.indexOf("\r\n");
      if (nl < 0) return;
      const line = s.buf.slice(0, nl);
      s.buf = s.buf.slice(nl + 2);
      command(s, line);
    }
  };

  const onConnection = (sock: Socket) => {
    sockets.add(sock);
    const index = sessions++;
    active++;
    sock.on("close", () => {
      active--;
      sockets.delete(sock);
    });
    sock.on("error", () => undefined);
    const s: Session = {
      sock,
      faulty: index < faultySessions,
      from: "",
      rcpts: [],
      inData: false,
      data: "",
      buf: "",
      out: Promise.resolve(),
      txns: 0,
    };
    if (fault === "session-cap" && active > 1) {
      sock.end("421 4.7.0 Too many connections, try again later\r\n");
      return;
    }
    if (s.faulty && fault === "greeting-timeout") return;
    if (s.faulty && fault === "greeting-421") {
      sock.end("421 4.3.2 Service not available, closing channel\r\n");
      return;
    }
    sock.setEncoding("latin1");
    sock.on("data", (c: string) => feed(s, c));
    write(s, "220 sink.chaos ESMTP chaos\r\n");
  };

  const port = await freePort();
  let server: Server | null = null;
  const open = async () => {
    if (server) return;
    const srv = createServer(onConnection);
    await new Promise<void>((resolve, reject) => {
      srv.once("error", reject);
      srv.listen(port, "127.0.0.1", () => resolve());
    });
    server = srv;
  };
  if (fault !== "refused") await open();
  const close = async () => {
    for (const s of sockets) s.destroy();
    const srv = server;
    server = null;
    if (srv) await new Promise<void>((r) => srv.close(() => r()));
  };
  return { port, received, sessions: () => sessions, open, close };
}
