/**
 * The operator's DKIM keys (the DKIM_KEYS secret): the fallback of domains/sender.ts for the
 * operator's own domains (and, under COHORT_ENV development or test, for any sender), never for a
 * domain a tenant has verified.
 *
 * DESCRIPTION
 *   signersFor(env, domain)  the DKIM signers configured for a sender domain, from the secret
 *                            DKIM_KEYS: a JSON array of { domain, selector, algorithm
 *                            ("rsa-sha256" | "ed25519-sha256"), private_key (PKCS#8 PEM or base64
 *                            Ed25519 seed) }. Several entries for one domain sign with each
 *                            (e.g. RSA and Ed25519). No secret, or no entry: no signature.
 *
 * ERRORS
 *   A malformed DKIM_KEYS is an operator error: it is logged (without the keys) and the message
 *   goes out unsigned rather than being refused.
 */
import type { DkimAlgorithm, DkimSigner } from "../mail";

/** The optional secret holding DKIM keys. */
type DkimEnv = { DKIM_KEYS?: string };

type KeyEntry = { domain: string; selector: string; algorithm: DkimAlgorithm; private_key: string };

function parseKeys(raw: string | undefined): KeyEntry[] {
  if (!raw) return [];
  try {
    const v: unknown = JSON.parse(raw);
    if (!Array.isArray(v)) throw new Error("not an array");
    return v.filter(
      (e): e is KeyEntry =>
        typeof e === "object" &&
        e !== null &&
        typeof e.domain === "string" &&
        typeof e.selector === "string" &&
        (e.algorithm === "rsa-sha256" || e.algorithm === "ed25519-sha256") &&
        typeof e.private_key === "string",
    );
  } catch (e) {
    // Never the parser's message: it quotes the input, and the input is private keys.
    console.error(
      JSON.stringify({
        error: "DKIM_KEYS is not a JSON array of keys; messages go out unsigned",
        reason: e instanceof SyntaxError ? "not JSON" : "not an array",
        length: raw.length,
      }),
    );
    return [];
  }
}

/** The signers configured for `domain` (lower-case ASCII). */
export function signersFor(env: Env, domain: string): DkimSigner[] {
  return parseKeys((env as unknown as DkimEnv).DKIM_KEYS)
    .filter((k) => k.domain.toLowerCase() === domain)
    .map((k) => ({
      domain: k.domain.toLowerCase(),
      selector: k.selector,
      algorithm: k.algorithm,
      privateKey: k.private_key,
      signTime: new Date(),
    }));
}
