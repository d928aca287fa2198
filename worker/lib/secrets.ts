/**
 * Webhook signing secrets at rest: `whsec_…` values encrypted with AES-256-GCM under the
 * WEBHOOK_SECRETS_KEY secret (32 bytes, base64). The relay needs the plain secret to sign,
 * so it cannot store a hash; it stores ciphertext and shows the secret only on create and
 * rotate.
 *
 * DESCRIPTION
 *   secretsKey(env)        the AES key: from WEBHOOK_SECRETS_KEY, or — only when COHORT_ENV is
 *                          development or test — a fixed local key; otherwise an error.
 *   sealSecret / openSecret  encrypt to "v1.<iv>.<ciphertext>" (base64) and back.
 *   derivedSecret(env, purpose)  32 bytes for another use of the same secret (HMAC-derived).
 *
 * ERRORS
 *   Throws when the key is missing in production or a sealed value was tampered with; never
 *   includes a secret in a message.
 */
import { settingsOf } from "../settings/settings";

const LOCAL_KEY_B64 = "Y29ob3J0LWxvY2FsLWRldmVsb3BtZW50LWtleSEhISE="; // 32 bytes, development and tests only

function b64(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

function unb64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

/** The AES-GCM key for sealing secrets. */
export async function secretsKey(env: { WEBHOOK_SECRETS_KEY?: string; COHORT_ENV: string }): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", secretBytes(env), "AES-GCM", false, ["encrypt", "decrypt"]);
}

/** The relay's 32 secret bytes (WEBHOOK_SECRETS_KEY, or the local key in development and tests). */
function secretBytes(env: { WEBHOOK_SECRETS_KEY?: string; COHORT_ENV: string }): Uint8Array {
  const local = settingsOf(env).local;
  const raw = env.WEBHOOK_SECRETS_KEY ?? (local ? LOCAL_KEY_B64 : undefined);
  if (!raw) throw new Error("WEBHOOK_SECRETS_KEY is not set (wrangler secret put WEBHOOK_SECRETS_KEY)");
  const bytes = unb64(raw);
  if (bytes.length !== 32) throw new Error("WEBHOOK_SECRETS_KEY must be 32 bytes, base64");
  return bytes;
}

/**
 * A key of its own for `purpose` (e.g. signing VERP and unsubscribe tokens), derived from the
 * secret as HMAC-SHA256(secret, purpose): the sealing key itself is never used for anything else.
 */
export async function derivedSecret(
  env: { WEBHOOK_SECRETS_KEY?: string; COHORT_ENV: string },
  purpose: string,
): Promise<Uint8Array> {
  const k = await crypto.subtle.importKey("raw", secretBytes(env), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return new Uint8Array(await crypto.subtle.sign("HMAC", k, new TextEncoder().encode(purpose)));
}

/** Encrypts a secret. */
export async function sealSecret(key: CryptoKey, secret: string): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const ct = new Uint8Array(
    await crypto.subtle.encrypt({ name: "AES-GCM", iv }, key, new TextEncoder().encode(secret)),
  );
  return `v1.${b64(iv)}.${b64(ct)}`;
}

/** Decrypts a sealed secret. */
export async function openSecret(key: CryptoKey, sealed: string): Promise<string> {
  const [v, iv, ct] = sealed.split(".");
  if (v !== "v1" || !iv || !ct) throw new Error("unreadable sealed secret");
  const pt = await crypto.subtle.decrypt({ name: "AES-GCM", iv: unb64(iv) }, key, unb64(ct));
  return new TextDecoder().decode(pt);
}
