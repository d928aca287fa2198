// Test-only: drives the pure SMTP session against a scripted server, with no I/O.
// The script maps client command lines to server moves; replies go through the real
// reply parser, as they would in the adapter.

import { createSessionConfig, type SessionConfigInput, type SmtpStep } from "../../../worker/smtp/core/config";
import { createNetworkFailure, createProtocolFailure } from "../../../worker/smtp/core/errors";
import { createReplyParser, feedReplyParser, type ReplyParser } from "../../../worker/smtp/core/reply";
import { advanceSession, closeIdleSession, resumeSession, startSession } from "../../../worker/smtp/core/session";
import type { SessionState } from "../../../worker/smtp/core/state";
import type { MessageEnvelope, SessionAction, SessionEvent, SessionOutcome } from "../../../worker/smtp/core/types";

/** What the scripted server does in answer to one client move. */
export type ServerMove =
  | string // raw reply text, CRLF-terminated lines (a trailing CRLF is added if missing)
  | { drop: string } // the connection is lost (or refused, for "<connect>")
  | { silent: true } // nothing comes back: the session will time out
  | null; // no answer expected (e.g. a discarded QUIT)

/**
 * Keys are command prefixes ("MAIL", "RCPT TO:<b@y>") or pseudo-commands: "<connect>" (the
 * greeting), "<starttls>" ("ok" or a drop), "<body>" ("ok" or a drop while the body is
 * written), "<dot>" (reply to the end of data). The longest
 * matching key wins. An array is consumed in order; its last entry then repeats.
 */
export type Script = Record<string, ServerMove | ServerMove[]>;

const DEFAULTS: Script = {
  "<connect>": "220 mx.test ESMTP",
  "<starttls>": "ok",
  "<body>": "ok",
  "<dot>": "250 2.0.0 queued",
  EHLO: "250 mx.test",
  HELO: "250 mx.test",
  STARTTLS: "220 2.0.0 ready",
  AUTH: "235 2.7.0 ok",
  MAIL: "250 2.1.0 ok",
  RCPT: "250 2.1.5 ok",
  DATA: "354 go ahead",
  RSET: "250 2.0.0 ok",
  QUIT: "221 2.0.0 bye",
};

/** Everything a scripted run produced. */
export interface ScriptedRun {
  outcome: SessionOutcome;
  /** Each "send" action's data, in order (one entry per write). */
  sends: string[];
  /** All actions in order. */
  actions: SessionAction[];
  /** Every wait the session announced, in order. */
  waits: { step: SmtpStep; timeoutSec: number }[];
  /** Final state. */
  state: SessionState;
}

/** Runs a whole session against `script`; every state is frozen to prove purity. */
export function runScripted(
  configInput: Partial<SessionConfigInput>,
  messages: MessageEnvelope[],
  script: Script,
): ScriptedRun {
  const cfg = createSessionConfig({ heloName: "client.test", remoteHost: "mx.test[192.0.2.1]", ...configInput });
  const server = new ScriptedServer(script);
  const run = { sends: [] as string[], actions: [] as SessionAction[], waits: [] as ScriptedRun["waits"] };
  let step = startSession(cfg, messages);
  for (let guard = 0; guard < 10_000; guard++) {
    deepFreeze(step.state);
    if (step.state.wait) run.waits.push(step.state.wait);
    for (const action of step.actions) {
      run.actions.push(action);
      if (action.kind === "done") return { ...run, outcome: action.outcome, state: step.state };
      if (action.kind === "send") run.sends.push(action.data);
      server.perform(action);
    }
    // A server with nothing to say makes the session wait until its timeout.
    step = advanceSession(step.state, server.next() ?? { kind: "timeout" }, cfg);
  }
  throw new Error("session did not finish");
}

/** What a kept-open run produced: the results of each batch as it went idle, then the close. */
export interface CachedRun extends ScriptedRun {
  /** Per batch: the results of its messages, read when the session went idle (or ended). */
  batches: SessionOutcome["transactions"][];
}

/**
 * Runs a kept-open session (a cached connection): the first batch starts it, each further batch
 * is sent with resumeSession once it is idle, then closeIdleSession ends it. Stops early when the
 * session ends on its own (the remaining batches are not sent).
 */
export function runScriptedCached(
  configInput: Partial<SessionConfigInput>,
  batches: MessageEnvelope[][],
  script: Script,
): CachedRun {
  const cfg = createSessionConfig({ heloName: "client.test", remoteHost: "mx.test[192.0.2.1]", ...configInput });
  const server = new ScriptedServer(script);
  const run = {
    sends: [] as string[],
    actions: [] as SessionAction[],
    waits: [] as ScriptedRun["waits"],
    batches: [] as SessionOutcome["transactions"][],
  };
  let step = startSession(cfg, batches[0] ?? [], { keepOpen: true });
  let next = 1;
  let from = 0;
  const take = (state: SessionState) => {
    run.batches.push(state.results.slice(from).map((r) => r!));
    from = state.results.length;
  };
  for (let guard = 0; guard < 10_000; guard++) {
    deepFreeze(step.state);
    if (step.state.wait) run.waits.push(step.state.wait);
    let idle = false;
    for (const action of step.actions) {
      run.actions.push(action);
      if (action.kind === "done") {
        if (from < step.state.results.length) take(step.state);
        return { ...run, outcome: action.outcome, state: step.state };
      }
      if (action.kind === "idle") idle = true;
      if (action.kind === "send") run.sends.push(action.data);
      server.perform(action);
    }
    if (idle) {
      take(step.state);
      const batch = batches[next++];
      step = batch ? resumeSession(step.state, batch, cfg) : closeIdleSession(step.state, cfg);
      continue;
    }
    step = advanceSession(step.state, server.next() ?? { kind: "timeout" }, cfg);
  }
  throw new Error("session did not finish");
}

/** The scripted peer: turns client actions into queued session events. */
class ScriptedServer {
  private readonly moves: Script;
  private readonly queue: SessionEvent[] = [];
  private parser: ReplyParser = createReplyParser();
  private lost = false;

  constructor(script: Script) {
    this.moves = Object.fromEntries(
      Object.entries({ ...DEFAULTS, ...script }).map(([k, v]) => [k, Array.isArray(v) ? [...v] : v]),
    );
  }

  /** The next event for the session, if any. */
  next(): SessionEvent | undefined {
    return this.queue.shift();
  }

  /** Reacts to one client action. */
  perform(action: SessionAction): void {
    switch (action.kind) {
      case "connect":
        this.lost = false;
        this.parser = createReplyParser();
        this.queue.length = 0;
        this.answer("<connect>", { kind: "connected" });
        return;
      case "send":
        for (const line of action.data.split("\r\n").slice(0, -1)) this.answer(line);
        return;
      case "starttls":
        this.answer("<starttls>", { kind: "tls-established" });
        return;
      case "stream-body":
        if (this.answer("<body>", { kind: "body-sent" })) this.answer("<dot>");
        return;
      default:
        return;
    }
  }

  /**
   * Queues the scripted move for `key`. A string is a reply, except "ok", which
   * queues `onOk`; `onOk` also precedes a reply (a greeting after "connected").
   * Returns false when the move lost the connection or went silent.
   */
  private answer(key: string, onOk?: SessionEvent): boolean {
    if (this.lost) return false;
    const move = pickMove(this.moves, key);
    if (move !== null && typeof move === "object") {
      if ("silent" in move) return false;
      this.lost = true;
      const dsn = key === "<starttls>" ? "4.7.5" : "4.4.2";
      this.queue.push({ kind: "failed", failure: createNetworkFailure(move.drop, dsn) });
      return false;
    }
    if (onOk) this.queue.push(onOk);
    if (move !== null && move !== "ok") this.reply(move);
    return true;
  }

  /** Feeds reply text through the real parser, as the adapter does. */
  private reply(text: string): void {
    const fed = feedReplyParser(this.parser, text.endsWith("\n") ? text : `${text}\r\n`);
    this.parser = fed.parser;
    for (const reply of fed.replies) this.queue.push({ kind: "reply", reply });
    if (fed.error) this.queue.push({ kind: "failed", failure: createProtocolFailure(fed.error.text) });
  }
}

/** Finds the move for a command: exact key, else the longest key that prefixes it. */
function pickMove(moves: Script, command: string): ServerMove {
  const upper = command.toUpperCase();
  const key =
    command in moves
      ? command
      : Object.keys(moves)
          .filter((k) => upper.startsWith(k.toUpperCase()))
          .sort((a, b) => b.length - a.length)[0];
  if (key === undefined) throw new Error(`script has no move for ${JSON.stringify(command)}`);
  const entry = moves[key];
  if (!Array.isArray(entry)) return entry ?? null;
  const move = entry.length > 1 ? entry.shift() : entry[0];
  return move ?? null;
}

/** Freezes an object graph, so any mutation by the core throws in strict mode. */
function deepFreeze(value: unknown): void {
  if (typeof value !== "object" || value === null || Object.isFrozen(value)) return;
  if (value instanceof Uint8Array) return;
  Object.freeze(value);
  for (const v of Object.values(value)) deepFreeze(v);
}

/** Builds an envelope with defaults. */
export function envelope(partial: Partial<MessageEnvelope> & { rcptTo: string[] }): MessageEnvelope {
  return {
    id: "m1",
    mailFrom: "sender@example.org",
    sizeBytes: 100,
    eightBitMime: false,
    smtpUtf8: false,
    ...partial,
  };
}
