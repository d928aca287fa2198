/**
 * An SMTP submission client for feeding a private Postfix the mail world's arrival stream: a pool
 * of persistent connections to one smtpd, each carrying one message at a time (MAIL, RCPT…, DATA),
 * so a message is submitted the moment it arrives, as an application's mail library would.
 *
 * DESCRIPTION
 *   createSubmitter({ host, port, connections })  the pool (connections: at most this many open).
 *     submit(message)  resolves with the reply to the final dot (250) once the server took it;
 *                      rejects on any other reply or a lost connection (the message may then not
 *                      have been taken).
 *     close()          QUITs every connection.
 *   mixBody(...)       a message's text: headers and about 1 KiB of body, lines never starting
 *                      with a dot.
 *
 * INVARIANTS
 *   A connection carries one transaction at a time; a connection that failed is dropped and a new
 *   one opened for the next message.
 */
import net, { type Socket } from "node:net";

/** A message to submit. */
export interface Submission {
  from: string;
  to: string[];
  /** The message text with CRLF line ends, no dot-stuffing needed (no line starts with "."). */
  data: string;
}

/** A pool of submission connections. */
export interface Submitter {
  submit(m: Submission): Promise<string>;
  close(): Promise<void>;
}

/** One connection: a line reader over a socket. */
class Conn {
  private buf = "";
  private waiting: ((reply: string) => void) | null = null;
  private lines: string[] = [];
  dead = false;

  constructor(readonly socket: Socket) {
    socket.setEncoding("latin1");
    socket.setNoDelay(true);
    socket.on("data", (d: string) => {
      this.buf += d;
      for (let eol = this.buf.indexOf("\r\n"); eol >= 0; eol = this.buf.indexOf("\r\n")) {
        const line = this.buf.slice(0, eol);
        this.buf = this.buf.slice(eol + 2);
        this.lines.push(line);
        // A reply ends with a line "NNN text" (a space, not a dash, after the code).
        if (/^\d{3}(?: |$)/.test(line)) {
          const reply = this.lines.join("\n");
          this.lines = [];
          const w = this.waiting;
          this.waiting = null;
          w?.(reply);
        }
      }
    });
    const fail = () => {
      this.dead = true;
      const w = this.waiting;
      this.waiting = null;
      w?.("000 connection lost");
    };
    socket.on("close", fail);
    socket.on("error", fail);
  }

  /** Sends `line` (or nothing) and reads one reply. */
  async send(line: string | null): Promise<string> {
    if (this.dead) return "000 connection lost";
    const reply = new Promise<string>((resolve) => {
      this.waiting = resolve;
    });
    if (line !== null) this.socket.write(line);
    return reply;
  }
}

const ok = (reply: string, code: string) => reply.startsWith(code);

/** Opens a connection and says EHLO; rejects unless greeted. */
async function open(host: string, port: number): Promise<Conn> {
  const socket = net.connect({ host, port });
  const conn = new Conn(socket);
  const greeting = await conn.send(null);
  if (!ok(greeting, "220")) throw new Error(`submission: greeting ${greeting}`);
  const ehlo = await conn.send("EHLO submitter.cohort.test\r\n");
  if (!ok(ehlo, "250")) throw new Error(`submission: EHLO ${ehlo}`);
  return conn;
}

/** The pool (see the header). */
export function createSubmitter(o: { host: string; port: number; connections: number }): Submitter {
  const idle: Conn[] = [];
  let opened = 0;
  const queue: (() => void)[] = [];
  const take = async (): Promise<Conn> => {
    for (;;) {
      const c = idle.pop();
      if (c && !c.dead) return c;
      if (!c) break;
      opened--;
    }
    if (opened < o.connections) {
      opened++;
      try {
        return await open(o.host, o.port);
      } catch (e) {
        opened--;
        throw e;
      }
    }
    await new Promise<void>((r) => queue.push(r));
    return take();
  };
  const give = (c: Conn) => {
    if (c.dead) opened--;
    else idle.push(c);
    queue.shift()?.();
  };
  const submit = async (m: Submission): Promise<string> => {
    const c = await take();
    try {
      const rcpts = m.to.map((t): [string, string] => [`RCPT TO:<${t}>\r\n`, "250"]);
      const steps: [string, string][] = [[`MAIL FROM:<${m.from}>\r\n`, "250"], ...rcpts, ["DATA\r\n", "354"]];
      for (const [line, want] of steps) {
        const reply = await c.send(line);
        if (!ok(reply, want)) {
          await c.send("RSET\r\n");
          throw new Error(`submission: ${line.trim()} answered ${reply}`);
        }
      }
      const done = await c.send(`${m.data}\r\n.\r\n`);
      if (!ok(done, "250")) throw new Error(`submission: the final dot answered ${done}`);
      return done;
    } finally {
      give(c);
    }
  };
  return {
    submit,
    close: async () => {
      await Promise.all(
        idle.splice(0).map(async (c) => {
          await c.send("QUIT\r\n");
          c.socket.destroy();
        }),
      );
    },
  };
}

const FILLER = "The quick brown fox jumps over the lazy dog, again and again, for a kilobyte of text.";

/** A message's text (see the header): ~1 KiB of body like the relay side's. */
export function mixBody(o: { from: string; to: string[]; subject: string; id: string }): string {
  const lines = [
    `From: Mix <${o.from}>`,
    `To: ${o.to.join(", ")}`,
    `Subject: ${o.subject}`,
    `Message-ID: <${o.id}@mix.cohort.test>`,
    `Date: ${new Date().toUTCString()}`,
    `X-Mix-Id: ${o.id}`,
    "MIME-Version: 1.0",
    "Content-Type: text/plain; charset=utf-8",
    "",
    ...Array.from({ length: 12 }, () => FILLER),
  ];
  return lines.join("\r\n");
}
