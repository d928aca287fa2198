/**
 * Signed download links: Resend's `download_url`s of attachments and raw messages, answered at
 * /files/<token> without an API key (the token is the authority, as a one-click unsubscribe
 * link's is).
 *
 * DESCRIPTION
 *   FileRef                  what a link names: kind "sent" (an attachment of a sent email, from
 *                            its kept copy), "received" (an attachment of a received email) or
 *                            "raw" (a received email's raw bytes); the tenant, the email id, the
 *                            R2 key of the kept message, the attachment's index in its parse
 *                            (kinds sent and received) and when it expires (unix seconds).
 *   signFileRef(env, ref)    the token: base64url of the ref's JSON, ".", and the first 16 bytes
 *                            of HMAC-SHA256 under a key derived from WEBHOOK_SECRETS_KEY for this
 *                            purpose alone, base64url.
 *   readFileRef(env, token, nowSec)  the ref when the mac verifies and it has not expired; null.
 *
 * INVARIANTS
 *   The mac is compared in constant time. A link names one tenant's one file and cannot be
 *   turned into another's: every field is under the mac.
 */
import { derivedSecret } from "./secrets";

/** What a link names (see the header). */
export interface FileRef {
  k: "sent" | "received" | "raw";
  t: string;
  e: string;
  p: string;
  a?: number;
  x: number;
}

const enc = new TextEncoder();
const b64url = (b: Uint8Array) =>
  btoa(String.fromCharCode(...b))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");
const unb64url = (s: string) =>
  Uint8Array.from(atob(s.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (s.length % 4)) % 4)), (c) =>
    c.charCodeAt(0),
  );

type SecretEnv = { WEBHOOK_SECRETS_KEY?: string; COHORT_ENV: string };
let cached: { secret: string | undefined; key: Promise<CryptoKey> } | null = null;

function linkKey(env: SecretEnv): Promise<CryptoKey> {
  if (cached === null || cached.secret !== env.WEBHOOK_SECRETS_KEY) {
    cached = {
      secret: env.WEBHOOK_SECRETS_KEY,
      key: derivedSecret(env, "cohort file links v1").then((s) =>
        crypto.subtle.importKey("raw", s, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]),
      ),
    };
  }
  return cached.key;
}

async function mac(env: SecretEnv, body: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.sign("HMAC", await linkKey(env), enc.encode(body))).slice(0, 16);
}

/** The token of a ref (see the header). */
export async function signFileRef(env: object, ref: FileRef): Promise<string> {
  const body = b64url(enc.encode(JSON.stringify(ref)));
  return `${body}.${b64url(await mac(env as SecretEnv, body))}`;
}

/** The ref a token names, when it verifies and has not expired (see the header). */
export async function readFileRef(env: object, token: string, nowSec: number): Promise<FileRef | null> {
  const m = /^([A-Za-z0-9_-]{8,2000})\.([A-Za-z0-9_-]{22})$/.exec(token);
  if (!m) return null;
  try {
    const want = await mac(env as SecretEnv, m[1]!);
    const got = unb64url(m[2]!);
    if (got.length !== want.length) return null;
    let diff = 0;
    for (let i = 0; i < want.length; i++) diff |= want[i]! ^ got[i]!;
    if (diff !== 0) return null;
    const ref = JSON.parse(new TextDecoder().decode(unb64url(m[1]!))) as FileRef;
    return typeof ref.x === "number" && ref.x > nowSec ? ref : null;
  } catch {
    return null;
  }
}
