/*
 * NAME
 *   sign - Standard Webhooks signatures with WebCrypto
 *
 * SUMMARY
 *   Signs a webhook body the Standard Webhooks way (api-conventions §6) and
 *   generates `whsec_` secrets. Not pure: uses crypto.subtle (Workers and
 *   Node 20 alike); randomness for secrets is injected.
 *
 * DESCRIPTION
 *   generateWebhookSecret(randomBytes, byteLength = 32) returns "whsec_" +
 *   base64 of byteLength bytes from randomBytes (24..64 bytes).
 *
 *   signWebhook({id, timestampSec, body, secrets}) computes, for each
 *   secret, "v1," + base64(HMAC-SHA256(key, `${id}.${timestampSec}.` ||
 *   body bytes)) and returns the headers webhook-id, webhook-timestamp,
 *   webhook-signature (the signatures joined by single spaces, one per
 *   secret, so a receiver with either secret verifies during rotation) and
 *   the same three values under svix-id, svix-timestamp, svix-signature.
 *   A string body is UTF-8 encoded; a byte body is signed as is, so the
 *   caller must send exactly those bytes.
 *
 *   decodeWebhookSecret(secret) returns the key bytes (base64 after an
 *   optional "whsec_" prefix), as the standardwebhooks library reads them.
 *
 * INVARIANTS
 *   The id and timestamp in the headers are the ones signed; the order of
 *   signatures follows the order of secrets.
 *
 * ERRORS
 *   WebhookSigningError for a malformed secret, an empty secrets list, an
 *   id containing whitespace or ".", or a non-integer timestamp.
 */

/** A signing input problem (bad secret, id or timestamp). */
export class WebhookSigningError extends Error {
  /** Brand for checks across realms, instead of instanceof. */
  readonly isWebhookSigningError = true;
  constructor(message: string) {
    super(message);
    this.name = "WebhookSigningError";
  }
}

/** Input of signWebhook. */
export interface SignInput {
  id: string;
  timestampSec: number;
  body: string | Uint8Array;
  secrets: readonly string[];
}

/** The six headers a signed delivery carries. */
export interface WebhookHeaders {
  "webhook-id": string;
  "webhook-timestamp": string;
  "webhook-signature": string;
  "svix-id": string;
  "svix-timestamp": string;
  "svix-signature": string;
}

const SECRET_PREFIX = "whsec_";
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

/** Returns the HMAC key bytes of a `whsec_` (or bare base64) secret. */
export function decodeWebhookSecret(secret: string): Uint8Array {
  const text = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  if (text.length === 0 || text.length % 4 !== 0 || !BASE64.test(text)) {
    throw new WebhookSigningError("webhook secret is not whsec_ followed by base64");
  }
  const binary = atob(text);
  const key = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) key[i] = binary.charCodeAt(i);
  return key;
}

/** Generates a new secret "whsec_<base64>" from an injected random source. */
export function generateWebhookSecret(randomBytes: (n: number) => Uint8Array, byteLength = 32): string {
  if (!Number.isInteger(byteLength) || byteLength < 24 || byteLength > 64) {
    throw new WebhookSigningError("secret length must be 24..64 bytes");
  }
  const bytes = randomBytes(byteLength);
  if (bytes.length !== byteLength) throw new WebhookSigningError("random source returned the wrong number of bytes");
  return SECRET_PREFIX + toBase64(bytes);
}

async function hmacBase64(keyBytes: Uint8Array, content: Uint8Array): Promise<string> {
  const key = await crypto.subtle.importKey("raw", keyBytes, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return toBase64(new Uint8Array(await crypto.subtle.sign("HMAC", key, content)));
}

function signedContent(id: string, timestampSec: number, body: string | Uint8Array): Uint8Array {
  const prefix = new TextEncoder().encode(`${id}.${timestampSec}.`);
  const bodyBytes = typeof body === "string" ? new TextEncoder().encode(body) : body;
  const content = new Uint8Array(prefix.length + bodyBytes.length);
  content.set(prefix, 0);
  content.set(bodyBytes, prefix.length);
  return content;
}

/** Signs one delivery; returns webhook-* and svix-* headers with identical values. */
export async function signWebhook(input: SignInput): Promise<WebhookHeaders> {
  if (input.id === "" || /[\s.]/.test(input.id))
    throw new WebhookSigningError("webhook id must be non-empty, without spaces or dots");
  if (!Number.isSafeInteger(input.timestampSec) || input.timestampSec < 0) {
    throw new WebhookSigningError("timestamp must be a non-negative integer of seconds");
  }
  if (input.secrets.length === 0) throw new WebhookSigningError("at least one secret is needed");
  const keys = input.secrets.map(decodeWebhookSecret);
  const content = signedContent(input.id, input.timestampSec, input.body);
  const signatures = await Promise.all(keys.map(async (key) => `v1,${await hmacBase64(key, content)}`));
  const timestamp = String(input.timestampSec);
  const signature = signatures.join(" ");
  return {
    "webhook-id": input.id,
    "webhook-timestamp": timestamp,
    "webhook-signature": signature,
    "svix-id": input.id,
    "svix-timestamp": timestamp,
    "svix-signature": signature,
  };
}
