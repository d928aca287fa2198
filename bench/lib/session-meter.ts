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
 *     setMaxSessions(n)  changes S from now on (a server that raises or lowers its limit) and
 *                     starts the change's own figures (report().change).
 *   As the limiter fixture of bench:limiter, it also waits rcptDelayMs ± rcptJitterMs (uniform,
 *   from a seeded generator) before each RCPT TO reply, and counts the recipients of the messages
 *   it received, and the idle gaps of reused sessions (report().idleGapsMs): from the reply to a
 *   message's final dot to the next MAIL FROM on the same connection.
 *   Shaped like test/e2e/postfix/harness.ts's SmtpSink (host, port, messages, sessions,
 *   waitForMessages, dumpDirectory, stop), so code that takes one can take this.
 *
 * ERRORS
 *   waitForMessages rejects after timeoutMs with the count reached.
 */
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import { createRng } from "../../test/chaos/lib/rng";

/** Options of the meter. */
export interface SessionMeterOptions {
  /** Sessions admitted at once (S); more get 421 at the greeting. Default 5. */
  maxSessions?: number;
  /** Port on 127.0.0.1; default 0 (any free one). */
  port?: number;
  /** Wait before each RCPT TO reply, ms (default 0). */
  rcptDelayMs?: number;
  /** Uniform jitter around rcptDelayMs, ± ms (default 0). */
  rcptJitterMs?: number;
  /** Seed of the jitter (default 1). */
  seed?: number;
}

/** What happened after setMaxSessions(): figures from the change on. */
export interface ChangeReport {
  /** The new limit. */
  to: number;
  /** Seconds from the change until the sessions open first reached the new limit (null: never). */
  reachedAfterS: number | null;
  /** Sessions turned away (421) after the change. */
  deferred421: number;
  /** Messages received after the change. */
  messages: number;
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
  /** Recipients of the messages received (their "." answered 250). */
  recipients: number;
  /** Figures from the last setMaxSessions() on, or null. */
  change: ChangeReport | null;
  /** Refusals (421) while at least one open session was idle between transactions (a client's cached connection). */
  refusedWhileIdle: number;
  /**
   * Idle gaps of reused sessions: from the reply to one message's final dot to the next MAIL FROM
   * on the same connection, ms (the time a client holds the server's session between two
   * transactions), sorted.
   */
  idleGapsMs: number[];
}

/** A running meter. */
export interface SessionMeter {
  readonly host: string;
  readonly port: number;
  /** S at the start (see setMaxSessions). */
  readonly maxSessions: number;
  readonly dumpDirectory: null;
  messages(): number;
  sessions(): number;
  deferred421(): number;
  open(): number;
  waitForMessages(count: number, timeoutMs: number): Promise<number>;
  reset(): void;
  report(): SessionReport;
  setMaxSessions(n: number): void;
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
  recipients: number;
  refusedWhileIdle: number;
  idleGapsMs: number[];
  change: { to: number; atMs: number; reachedMs: number | null; deferred421: number; messages: number } | null;
}

function freshWindow(): Window {
  return {
    startMs: null,
    area: 0,
    lastStepMs: 0,
    areaAtMessage: 0,
    lastMessageMs: null,
    maxOpen: 0,
    messages: 0,
    sessions: 0,
    deferred421: 0,
    recipients: 0,
    refusedWhileIdle: 0,
    idleGapsMs: [],
    change: null,
  };
}

type SmtpError = Error & { responseCode?: number };

/** Starts the meter (see the header). */
export async function startSessionMeter(opts: SessionMeterOptions = {}): Promise<SessionMeter> {
  let maxSessions = opts.maxSessions ?? 5;
  const [delayMs, jitterMs, random] = [opts.rcptDelayMs ?? 0, opts.rcptJitterMs ?? 0, createRng(opts.seed ?? 1).next];
  const admitted = new Set<string>();
  /** Admitted sessions inside a transaction (MAIL FROM seen, message not yet received). */
  const inTransaction = new Set<string>();
  /** When each session's last message was answered (its idle gap starts). */
  const doneAt = new Map<string, number>();
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
        if (w.change) w.change.deferred421++;
        if (inTransaction.size < admitted.size) w.refusedWhileIdle++;
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
      if (w.change && w.change.reachedMs === null && admitted.size >= w.change.to) w.change.reachedMs = t;
      callback();
    },
    onRcptTo: (_address, _session, callback) => {
      const wait = Math.max(0, delayMs + (random() * 2 - 1) * jitterMs);
      if (wait > 0) setTimeout(() => callback(), wait);
      else callback();
    },
    onClose: (session) => {
      if (!admitted.has(session.id)) return;
      step(now());
      admitted.delete(session.id);
      inTransaction.delete(session.id);
      doneAt.delete(session.id);
    },
    onMailFrom: (_address, session, callback) => {
      // After setMaxSessions() lowered S, sessions beyond it are shed as they start their next
      // transaction (421, closed), as a server that lowered its limit sheds cached connections.
      if (admitted.size > maxSessions) {
        w.deferred421++;
        if (w.change) w.change.deferred421++;
        const e: SmtpError = new Error("4.7.0 Too many sessions, try again later");
        e.responseCode = 421;
        return callback(e);
      }
      inTransaction.add(session.id);
      const last = doneAt.get(session.id);
      if (last !== undefined) w.idleGapsMs.push(now() - last);
      doneAt.delete(session.id);
      callback();
    },
    onData: (stream, session, callback) => {
      stream.on("data", () => undefined);
      stream.on("end", () => {
        const t = now();
        step(t);
        w.messages++;
        w.recipients += session.envelope.rcptTo.length;
        inTransaction.delete(session.id);
        if (w.change) w.change.messages++;
        w.areaAtMessage = w.area;
        w.lastMessageMs = t;
        callback();
        doneAt.set(session.id, now());
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
      if (Date.now() > deadline)
        throw new Error(`the session meter has ${w.messages} of ${count} messages after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return w.messages;
  };

  const report = (): SessionReport => {
    const windowMs = w.startMs === null || w.lastMessageMs === null ? 0 : w.lastMessageMs - w.startMs;
    return {
      meanOpen: windowMs > 0 ? w.areaAtMessage / windowMs : 0,
      windowMs,
      maxOpen: w.maxOpen,
      messages: w.messages,
      sessions: w.sessions,
      deferred421: w.deferred421,
      messagesPerSession: w.sessions > 0 ? w.messages / w.sessions : 0,
      recipients: w.recipients,
      refusedWhileIdle: w.refusedWhileIdle,
      idleGapsMs: [...w.idleGapsMs].sort((a, b) => a - b),
      change: w.change && {
        to: w.change.to,
        deferred421: w.change.deferred421,
        messages: w.change.messages,
        reachedAfterS: w.change.reachedMs === null ? null : (w.change.reachedMs - w.change.atMs) / 1000,
      },
    };
  };

  return {
    host: "127.0.0.1",
    port,
    maxSessions,
    dumpDirectory: null,
    messages: () => w.messages,
    sessions: () => w.sessions,
    deferred421: () => w.deferred421,
    open: () => admitted.size,
    waitForMessages,
    reset: () => {
      w = freshWindow();
    },
    report,
    setMaxSessions: (n: number) => {
      maxSessions = n;
      const t = now();
      w.change = { to: n, atMs: t, reachedMs: admitted.size >= n ? t : null, deferred421: 0, messages: 0 };
    },
    stop: () => new Promise<void>((r) => server.close(() => r())),
  };
}
