/*
 * NAME
 *   socks5-handshake - the client side of a SOCKS5 CONNECT handshake as a
 *                      pure state machine
 *
 * SUMMARY
 *   Greeting, optional username/password authentication, CONNECT: the
 *   sequence of RFC 1928 and RFC 1929, fed with whatever bytes the proxy
 *   sends and answering with the bytes to write next.
 *
 * DESCRIPTION
 *   startSocks5Handshake(target, credentials) returns the first step: the
 *   greeting to send. Without credentials only "no authentication" (0x00) is
 *   offered; with credentials both 0x00 and username/password (0x02) are,
 *   and the proxy picks.
 *
 *   feedSocks5Handshake(state, bytes) takes the next chunk the proxy sent, in
 *   pieces of any size, and returns the next step: bytes to send (or null),
 *   and, once known, the result. "established" carries the proxy's bound
 *   address and `rest`: bytes that arrived after the CONNECT reply, which
 *   already belong to the tunnelled stream (an SMTP greeting, say).
 *
 *   endSocks5Handshake(state, why) gives the error for a proxy that closed
 *   the connection, or a wait that timed out, in the current phase.
 *
 * INVARIANTS
 *   A step has at most one of `send` and `result`. After a result the state
 *   is final ("done" or "failed") and further input is refused. Bytes the
 *   proxy sends before it has an answer to give (between messages) are a
 *   protocol error, never silently dropped.
 *
 * ERRORS
 *   None thrown: failures come back as result.kind "failed" with a
 *   Socks5Error (see socks5.ts for the codes).
 */

import {
  SOCKS5_METHOD,
  Socks5Error,
  describeReplyCode,
  encodeConnectRequest,
  encodeGreeting,
  encodeUserPassAuth,
  isSocks5Error,
  parseServerMessage,
  type Socks5BoundAddress,
  type Socks5Expect,
  type Socks5ServerMessage,
  type Socks5Target,
} from "./socks5";

/** RFC 1929 credentials. */
export interface Socks5Credentials {
  username: string;
  password: string;
}

/** Where the handshake is. */
export type Socks5Phase = Socks5Expect | "done" | "failed";

/** Handshake state; plain data. */
export interface Socks5HandshakeState {
  phase: Socks5Phase;
  target: Socks5Target;
  credentials: Socks5Credentials | null;
  /** Bytes received but not yet parsed (an incomplete message). */
  buffer: Uint8Array;
}

/** How the handshake ended. */
export type Socks5Result =
  { kind: "established"; bound: Socks5BoundAddress; rest: Uint8Array } | { kind: "failed"; error: Socks5Error };

/** What to do next. */
export interface Socks5Step {
  state: Socks5HandshakeState;
  /** Bytes to write to the proxy now. */
  send: Uint8Array | null;
  /** Non-null when the handshake is over. */
  result: Socks5Result | null;
}

const PHASE_NAMES: Readonly<Record<Socks5Phase, string>> = {
  method: "method selection",
  auth: "authentication",
  connect: "CONNECT",
  done: "tunnel",
  failed: "failed handshake",
};

/** Starts a handshake that will CONNECT to `target`. */
export function startSocks5Handshake(target: Socks5Target, credentials: Socks5Credentials | null): Socks5Step {
  const state: Socks5HandshakeState = { phase: "method", target, credentials, buffer: new Uint8Array(0) };
  try {
    // Encode everything up front so a bad target or credential fails before any byte is sent.
    encodeConnectRequest(target);
    if (credentials) encodeUserPassAuth(credentials.username, credentials.password);
    const methods = credentials ? [SOCKS5_METHOD.none, SOCKS5_METHOD.userPass] : [SOCKS5_METHOD.none];
    return { state, send: encodeGreeting(methods), result: null };
  } catch (e) {
    return fail(state, asSocks5Error(e));
  }
}

/** Feeds bytes from the proxy; returns what to send and, when over, the result. */
export function feedSocks5Handshake(state: Socks5HandshakeState, bytes: Uint8Array): Socks5Step {
  if (state.phase === "done" || state.phase === "failed") {
    return fail(state, new Socks5Error("protocol", "SOCKS5 handshake fed after it ended"));
  }
  const buffer = concat(state.buffer, bytes);
  let parsed: ReturnType<typeof parseServerMessage>;
  try {
    parsed = parseServerMessage(state.phase, buffer);
  } catch (e) {
    return fail(state, asSocks5Error(e));
  }
  if (parsed === null) return { state: { ...state, buffer }, send: null, result: null };
  const rest = buffer.subarray(parsed.consumed);
  const step = react({ ...state, buffer: new Uint8Array(0) }, parsed.message, rest);
  if (step.send && rest.length > 0) {
    return fail(
      state,
      new Socks5Error(
        "protocol",
        `SOCKS5 proxy sent ${rest.length} unexpected bytes after its ${PHASE_NAMES[state.phase]} reply`,
      ),
    );
  }
  return step;
}

/** The error for a handshake cut short by the proxy closing ("closed") or a timeout ("timeout"). */
export function endSocks5Handshake(state: Socks5HandshakeState, why: "closed" | "timeout"): Socks5Error {
  const during = PHASE_NAMES[state.phase];
  const text =
    why === "closed"
      ? `SOCKS5 proxy closed the connection during ${during}`
      : `SOCKS5 handshake timed out during ${during}`;
  return new Socks5Error(why, `${text} (target ${describeTarget(state.target)})`);
}

/** Acts on one complete server message. */
function react(state: Socks5HandshakeState, message: Socks5ServerMessage, rest: Uint8Array): Socks5Step {
  switch (message.kind) {
    case "method":
      return chooseMethod(state, message.method);
    case "auth":
      if (!message.ok) {
        return fail(
          state,
          new Socks5Error("auth-failed", `SOCKS5 proxy rejected the username/password (status ${message.status})`),
        );
      }
      return sendConnect(state);
    case "connect": {
      if (message.reply !== 0 || message.bound === null) {
        const { code, text, blame } = describeReplyCode(message.reply);
        const why = `SOCKS5 proxy could not connect to ${describeTarget(state.target)}: ${text} (REP ${message.reply})`;
        return fail(state, new Socks5Error(code, why, blame, message.reply));
      }
      const done: Socks5HandshakeState = { ...state, phase: "done" };
      return { state: done, send: null, result: { kind: "established", bound: message.bound, rest: rest.slice() } };
    }
  }
}

/** Follows the proxy's choice of authentication method. */
function chooseMethod(state: Socks5HandshakeState, method: number): Socks5Step {
  if (method === SOCKS5_METHOD.noAcceptable) {
    const offered = state.credentials ? "no authentication, username/password" : "no authentication";
    return fail(
      state,
      new Socks5Error("no-acceptable-method", `SOCKS5 proxy accepts none of the offered methods (${offered})`),
    );
  }
  if (method === SOCKS5_METHOD.none) return sendConnect(state);
  if (method === SOCKS5_METHOD.userPass && state.credentials) {
    const { username, password } = state.credentials;
    return { state: { ...state, phase: "auth" }, send: encodeUserPassAuth(username, password), result: null };
  }
  return fail(state, new Socks5Error("protocol", `SOCKS5 proxy chose method ${method}, which was not offered`));
}

/** Moves to the CONNECT phase. */
function sendConnect(state: Socks5HandshakeState): Socks5Step {
  return { state: { ...state, phase: "connect" }, send: encodeConnectRequest(state.target), result: null };
}

/** A failed step. */
function fail(state: Socks5HandshakeState, error: Socks5Error): Socks5Step {
  return {
    state: { ...state, phase: "failed", buffer: new Uint8Array(0) },
    send: null,
    result: { kind: "failed", error },
  };
}

/** host:port, IPv6 in brackets. */
function describeTarget(t: Socks5Target): string {
  return t.hostname.includes(":") && !t.hostname.startsWith("[")
    ? `[${t.hostname}]:${t.port}`
    : `${t.hostname}:${t.port}`;
}

/** Wraps a non-Socks5Error (never expected) as a protocol error. */
function asSocks5Error(e: unknown): Socks5Error {
  if (isSocks5Error(e)) return e;
  return new Socks5Error("protocol", e instanceof Error ? e.message : String(e));
}

/** a followed by b. */
function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b.slice();
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}
