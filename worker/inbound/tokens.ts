/**
 * The key that signs token addresses (worker/mail/verp.ts), once per isolate.
 *
 * DESCRIPTION
 *   addressTokenKey(env)  the HMAC key derived from WEBHOOK_SECRETS_KEY for the purpose
 *                         "cohort address tokens v1" (the local key under development and test;
 *                         production without the secret never gets here: config-check.ts).
 */
import { tokenKey } from "../mail/verp";
import { derivedSecret } from "../lib/secrets";

let cached: { secret: string | undefined; key: Promise<CryptoKey> } | null = null;

/** See the header. */
export function addressTokenKey(env: Env): Promise<CryptoKey> {
  const e = env as unknown as { WEBHOOK_SECRETS_KEY?: string; COHORT_ENV: string };
  if (cached === null || cached.secret !== e.WEBHOOK_SECRETS_KEY) {
    cached = { secret: e.WEBHOOK_SECRETS_KEY, key: derivedSecret(e, "cohort address tokens v1").then(tokenKey) };
  }
  return cached.key;
}
