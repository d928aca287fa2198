/*
 * NAME
 *   config - SMTP client session settings and Postfix's default timeouts
 *
 * SUMMARY
 *   The settings a session runs with: who we say we are, the TLS policy,
 *   SASL credentials, and one timeout per protocol step, named and defaulted
 *   as in Postfix's smtp(8) (smtp_connect_timeout ... smtp_quit_timeout).
 *
 * DESCRIPTION
 *   DEFAULT_TIMEOUTS holds Postfix's defaults in seconds.
 *
 *   createSessionConfig(input) merges the caller's fields over the defaults
 *   and returns a complete SessionConfig.
 *
 *   selectTimeout(step, timeouts) says which timeout applies while the
 *   session waits in `step`, mirroring which smtp_*_timeout Postfix arms
 *   around the same read or write.
 *
 * INVARIANTS
 *   Every SmtpStep maps to exactly one positive timeout.
 *
 * ERRORS
 *   createSessionConfig throws InvariantError for a HELO name or credential
 *   that contains CR, LF or NUL (that would inject commands) or for a
 *   non-positive timeout: such a config is a bug in the caller.
 */

import { InvariantError } from "./errors";

/** Per-step timeouts in seconds. */
export interface SmtpTimeouts {
  /** TCP connect (and implicit TLS). Postfix smtp_connect_timeout, default 30. */
  connectTimeoutSec: number;
  /** Greeting, EHLO/HELO and AUTH replies. smtp_helo_timeout, default 300. */
  heloTimeoutSec: number;
  /** STARTTLS reply and TLS handshake. smtp_starttls_timeout, default 300. */
  starttlsTimeoutSec: number;
  /** MAIL FROM reply. smtp_mail_timeout, default 300. */
  mailTimeoutSec: number;
  /** Each RCPT TO reply. smtp_rcpt_timeout, default 300. */
  rcptTimeoutSec: number;
  /** DATA command reply. smtp_data_init_timeout, default 120. */
  dataInitTimeoutSec: number;
  /** Each write of message content. smtp_data_xfer_timeout, default 180. */
  dataXferTimeoutSec: number;
  /** Reply to the final ".". smtp_data_done_timeout, default 600. */
  dataDoneTimeoutSec: number;
  /** RSET reply between transactions. smtp_rset_timeout, default 20. */
  rsetTimeoutSec: number;
  /** QUIT reply, when it is awaited. smtp_quit_timeout, default 300. */
  quitTimeoutSec: number;
}

/** Postfix's default timeouts. */
export const DEFAULT_TIMEOUTS: Readonly<SmtpTimeouts> = Object.freeze({
  connectTimeoutSec: 30,
  heloTimeoutSec: 300,
  starttlsTimeoutSec: 300,
  mailTimeoutSec: 300,
  rcptTimeoutSec: 300,
  dataInitTimeoutSec: 120,
  dataXferTimeoutSec: 180,
  dataDoneTimeoutSec: 600,
  rsetTimeoutSec: 20,
  quitTimeoutSec: 300,
});

/**
 * TLS policy: "off" never sends STARTTLS; "opportunistic" uses it when offered
 * and falls back to plaintext (reconnecting once if the handshake fails);
 * "required" defers the mail unless the session is encrypted.
 */
export type TlsPolicy = "off" | "opportunistic" | "required";

/** SASL credentials for AUTH PLAIN / AUTH LOGIN. */
export interface Credentials {
  username: string;
  password: string;
}

/** Everything a session needs besides the messages. */
export interface SessionConfig {
  /** Name sent with EHLO/HELO. Required. */
  heloName: string;
  /** Host the adapter connected to, copied into results. Required. */
  remoteHost: string;
  /** The transport is TLS from the first byte (port 465). Default false. */
  implicitTls: boolean;
  /** Default "opportunistic". Ignored when implicitTls is true. */
  tlsPolicy: TlsPolicy;
  /** AUTH credentials, or null for no AUTH. Default null. */
  credentials: Credentials | null;
  /** Allow AUTH on an unencrypted session. Default false. */
  allowPlaintextAuth: boolean;
  /** Close right after sending QUIT (Postfix smtp_skip_quit_response). Default true. */
  skipQuitResponse: boolean;
  /** Per-step timeouts. Default DEFAULT_TIMEOUTS. */
  timeouts: SmtpTimeouts;
}

/** Caller-supplied settings: heloName and remoteHost are required, the rest default. */
export type SessionConfigInput = Pick<SessionConfig, "heloName" | "remoteHost"> &
  Partial<Omit<SessionConfig, "heloName" | "remoteHost" | "timeouts">> & {
    timeouts?: Partial<SmtpTimeouts>;
  };

/** A protocol step the session can be waiting in. */
export type SmtpStep =
  | "connect"
  | "greeting"
  | "ehlo"
  | "helo"
  | "starttls"
  | "tls-handshake"
  | "auth"
  | "mail"
  | "rcpt"
  | "data"
  | "body"
  | "dot"
  | "rset"
  | "quit";

/** Merges input over the defaults and validates the result. */
export function createSessionConfig(input: SessionConfigInput): SessionConfig {
  const cfg: SessionConfig = {
    implicitTls: false,
    tlsPolicy: "opportunistic",
    credentials: null,
    allowPlaintextAuth: false,
    skipQuitResponse: true,
    ...input,
    timeouts: { ...DEFAULT_TIMEOUTS, ...input.timeouts },
  };
  const unsafe = /[\r\n\0]/;
  if (!cfg.heloName || /[\s\0]/.test(cfg.heloName)) {
    throw new InvariantError(`bad heloName ${JSON.stringify(cfg.heloName)}`);
  }
  if (cfg.credentials && (unsafe.test(cfg.credentials.username) || unsafe.test(cfg.credentials.password))) {
    throw new InvariantError("credentials contain CR, LF or NUL");
  }
  for (const [name, sec] of Object.entries(cfg.timeouts)) {
    if (!(sec > 0)) throw new InvariantError(`timeout ${name} must be positive, got ${sec}`);
  }
  return cfg;
}

/** Returns the timeout in seconds that applies while waiting in `step`. */
export function selectTimeout(step: SmtpStep, t: SmtpTimeouts): number {
  switch (step) {
    case "connect":
      return t.connectTimeoutSec;
    case "greeting":
    case "ehlo":
    case "helo":
    case "auth":
      return t.heloTimeoutSec;
    case "starttls":
    case "tls-handshake":
      return t.starttlsTimeoutSec;
    case "mail":
      return t.mailTimeoutSec;
    case "rcpt":
      return t.rcptTimeoutSec;
    case "data":
      return t.dataInitTimeoutSec;
    case "body":
      return t.dataXferTimeoutSec;
    case "dot":
      return t.dataDoneTimeoutSec;
    case "rset":
      return t.rsetTimeoutSec;
    case "quit":
      return t.quitTimeoutSec;
  }
}

/** Postfix's parameter name of each timeout, for configuration (SMTP_TIMEOUTS). */
export const TIMEOUT_PARAMS: Readonly<Record<string, keyof SmtpTimeouts>> = Object.freeze({
  smtp_connect_timeout: "connectTimeoutSec",
  smtp_helo_timeout: "heloTimeoutSec",
  smtp_starttls_timeout: "starttlsTimeoutSec",
  smtp_mail_timeout: "mailTimeoutSec",
  smtp_rcpt_timeout: "rcptTimeoutSec",
  smtp_data_init_timeout: "dataInitTimeoutSec",
  smtp_data_xfer_timeout: "dataXferTimeoutSec",
  smtp_data_done_timeout: "dataDoneTimeoutSec",
  smtp_rset_timeout: "rsetTimeoutSec",
  smtp_quit_timeout: "quitTimeoutSec",
});

const UNIT_SEC: Readonly<Record<string, number>> = { s: 1, m: 60, h: 3600 };

/**
 * Timeouts from an object with Postfix's names and values in seconds, or Postfix time strings
 * ("30s", "5m", "1h"), e.g. {"smtp_helo_timeout": "10s"}. Unknown names and values that are not
 * positive throw RangeError, naming the parameter.
 */
export function parseSmtpTimeouts(input: unknown): Partial<SmtpTimeouts> {
  if (input === null || typeof input !== "object" || Array.isArray(input))
    throw new RangeError("SMTP timeouts must be a JSON object");
  const out: Partial<SmtpTimeouts> = {};
  for (const [name, raw] of Object.entries(input)) {
    const key = TIMEOUT_PARAMS[name];
    if (!key) throw new RangeError(`unknown SMTP timeout parameter ${name}`);
    const m =
      typeof raw === "number"
        ? [String(raw), String(raw), "s"]
        : typeof raw === "string"
          ? /^(\d+(?:\.\d+)?)([smh]?)$/.exec(raw.trim())
          : null;
    const sec = m ? Number(m[1]) * UNIT_SEC[m[2] || "s"]! : NaN;
    if (!(sec > 0) || !Number.isFinite(sec))
      throw new RangeError(`${name} must be a positive time, got ${JSON.stringify(raw)}`);
    out[key] = sec;
  }
  return out;
}
