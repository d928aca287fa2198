/**
 * VERP return paths: a per-recipient envelope sender whose local part names the message and the
 * recipient, signed, so an asynchronous bounce tells by its address alone what bounced.
 *
 * DESCRIPTION
 *   The address is `<kind>+<id>-<idx>-<mac>@<domain>`: kind "bounces" (the envelope sender) or
 *   "unsubscribe" (the List-Unsubscribe mailto), id the email id's 32 hex digits (no hyphens), idx
 *   the recipient's index in base 36, mac the first 12 hex digits of HMAC-SHA256(key,
 *   "<kind>:<email id>:<idx>"). Its local part is at most 8+1+32+1+4+1+12 = 59 octets (RFC 5321's
 *   limit is 64), lower-case only, so a server that folds case keeps it valid.
 *   tokenKey(secret)          the HMAC key from the relay's 32-byte secret (WEBHOOK_SECRETS_KEY).
 *   tokenOf(key, kind, emailId, idx)  its local part (also the one-click unsubscribe link's token).
 *   tokenAddress(key, kind, emailId, idx, domain)  the address.
 *   readTokenAddress(key, address)  {kind, emailId, idx} when the address is one of ours and its
 *                             mac verifies; null otherwise (any case, any domain: the domain is
 *                             where it was delivered, which the operator chose).
 *
 * INVARIANTS
 *   Pure but for crypto.subtle (Web Crypto, in Node and workerd alike). The mac is compared in
 *   constant time over its 12 digits.
 */

/** What a token address is for. */
import type { TokenKind } from "../model/tokens";

export type { TokenKind };

const KINDS: readonly TokenKind[] = ["bounces", "unsubscribe"];
const LOCAL_RE = /^(bounces|unsubscribe)\+([0-9a-f]{32})-([0-9a-z]{1,4})-([0-9a-f]{12})$/;

/** The HMAC key for token addresses, from the relay's secret bytes. */
export function tokenKey(secret: Uint8Array): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", secret, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}

async function mac(key: CryptoKey, kind: TokenKind, emailId: string, idx: number): Promise<string> {
  const sig = new Uint8Array(
    await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`${kind}:${emailId}:${idx}`)),
  );
  return [...sig.slice(0, 6)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** The token address's local part for recipient `idx` of email `emailId` (a UUID). */
export async function tokenOf(key: CryptoKey, kind: TokenKind, emailId: string, idx: number): Promise<string> {
  const hex = emailId.toLowerCase().replace(/-/g, "");
  if (!/^[0-9a-f]{32}$/.test(hex) || !Number.isInteger(idx) || idx < 0 || idx >= 36 ** 4)
    throw new Error(`no token address for ${emailId}/${idx}`);
  return `${kind}+${hex}-${idx.toString(36)}-${await mac(key, kind, emailId.toLowerCase(), idx)}`;
}

/** The token address of recipient `idx` of email `emailId` (a UUID) at `domain`. */
export async function tokenAddress(
  key: CryptoKey,
  kind: TokenKind,
  emailId: string,
  idx: number,
  domain: string,
): Promise<string> {
  return `${await tokenOf(key, kind, emailId, idx)}@${domain.toLowerCase()}`;
}

/** What a verified token address names, or null (see the header). */
export async function readTokenAddress(
  key: CryptoKey,
  address: string,
): Promise<{ kind: TokenKind; emailId: string; idx: number } | null> {
  const at = address.lastIndexOf("@");
  const m = LOCAL_RE.exec((at < 0 ? address : address.slice(0, at)).trim().toLowerCase().replace(/^<|>$/g, ""));
  if (!m) return null;
  const kind = m[1] as TokenKind;
  const hex = m[2]!;
  const emailId = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  const idx = parseInt(m[3]!, 36);
  const want = await mac(key, kind, emailId, idx);
  let diff = 0;
  for (let i = 0; i < want.length; i++) diff |= want.charCodeAt(i) ^ m[4]!.charCodeAt(i);
  return diff === 0 && KINDS.includes(kind) ? { kind, emailId, idx } : null;
}
