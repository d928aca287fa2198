/**
 * DKIM verification (RFC 6376 §6) with WebCrypto: rsa-sha256 and ed25519-sha256 (RFC 8463),
 * "simple" and "relaxed" canonicalisation of header and body, the `l=` body length.
 *
 * DESCRIPTION
 *   verifyDkim(message, lookup, opts?)  one verdict per DKIM-Signature field (the first
 *       opts.max, default 5, from the top): { domain, selector, result, why }. result is
 *       "pass", "fail" (the body hash or the signature does not match, the signature expired,
 *       a key revoked), "neutral" (an algorithm not supported here, such as rsa-sha1, or a key
 *       published in testing mode, t=y), "permerror" (a malformed signature or key record) or
 *       "temperror" (the key could not be looked up: `lookup` answered null).
 *       `lookup(name)` returns the TXT strings of one record each (joined per record) or null
 *       for a temporary failure; the key is at `<s>._domainkey.<d>`.
 *
 * INVARIANTS
 *   Pure but for crypto.subtle and the injected lookup. The message is read as octets; bare LF
 *   line ends are taken as CRLF (the form it travelled in). A signature must cover From (§5.4).
 *
 * ERRORS
 *   None thrown: every problem is a verdict.
 */
import { canonBodyRelaxed, canonHeaderRelaxed, splitMessage, type HeaderField } from "./dkim-canon";
import { base64ToBytes, binaryToBytes, bytesToBase64, bytesToBinary } from "./encoding";

/** One signature's outcome. */
export interface DkimVerdict {
  domain: string;
  selector: string;
  result: "pass" | "fail" | "neutral" | "permerror" | "temperror";
  why: string;
}

/** TXT look-up: the records' texts, or null for a temporary failure. */
export type TxtLookup = (name: string) => Promise<string[] | null>;

/** `tag=value` pairs of a DKIM-Signature or key record, whitespace removed from values. */
function tags(text: string): Map<string, string> | null {
  const out = new Map<string, string>();
  for (const part of text.split(";")) {
    if (part.trim() === "") continue;
    const eq = part.indexOf("=");
    if (eq < 0) return null;
    const name = part.slice(0, eq).trim();
    if (!/^[A-Za-z][A-Za-z0-9_]*$/.test(name) || out.has(name)) return null;
    out.set(name, part.slice(eq + 1).replace(/[ \t\r\n]+/g, ""));
  }
  return out;
}

function canonBodySimple(body: string): string {
  const b = body.replace(/(\r\n)+$/, "");
  return b === "" ? "\r\n" : `${b}\r\n`;
}

/** The signature field with its b= value emptied, as it is hashed (§3.7). */
function withoutB(raw: string): string {
  const colon = raw.indexOf(":") + 1;
  return raw.slice(0, colon) + raw.slice(colon).replace(/(^|;)([ \t\r\n]*b[ \t\r\n]*=)[^;]*/, "$1$2");
}

/** The fields `h` selects: each name takes the next unused instance from the bottom (§5.4.2). */
function selected(fields: readonly HeaderField[], h: readonly string[]): HeaderField[] {
  const used = new Map<string, number>();
  const out: HeaderField[] = [];
  for (const name of h) {
    const present = fields.filter((f) => f.key === name);
    const n = used.get(name) ?? 0;
    used.set(name, n + 1);
    const f = present[present.length - 1 - n];
    if (f) out.push(f);
  }
  return out;
}

async function sha256(bytes: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
}

/** A DER length prefix. */
function derLength(n: number): number[] {
  if (n < 0x80) return [n];
  const bytes: number[] = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return [0x80 | bytes.length, ...bytes];
}

/** An RSAPublicKey (PKCS#1) wrapped as SubjectPublicKeyInfo, for keys published bare. */
function spkiOfPkcs1(pkcs1: Uint8Array): Uint8Array {
  const algId = [0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00];
  const bitString = [0x03, ...derLength(pkcs1.length + 1), 0x00, ...pkcs1];
  return Uint8Array.from([0x30, ...derLength(algId.length + bitString.length), ...algId, ...bitString]);
}

async function importKey(alg: string, der: Uint8Array): Promise<CryptoKey | null> {
  try {
    if (alg === "ed25519-sha256")
      return await crypto.subtle.importKey("raw", der, { name: "Ed25519" }, false, ["verify"]);
    const params = { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" };
    try {
      return await crypto.subtle.importKey("spki", der, params, false, ["verify"]);
    } catch {
      return await crypto.subtle.importKey("spki", spkiOfPkcs1(der), params, false, ["verify"]);
    }
  } catch {
    return null;
  }
}

type Verdict = Omit<DkimVerdict, "domain" | "selector">;

async function verifyOne(
  field: HeaderField,
  fields: readonly HeaderField[],
  body: string,
  lookup: TxtLookup,
  nowSec: number | null,
): Promise<DkimVerdict> {
  const t = tags(field.raw.slice(field.raw.indexOf(":") + 1));
  const domain = (t?.get("d") ?? "").toLowerCase();
  const selector = t?.get("s") ?? "";
  const done = (v: Verdict): DkimVerdict => ({ domain, selector, ...v });
  const complete = t !== null && t.get("v") === "1" && domain && selector && t.get("h") && t.get("bh") && t.get("b");
  if (!complete || t === null) return done({ result: "permerror", why: "malformed signature" });
  const alg = (t.get("a") ?? "").toLowerCase();
  if (alg !== "rsa-sha256" && alg !== "ed25519-sha256")
    return done({ result: "neutral", why: `algorithm ${alg || "none"} is not supported` });
  const h = t.get("h")!.toLowerCase().split(":").filter(Boolean);
  if (!h.includes("from")) return done({ result: "permerror", why: "the signature does not cover From" });
  const [hc, bc = "simple"] = (t.get("c") ?? "simple/simple").toLowerCase().split("/");
  if (!["simple", "relaxed"].includes(hc!) || !["simple", "relaxed"].includes(bc))
    return done({ result: "permerror", why: "unknown canonicalisation" });
  const i = t.get("i");
  const iDomain = i === undefined ? null : i.slice(i.lastIndexOf("@") + 1).toLowerCase();
  if (iDomain !== null && !`.${iDomain}`.endsWith(`.${domain}`))
    return done({ result: "permerror", why: "i= is not within d=" });
  const x = t.get("x");
  if (x !== undefined && nowSec !== null && /^\d+$/.test(x) && Number(x) < nowSec)
    return done({ result: "fail", why: "the signature expired" });
  let canonBody = bc === "relaxed" ? canonBodyRelaxed(body) : canonBodySimple(body);
  const l = t.get("l");
  if (l !== undefined) {
    if (!/^\d+$/.test(l) || Number(l) > canonBody.length)
      return done({ result: "permerror", why: "l= is longer than the body" });
    canonBody = canonBody.slice(0, Number(l));
  }
  if (bytesToBase64(await sha256(binaryToBytes(canonBody))) !== t.get("bh"))
    return done({ result: "fail", why: "the body hash does not match" });
  const records = await lookup(`${selector}._domainkey.${domain}`);
  if (records === null) return done({ result: "temperror", why: "the key could not be looked up" });
  const keys = records.map((r) => tags(r)).filter((k): k is Map<string, string> => k !== null && k.has("p"));
  if (keys.length !== 1)
    return done({ result: "permerror", why: keys.length === 0 ? "no key record" : "more than one key record" });
  const key = keys[0]!;
  const p = key.get("p")!;
  if (p === "") return done({ result: "fail", why: "the key is revoked" });
  const k = (key.get("k") ?? "rsa").toLowerCase();
  if (`${k}-sha256` !== alg) return done({ result: "permerror", why: `key type ${k} does not fit ${alg}` });
  const der = base64ToBytes(p);
  const cryptoKey = der === null ? null : await importKey(alg, der);
  if (cryptoKey === null) return done({ result: "permerror", why: "the key record's p= is not a usable key" });
  const canon = (raw: string) => (hc === "relaxed" ? canonHeaderRelaxed(raw) : raw);
  const data =
    selected(fields, h)
      .map((f) => `${canon(f.raw)}\r\n`)
      .join("") + canon(withoutB(field.raw));
  const sig = base64ToBytes(t.get("b")!);
  if (sig === null) return done({ result: "permerror", why: "b= is not base64" });
  const bytes = binaryToBytes(data);
  const ok =
    alg === "rsa-sha256"
      ? await crypto.subtle.verify("RSASSA-PKCS1-v1_5", cryptoKey, sig, bytes).catch(() => false)
      : await crypto.subtle.verify("Ed25519", cryptoKey, sig, await sha256(bytes)).catch(() => false);
  if (!ok) return done({ result: "fail", why: "the signature does not verify" });
  if ((key.get("t") ?? "").split(":").includes("y"))
    return done({ result: "neutral", why: "the key is in testing mode (t=y)" });
  return done({ result: "pass", why: "" });
}

/** See the header. */
export async function verifyDkim(
  message: Uint8Array,
  lookup: TxtLookup,
  opts: { max?: number; nowSec?: number } = {},
): Promise<DkimVerdict[]> {
  const bin = bytesToBinary(message).replace(/\r?\n/g, "\r\n");
  const { fields, body } = splitMessage(bin);
  const sigs = fields.filter((f) => f.key === "dkim-signature").slice(0, opts.max ?? 5);
  return Promise.all(sigs.map((f) => verifyOne(f, fields, body, lookup, opts.nowSec ?? null)));
}
