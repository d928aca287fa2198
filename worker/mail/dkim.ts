/**
 * DKIM signing (RFC 6376) with relaxed/relaxed canonicalisation, rsa-sha256 and ed25519-sha256
 * (RFC 8463), using WebCrypto only.
 *
 * DESCRIPTION
 *   signDkim(message, signers)  prepends one DKIM-Signature per signer (e.g. RSA and Ed25519) to
 *                               the message and returns it (string in → string out, bytes in →
 *                               bytes out). All signatures cover the same original message; none
 *                               signs another DKIM-Signature.
 *   importDkimKey(pem, alg)     PKCS#8 PEM ("BEGIN PRIVATE KEY") → CryptoKey; for ed25519 also a
 *                               base64 raw 32-byte seed. Callers may import once and reuse the key.
 *
 *   Tags: v=1; a; c=relaxed/relaxed; d; s; t (when signTime is given); x (when also expiresInSec);
 *   h; bh; b. `h=` lists the present headers of `headerList` (default DEFAULT_SIGNED_HEADERS), each
 *   as often as it occurs, plus one extra entry for OVERSIGNED_HEADERS (From among them) unless
 *   `oversign: false`. The header is folded at tag boundaries and b= is wrapped.
 *
 * INVARIANTS
 *   Line breaks are normalised to CRLF, and a final CRLF is added if missing, before signing and in
 *   the returned message, because SMTP transmits exactly that and a signature over anything else
 *   would not verify (it also sidesteps verifiers' disagreement on bodies without a final CRLF). Same inputs (with signTime
 *   fixed) → same output for ed25519 (RSASSA-PKCS1-v1_5 is deterministic too).
 *
 * ERRORS
 *   DkimError for a PEM that is not PKCS#8, a key WebCrypto rejects, an unknown algorithm, or a
 *   domain/selector that is not a DNS name. Never throws for message content.
 */
import {
  canonBodyRelaxed,
  canonHeaderRelaxed,
  DEFAULT_SIGNED_HEADERS,
  selectHeaders,
  splitMessage,
} from "./dkim-canon";
import { base64ToBytes, binaryToBytes, bytesToBase64, bytesToBinary, utf8Encode } from "./encoding";
import { DkimError } from "./errors";
import { foldHeader } from "./header";

/** Supported signing algorithms. */
export type DkimAlgorithm = "rsa-sha256" | "ed25519-sha256";

/** One signature to add. */
export type DkimSigner = {
  /** Signing domain (d=); U-labels are not accepted, pass punycode. */
  domain: string;
  /** Selector (s=); the public key lives at `<selector>._domainkey.<domain>`. */
  selector: string;
  algorithm: DkimAlgorithm;
  /** PKCS#8 PEM, a base64 raw Ed25519 seed, or an already imported CryptoKey. */
  privateKey: string | CryptoKey;
  /** Header names to sign when present. Default: DEFAULT_SIGNED_HEADERS. */
  headerList?: readonly string[];
  /** List OVERSIGNED_HEADERS once more than they occur. Default: true. */
  oversign?: boolean;
  /** Signature timestamp (t=). Default: omitted. */
  signTime?: Date;
  /** Signature lifetime in seconds (x = t + this); needs signTime. Default: no expiry. */
  expiresInSec?: number;
};

const PKCS8_ED25519_PREFIX = [
  0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];
const DNS_NAME_RE = /^(?!-)[A-Za-z0-9_-]{1,63}(?:\.(?!-)[A-Za-z0-9_-]{1,63})*$/;

/** Imports a DKIM private key for `algorithm`. */
export async function importDkimKey(pem: string, algorithm: DkimAlgorithm): Promise<CryptoKey> {
  const params =
    algorithm === "rsa-sha256"
      ? { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }
      : algorithm === "ed25519-sha256"
        ? { name: "Ed25519" }
        : null;
  if (params === null) throw new DkimError(`unsupported DKIM algorithm ${String(algorithm)}`);
  if (/-----BEGIN (RSA |EC |ENCRYPTED )PRIVATE KEY-----/.test(pem)) {
    throw new DkimError("DKIM key must be an unencrypted PKCS#8 PEM (-----BEGIN PRIVATE KEY-----)");
  }
  const body = /-----BEGIN PRIVATE KEY-----([\s\S]*?)-----END PRIVATE KEY-----/.exec(pem)?.[1] ?? pem;
  let der = base64ToBytes(body);
  if (der === null) throw new DkimError("DKIM key is neither a PKCS#8 PEM nor base64");
  if (algorithm === "ed25519-sha256" && der.length === 32) der = Uint8Array.from([...PKCS8_ED25519_PREFIX, ...der]);
  try {
    return await crypto.subtle.importKey("pkcs8", der, params, false, ["sign"]);
  } catch (e) {
    throw new DkimError(`DKIM key rejected for ${algorithm}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** Signs `message` with each signer and returns it with the DKIM-Signature fields prepended. */
export async function signDkim(message: string, signers: DkimSigner | readonly DkimSigner[]): Promise<string>;
export async function signDkim(message: Uint8Array, signers: DkimSigner | readonly DkimSigner[]): Promise<Uint8Array>;
export async function signDkim(
  message: string | Uint8Array,
  signers: DkimSigner | readonly DkimSigner[],
): Promise<string | Uint8Array> {
  // SMTP carries CRLF line breaks and a final CRLF; sign exactly what the receiver will see.
  const toCrlf = (s: string) => s.replace(/\r\n|\r|\n/g, "\r\n").replace(/(?<!\r\n)$/, "\r\n");
  const bin = toCrlf(bytesToBinary(typeof message === "string" ? utf8Encode(message) : message));
  const { fields, body } = splitMessage(bin);
  const bh = bytesToBase64(await sha256(binaryToBytes(canonBodyRelaxed(body))));
  const list = Array.isArray(signers) ? (signers as readonly DkimSigner[]) : [signers as DkimSigner];
  const sigs: string[] = [];
  for (const s of list) sigs.push(await signatureField(fields, bh, s));
  const prefix = sigs.map((f) => f + "\r\n").join("");
  return typeof message === "string" ? prefix + toCrlf(message) : binaryToBytes(prefix + bin);
}

/** Builds one complete, folded DKIM-Signature field. */
async function signatureField(
  fields: ReturnType<typeof splitMessage>["fields"],
  bh: string,
  s: DkimSigner,
): Promise<string> {
  for (const [tag, v] of [
    ["domain", s.domain],
    ["selector", s.selector],
  ] as const) {
    if (!DNS_NAME_RE.test(v)) throw new DkimError(`DKIM ${tag} "${v}" is not an ASCII DNS name`);
  }
  const key = typeof s.privateKey === "string" ? await importDkimKey(s.privateKey, s.algorithm) : s.privateKey;
  const { h, selected } = selectHeaders(fields, s.headerList ?? DEFAULT_SIGNED_HEADERS, s.oversign ?? true);
  const unsigned = foldHeader("DKIM-Signature", [...tagTokens(s, h), `bh=${bh};`, "b="]);
  const data = selected.map((f) => canonHeaderRelaxed(f.raw) + "\r\n").join("") + canonHeaderRelaxed(unsigned);
  const b = bytesToBase64(await signBytes(key, s.algorithm, binaryToBytes(data)));
  return unsigned + wrapSignature(b, unsigned.length - unsigned.lastIndexOf("\n") - 1);
}

/** The v/a/c/d/s/t/x/h tag tokens; h= is split at colons so the field can fold. */
function tagTokens(s: DkimSigner, h: readonly string[]): string[] {
  const tokens = ["v=1;", `a=${s.algorithm};`, "c=relaxed/relaxed;", `d=${s.domain};`, `s=${s.selector};`];
  if (s.signTime !== undefined) {
    const t = Math.floor(s.signTime.getTime() / 1000);
    tokens.push(`t=${t};`);
    if (s.expiresInSec !== undefined) tokens.push(`x=${t + Math.max(1, Math.floor(s.expiresInSec))};`);
  }
  const hTokens: string[] = [];
  let cur = "h=";
  h.forEach((name, i) => {
    const piece = name + (i < h.length - 1 ? ":" : ";");
    if (cur.length + piece.length > 70) {
      hTokens.push(cur);
      cur = "";
    }
    cur += piece;
  });
  return [...tokens, ...hTokens, cur];
}

/** Wraps the b= value: fill the current line to 78 columns, then 76-char continuation lines. */
function wrapSignature(b: string, col: number): string {
  const first = Math.max(0, 78 - col);
  const lines = [b.slice(0, first)];
  for (let i = first; i < b.length; i += 76) lines.push(" " + b.slice(i, i + 76));
  return lines.join("\r\n");
}

async function sha256(bytes: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
}

/** rsa-sha256 signs the data (WebCrypto hashes it); ed25519-sha256 signs its SHA-256 (RFC 8463 §3). */
async function signBytes(key: CryptoKey, alg: DkimAlgorithm, data: Uint8Array): Promise<Uint8Array> {
  if (alg === "rsa-sha256") return new Uint8Array(await crypto.subtle.sign("RSASSA-PKCS1-v1_5", key, data));
  return new Uint8Array(await crypto.subtle.sign("Ed25519", key, await sha256(data)));
}
