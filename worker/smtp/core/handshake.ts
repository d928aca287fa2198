/*
 * NAME
 *   handshake - the greeting, EHLO/HELO, STARTTLS and AUTH of the sans-I/O
 *   ESMTP client
 *
 * SUMMARY
 *   The connection half of Postfix's smtp_proto.c (smtp_helo, STARTTLS,
 *   SASL): the reply handlers session.ts routes to while a session is being
 *   set up, and the ways it ends when the server or the policy refuses it.
 *   No I/O, no clock.
 *
 * DESCRIPTION
 *   The handshake: greeting; EHLO, or HELO when EHLO is refused; STARTTLS
 *   when offered and the policy allows (re-EHLO after the handshake, RFC
 *   3207); AUTH PLAIN or LOGIN when credentials are configured; then the
 *   transactions (transaction.ts's beginTransaction).
 *
 *   sendHello() sends EHLO or HELO; rejectGreeting(), onEhloReply(),
 *   onHeloReply(), onStarttlsReply() and onAuthReply() handle the replies of
 *   their phase, each returning the actions to carry out.
 *
 * INVARIANTS
 *   A site failure is reported only for a soft failure at the greeting, at
 *   EHLO/HELO (421 or HELO 4xx), or when mandatory TLS fails
 *   (scheduler.md §6.1).
 *
 * ERRORS
 *   Expected failures are results.
 */

import { formatAuthLoginToken, chooseAuthMechanism, formatAuthPlain, formatEhlo, formatHelo } from "./commands";
import type { SessionConfig } from "./config";
import { createEmptyCapabilities, parseEhloReply } from "./ehlo";
import { abortSession, softenDsn } from "./outcome";
import { deriveEnhancedCode, formatReply, type SmtpReply } from "./reply";
import { buildTemplate, waitIn, type SessionState } from "./state";
import { beginTransaction } from "./transaction";
import type { SessionAction } from "./types";

/** Sends EHLO or HELO. */
export function sendHello(s: SessionState, cfg: SessionConfig, which: "ehlo" | "helo"): SessionAction[] {
  s.phase = which;
  waitIn(s, which, cfg);
  return [{ kind: "send", data: which === "ehlo" ? formatEhlo(cfg.heloName) : formatHelo(cfg.heloName) }];
}

/** A non-2xx greeting: a site failure, with 5xx treated as 4xx (smtp_skip_5xx_greeting). */
export function rejectGreeting(s: SessionState, cfg: SessionConfig, reply: SmtpReply): SessionAction[] {
  return refuseSession(s, cfg, reply, `host ${cfg.remoteHost} refused to talk to me`, true);
}

/** EHLO: 2xx reads the extensions, 421 is a site failure, anything else falls back to HELO. */
export function onEhloReply(s: SessionState, reply: SmtpReply, cfg: SessionConfig): SessionAction[] {
  if (reply.code === 421) return refuseSession(s, cfg, reply, `host ${cfg.remoteHost} refused EHLO`, true);
  if (reply.code >= 300) return sendHello(s, cfg, "helo");
  s.esmtp = true;
  s.caps = parseEhloReply(reply);
  return afterHello(s, cfg);
}

/** HELO: 2xx continues without extensions; 4xx is a site failure; 5xx bounces (hard). */
export function onHeloReply(s: SessionState, reply: SmtpReply, cfg: SessionConfig): SessionAction[] {
  if (reply.code < 300) {
    s.esmtp = false;
    s.caps = createEmptyCapabilities();
    return afterHello(s, cfg);
  }
  const reason = `host ${cfg.remoteHost} refused to talk to me`;
  if (reply.code >= 500) return refuseSession(s, cfg, reply, reason, false, "bounced");
  return refuseSession(s, cfg, reply, reason, true);
}

/** After a successful EHLO/HELO: STARTTLS, then AUTH, then the first transaction. */
function afterHello(s: SessionState, cfg: SessionConfig): SessionAction[] {
  if (!s.tls && cfg.tlsPolicy !== "off" && !s.tlsFallback && s.caps.startTls) {
    s.phase = "starttls";
    waitIn(s, "starttls", cfg);
    return [{ kind: "send", data: "STARTTLS\r\n" }];
  }
  if (!s.tls && cfg.tlsPolicy === "opportunistic" && !s.tlsFallback && !s.caps.startTls)
    s.tlsProblem = `STARTTLS not offered by host ${cfg.remoteHost}`;
  if (!s.tls && cfg.tlsPolicy === "required") {
    const reason = `TLS is required, but was not offered by host ${cfg.remoteHost}`;
    return refuseLocally(s, cfg, "4.7.4", reason, true);
  }
  if (cfg.credentials && !s.authenticated) return startAuth(s, cfg);
  return beginTransaction(s, cfg);
}

/** STARTTLS reply: 220 starts the handshake; a refusal fails under "required", else goes on in plaintext. */
export function onStarttlsReply(s: SessionState, reply: SmtpReply, cfg: SessionConfig): SessionAction[] {
  if (reply.code < 300) {
    s.phase = "tls-handshake";
    waitIn(s, "tls-handshake", cfg);
    return [{ kind: "starttls" }];
  }
  if (cfg.tlsPolicy === "required" || reply.code === 421) {
    const reason = `TLS is required, but host ${cfg.remoteHost} refused to start TLS`;
    return refuseSession(s, cfg, reply, reason, true);
  }
  s.tlsFallback = true;
  s.tlsProblem = `host ${cfg.remoteHost} refused to start TLS: ${formatReply(reply)}`;
  return afterHello(s, cfg);
}

/** Starts AUTH with the best offered mechanism, or gives up clearly. */
function startAuth(s: SessionState, cfg: SessionConfig): SessionAction[] {
  if (!s.tls && !cfg.allowPlaintextAuth) {
    return refuseLocally(s, cfg, "4.7.0", `refusing to send credentials to ${cfg.remoteHost} without TLS`, false);
  }
  const mech = chooseAuthMechanism(s.caps.authMechanisms);
  const creds = cfg.credentials;
  if (!mech || !creds) {
    const offered = s.caps.authMechanisms.join(" ") || "none";
    const reason = `SASL authentication is configured, but host ${cfg.remoteHost} offers no usable mechanism (offered: ${offered})`;
    return refuseLocally(s, cfg, "4.7.0", reason, false);
  }
  waitIn(s, "auth", cfg);
  s.phase = mech === "PLAIN" ? "auth-plain" : "auth-login-user";
  return [{ kind: "send", data: mech === "PLAIN" ? formatAuthPlain(creds) : "AUTH LOGIN\r\n" }];
}

/** AUTH replies: 334 continues LOGIN, 235 finishes; anything else defers (soft bounce). */
export function onAuthReply(s: SessionState, reply: SmtpReply, cfg: SessionConfig): SessionAction[] {
  const creds = cfg.credentials;
  const phase = s.phase;
  if (creds && reply.code === 334 && (phase === "auth-login-user" || phase === "auth-login-pass")) {
    s.phase = phase === "auth-login-user" ? "auth-login-pass" : "auth-login-result";
    const answer = phase === "auth-login-user" ? creds.username : creds.password;
    return [{ kind: "send", data: formatAuthLoginToken(answer) }];
  }
  if (reply.code >= 200 && reply.code < 300 && (phase === "auth-plain" || phase === "auth-login-result")) {
    s.authenticated = true;
    return beginTransaction(s, cfg);
  }
  // Postfix's smtp_sasl_auth_soft_bounce: an AUTH failure defers, it does not bounce.
  return refuseSession(s, cfg, reply, `SASL authentication failed; server ${cfg.remoteHost} said`, false);
}

/** Ends the session because the server refused it; every open recipient gets the reply. */
function refuseSession(
  s: SessionState,
  cfg: SessionConfig,
  reply: SmtpReply,
  reason: string,
  site: boolean,
  status: "deferred" | "bounced" = "deferred",
): SessionAction[] {
  const text = `${reason}: ${formatReply(reply)}`;
  const template = { ...buildTemplate(reply, status), text };
  const dsn = reply.enhanced ?? deriveEnhancedCode(reply.code);
  const siteFailure = site ? { dsnStatus: softenDsn(dsn), reason: text } : null;
  const quit = reply.code !== 421;
  const rest = { ...template, status };
  return abortSession(s, cfg, { current: template, rest, siteFailure, quit, possibleDuplicate: false });
}

/** Ends the session for a reason decided here (TLS or AUTH policy); always deferred. */
function refuseLocally(
  s: SessionState,
  cfg: SessionConfig,
  dsn: string,
  reason: string,
  site: boolean,
): SessionAction[] {
  const template = { code: 450, enhanced: dsn, text: reason, status: "deferred" as const, source: "local" as const };
  const siteFailure = site ? { dsnStatus: dsn, reason } : null;
  return abortSession(s, cfg, { current: template, rest: template, siteFailure, quit: true, possibleDuplicate: false });
}
