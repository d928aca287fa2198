/*
 * NAME
 *   commands - SMTP command text for the client session
 *
 * SUMMARY
 *   Builds the CRLF-terminated command lines the session sends: EHLO, HELO,
 *   MAIL FROM with its ESMTP parameters, RCPT TO, AUTH PLAIN/LOGIN.
 *
 * DESCRIPTION
 *   isSafeAddress(addr) rejects an envelope address that would break the
 *   command syntax (CR, LF, other control characters, "<" or ">").
 *
 *   needsSmtpUtf8(addr) is true for an address with non-ASCII characters.
 *
 *   formatMailFrom(env, caps) adds SIZE=n only when the server announced
 *   SIZE, BODY=8BITMIME only for an 8-bit body when 8BITMIME was announced,
 *   and SMTPUTF8 only when the message needs it and it was announced.
 *
 *   chooseAuthMechanism(offered) prefers PLAIN, then LOGIN; null if neither.
 *
 *   formatAuthPlain(cred) sends the RFC 4616 token as an initial response
 *   (RFC 4954). formatAuthLoginToken(text) base64-encodes one AUTH LOGIN answer.
 *
 * INVARIANTS
 *   Every command string ends in exactly one CRLF and contains no other
 *   CR or LF, provided addresses passed isSafeAddress and the config passed
 *   createSessionConfig.
 *
 * ERRORS
 *   None; callers check isSafeAddress first.
 */

import { encodeBase64, encodeUtf8 } from "./codec";
import type { Credentials } from "./config";
import type { EhloCapabilities } from "./ehlo";
import type { MessageEnvelope } from "./types";

/** SASL mechanisms this client implements, in order of preference. */
export type AuthMechanism = "PLAIN" | "LOGIN";

/** Says whether an envelope address can be put between angle brackets safely. */
export function isSafeAddress(addr: string): boolean {
  return !/[\x00-\x1f\x7f<>]/.test(addr);
}

/** Says whether an address needs SMTPUTF8 (contains non-ASCII). */
export function needsSmtpUtf8(addr: string): boolean {
  return /[^\x00-\x7f]/.test(addr);
}

/** Says whether the message as a whole needs SMTPUTF8. */
export function messageNeedsSmtpUtf8(env: MessageEnvelope): boolean {
  return env.smtpUtf8 || needsSmtpUtf8(env.mailFrom) || env.rcptTo.some(needsSmtpUtf8);
}

/** Returns "EHLO name\r\n". */
export function formatEhlo(heloName: string): string {
  return `EHLO ${heloName}\r\n`;
}

/** Returns "HELO name\r\n". */
export function formatHelo(heloName: string): string {
  return `HELO ${heloName}\r\n`;
}

/** Returns MAIL FROM with the parameters the server announced and the message needs. */
export function formatMailFrom(env: MessageEnvelope, caps: EhloCapabilities): string {
  let cmd = `MAIL FROM:<${env.mailFrom}>`;
  if (caps.size) cmd += ` SIZE=${Math.max(0, Math.floor(env.sizeBytes))}`;
  if (env.eightBitMime && caps.eightBitMime) cmd += " BODY=8BITMIME";
  if (caps.smtpUtf8 && messageNeedsSmtpUtf8(env)) cmd += " SMTPUTF8";
  return `${cmd}\r\n`;
}

/** Returns "RCPT TO:<addr>\r\n". */
export function formatRcptTo(addr: string): string {
  return `RCPT TO:<${addr}>\r\n`;
}

/** Picks PLAIN, then LOGIN, from the announced mechanisms; null if neither is offered. */
export function chooseAuthMechanism(offered: readonly string[]): AuthMechanism | null {
  if (offered.includes("PLAIN")) return "PLAIN";
  if (offered.includes("LOGIN")) return "LOGIN";
  return null;
}

/** Returns "AUTH PLAIN <base64(\0user\0pass)>\r\n" (RFC 4616 with initial response). */
export function formatAuthPlain(cred: Credentials): string {
  return `AUTH PLAIN ${encodeBase64(encodeUtf8(`\0${cred.username}\0${cred.password}`))}\r\n`;
}

/** Returns one base64 AUTH LOGIN answer line. */
export function formatAuthLoginToken(text: string): string {
  return `${encodeBase64(encodeUtf8(text))}\r\n`;
}
