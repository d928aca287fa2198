/**
 * An SMTP sink (smtp-server from npm) on 127.0.0.1 that admits at most S sessions at once and
 * measures, as the server sees it, how many sessions a client keeps open: bench:sessions.
 *
 * DESCRIPTION
 *   startSessionMeter({ maxSessions, port })  listens (port 0 = any free one) and accepts every
 *       message (no STARTTLS, no AUTH, bodies discarded). A connection that arrives while S
 *       sessions are open gets "421 4.7.0 Too many sessions" at the greeting and is closed; it
 *       never counts as open. A session counts as open from smtp-server's onConnect (the
 *       greeting decision, after its 100 ms early-talker pause) until the connection closes.
 *   Returns a SessionMeter:
 *     messages()      messages received ("." answered 250) since the last reset.
 *     sessions()      sessions admitted since the last reset; deferred421() those turned away.
 *     open()          sessions open now.
 *     waitForMessages(count, timeoutMs)  resolves when messages() reaches count.
 *     reset()         starts a new measurement window (counters to zero; sessions already open
 *                     stay open and are counted from the first new connection on).
 *     report()        the window's figures: the mean number of sessions open, integrated
 *                     exactly over time (every open/close is a step) from the first admitted
 *                     connection to the last message received; the most open at once; counts.
 *     stop()          closes the server.
 *   Shaped like test/e2e/postfix/harness.ts's SmtpSink (host, port, messages, sessions,
 *   waitForMessages, dumpDirectory, stop), so code that takes one can take this.
 *
 * ERRORS
 *   waitForMessages rejects after timeoutMs with the count reached.
 */
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";

/** Options of the meter. */
export interface SessionMeterOptions {
  /** Sessions admitted at once (S); more get 421 at the greeting. Default 5. */
  maxSessions?: number;
  /** Port on 127.0.0.1; default 0 (any free one). */
  port?: number;
}

/** A measurement window's figures. */
export interface SessionReport {
  /** Mean sessions open from the first admitted connection to the last message. */
  meanOpen: number;
  /** Length of that window, ms (0 when nothing arrived). */
  windowMs: number;
  maxOpen: number;
  messages: number;
  sessions: number;
  deferred421: number;
  /** Messages per admitted session. */
  messagesPerSession: number;
}

/** A running meter. */
export interface SessionMeter {
  readonly host: string;
  readonly port: number;
  readonly maxSessions: number;
  readonly dumpDirectory: null;
  messages(): number;
  sessions(): number;
  deferred421(): number;
  open(): number;
  waitForMessages(count: number, timeoutMs: number): Promise<number>;
  reset(): void;
  report(): SessionReport;
  stop(): Promise<void>;
}

/** The running state of a window: an exact step integral of open sessions over time. */
interface Window {
  startMs: number | null;
  /** ∫ open dt from startMs to lastStepMs, in session·ms. */
  area: number;
  lastStepMs: number;
  /** The integral and time at the last message received. */
  areaAtMessage: number;
  lastMessageMs: number | null;
  maxOpen: number;
  messages: number;
  sessions: number;
  deferred421: number;
}

function freshWindow(): Window {
  return { startMs: null, area: 0, lastStepMs: 0, areaAtMessage: 0, lastMessageMs: null, maxOpen: 0, messages: 0, sessions: 0, deferred421: 0 };
}

type SmtpError = Error & { responseCode?: number };

/** Starts the meter (see the header). */
export async function startSessionMeter(opts: SessionMeterOptions = {}): Promise<SessionMeter> {
  const maxSessions = opts.maxSessions ?? 5;
  const admitted = new Set<string>();
  let w = freshWindow();
  const now = () => performance.now();
  // Advances the integral to `t` with the number open until then.
  const step = (t: number) => {
    if (w.startMs !== null) w.area += admitted.size * (t - w.lastStepMs);
    w.lastStepMs = t;
  };

  const server = new SMTPServer({
    logger: false,
    disableReverseLookup: true,
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    hideENHANCEDSTATUSCODES: false,
    closeTimeout: 50,
    onConnect: (session, callback) => {
      if (admitted.size >= maxSessions) {
        w.deferred421++;
        const e: SmtpError = new Error("4.7.0 Too many sessions, try again later");
        e.responseCode = 421;
        return callback(e);
      }
      const t = now();
      step(t);
      if (w.startMs === null) [w.startMs, w.lastStepMs] = [t, t];
      admitted.add(session.id);
      w.sessions++;
      w.maxOpen = Math.max(w.maxOpen, admitted.size);
      callback();
    },
    onClose: (session) => {
      if (!admitted.has(session.id)) return;
      step(now());
      admitted.delete(session.id);
    },
    onData: (stream, _session, callback) => {
      stream.on("data", () => undefined);
      stream.on("end", () => {
        const t = now();
        step(t);
        w.messages++;
        w.areaAtMessage = w.area;
        w.lastMessageMs = t;
        callback();
      });
    },
  });
  // A client that resets its connection is not the meter's problem.
  server.on("error", () => undefined);
  const port = await new Promise<number>((resolve, reject) => {
    server.server.once("error", reject);
    server.server.listen(opts.port ?? 0, "127.0.0.1", () => resolve((server.server.address() as AddressInfo).port));
  });

  const waitForMessages = async (count: number, timeoutMs: number) => {
    const deadline = Date.now() + timeoutMs;
    while (w.messages < count) {
      if (Date.now() > deadline) throw new Error(`the session meter has ${w.messages} of ${count} messages after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return w.messages;
  };

  const report = (): SessionReport => {
    const windowMs = w.startMs === null || w.lastMessageMs === null ? 0 : w.lastMessageMs - w.startMs;
    return {
      meanOpen: windowMs > 0 ? w.areaAtMessage / windowMs : 0,
      windowMs, maxOpen: w.maxOpen, messages: w.messages, sessions: w.sessions, deferred421: w.deferred421,
      messagesPerSession: w.sessions > 0 ? w.messages / w.sessions : 0,
    };
  };

  return {
    host: "127.0.0.1", port, maxSessions, dumpDirectory: null,
    messages: () => w.messages, sessions: () => w.sessions, deferred421: () => w.deferred421, open: () => admitted.size,
    waitForMessages,
    reset: () => { w = freshWindow(); },
    report,
    stop: () => new Promise<void>((r) => server.close(() => r())),
  };
}
