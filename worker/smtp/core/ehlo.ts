/*
 * NAME
 *   ehlo - ESMTP service extensions from an EHLO reply
 *
 * SUMMARY
 *   Reads the keyword lines of a 250 EHLO reply into a plain record, like the
 *   feature bits Postfix's smtp_helo() collects.
 *
 * DESCRIPTION
 *   parseEhloReply(reply) looks at every line after the first (the first line
 *   is the server's greeting domain, RFC 5321 §4.1.1.1). Keywords compare
 *   case-insensitively. Understood: PIPELINING (RFC 2920), SIZE [n] (RFC
 *   1870), 8BITMIME (RFC 6152), SMTPUTF8 (RFC 6531), STARTTLS (RFC 3207),
 *   AUTH mech... and the pre-standard "AUTH=mech..." (RFC 4954),
 *   ENHANCEDSTATUSCODES (RFC 2034). Others are ignored.
 *
 *   createEmptyCapabilities() is the record for a server that only spoke HELO.
 *
 * INVARIANTS
 *   sizeLimitBytes is null unless the server announced a positive integer.
 *   authMechanisms holds upper-case names without duplicates.
 *
 * ERRORS
 *   None: unknown or malformed keyword lines are skipped.
 */

import type { SmtpReply } from "./reply";

/** Extensions the server announced. */
export interface EhloCapabilities {
  pipelining: boolean;
  /** SIZE was announced, so MAIL FROM may carry SIZE=n. */
  size: boolean;
  /** Fixed message size limit in bytes; null when absent or 0 (no limit). */
  sizeLimitBytes: number | null;
  eightBitMime: boolean;
  smtpUtf8: boolean;
  startTls: boolean;
  /** Upper-case SASL mechanism names. */
  authMechanisms: string[];
  enhancedStatusCodes: boolean;
}

/** Returns the capabilities of a server that announced nothing (HELO). */
export function createEmptyCapabilities(): EhloCapabilities {
  return {
    pipelining: false,
    size: false,
    sizeLimitBytes: null,
    eightBitMime: false,
    smtpUtf8: false,
    startTls: false,
    authMechanisms: [],
    enhancedStatusCodes: false,
  };
}

/** Parses the extension keywords of a positive EHLO reply. */
export function parseEhloReply(reply: SmtpReply): EhloCapabilities {
  const caps = createEmptyCapabilities();
  for (const line of reply.lines.slice(1)) {
    const [rawKeyword = "", ...params] = line.trim().split(/\s+/);
    const keyword = rawKeyword.toUpperCase();
    if (keyword.startsWith("AUTH=")) {
      addMechanisms(caps, [keyword.slice(5), ...params]);
      continue;
    }
    switch (keyword) {
      case "PIPELINING":
        caps.pipelining = true;
        break;
      case "SIZE":
        caps.size = true;
        caps.sizeLimitBytes = parseSize(params[0]);
        break;
      case "8BITMIME":
        caps.eightBitMime = true;
        break;
      case "SMTPUTF8":
        caps.smtpUtf8 = true;
        break;
      case "STARTTLS":
        caps.startTls = true;
        break;
      case "AUTH":
        addMechanisms(caps, params);
        break;
      case "ENHANCEDSTATUSCODES":
        caps.enhancedStatusCodes = true;
        break;
      default:
        break;
    }
  }
  return caps;
}

/** Parses a SIZE parameter; 0, absent or malformed means "no announced limit". */
function parseSize(param: string | undefined): number | null {
  if (param === undefined || !/^\d{1,15}$/.test(param)) return null;
  const n = Number(param);
  return n > 0 ? n : null;
}

/** Adds mechanism names, upper-cased and without duplicates. */
function addMechanisms(caps: EhloCapabilities, names: string[]): void {
  for (const name of names) {
    const mech = name.toUpperCase();
    if (mech && !caps.authMechanisms.includes(mech)) caps.authMechanisms.push(mech);
  }
}
