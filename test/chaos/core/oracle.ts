/**
 * The fuzz campaign's oracle: an independent judgement of whether an API request is valid,
 * written from the Resend API rules (shared/design/api-conventions.md §1–3) and RFC 5321/5322,
 * never from the relay's own validator.
 *
 * DESCRIPTION
 *   judgeEmail(value, limits)     a POST /emails body (parsed JSON, or undefined when the text
 *                                 is not JSON) → Verdict.
 *   judgeBatch(value, limits)     a POST /emails/batch body → { whole, items } (whole: array
 *                                 shape and count; items: each email's Verdict).
 *   judgeRaw(value, limits)       a POST /relay/messages/raw body → Verdict (envelope, encoding,
 *                                 and header-injection rules only; the message text itself is
 *                                 generated well-formed unless mutated, see fuzz.ts).
 *   judgeIdempotencyKey(key)      the Idempotency-Key header: 1–256 printable ASCII, no space.
 *   judgeAddress(text)            one address or "Name <address>".
 *   isStrictBase64(text)          canonical base64 (length multiple of 4, `=` only as padding).
 *
 *   A Verdict is { expect: "reject" | "accept" | "either", why }. "either" marks inputs the rules
 *   leave open (internationalized addresses, reserved custom header names, odd but decodable
 *   base64, sizes near the limit): the campaign then only requires that an accepted request
 *   parses and delivers. The first "reject" reason found wins.
 *
 * INVARIANTS
 *   Pure: no I/O, no clock, no randomness. The same input always gives the same verdict.
 */

/** The limits the oracle checks against (the relay's configured values). */
export interface Limits {
  maxRecipients: number;
  /** Largest accepted request/message, bytes. */
  maxMessageBytes: number;
}

/** What the oracle expects of a request. */
export interface Verdict {
  expect: "reject" | "accept" | "either";
  why: string;
}

const ACCEPT: Verdict = { expect: "accept", why: "valid" };

const ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
const DOT_ATOM = new RegExp(`^${ATEXT}+(\\.${ATEXT}+)*$`);
const LABEL = /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
const CRLF = /[\r\n]/;
// eslint-disable-next-line no-control-regex
const NON_ASCII = /[^\x00-\x7f]/;
const TAG = /^[A-Za-z0-9_-]{1,256}$/;
const FIELD_NAME = /^[\x21-\x39\x3b-\x7e]+$/;
const RESERVED_HEADERS = new Set([
  "from",
  "to",
  "cc",
  "bcc",
  "reply-to",
  "subject",
  "date",
  "message-id",
  "mime-version",
  "content-type",
  "content-transfer-encoding",
  "sender",
  "return-path",
  "received",
]);

function reject(why: string): Verdict {
  return { expect: "reject", why };
}

function either(why: string): Verdict {
  return { expect: "either", why };
}

/** Combines verdicts: any reject wins, then either, else accept. */
function all(vs: Verdict[]): Verdict {
  return vs.find((v) => v.expect === "reject") ?? vs.find((v) => v.expect === "either") ?? ACCEPT;
}

function judgeBareAddress(addr: string): Verdict {
  if (CRLF.test(addr)) return reject("CR/LF in an address");
  const at = addr.lastIndexOf("@");
  if (at <= 0 || at === addr.length - 1) return reject(`no local part or domain: ${JSON.stringify(addr.slice(0, 40))}`);
  const local = addr.slice(0, at),
    domain = addr.slice(at + 1);
  if (NON_ASCII.test(addr)) {
    // SMTPUTF8 / IDN: Resend's rules do not say; structural checks still apply.
    if (
      /[\s<>()\[\],;:\\"@]/.test(local) ||
      /[\s<>()\[\],;:\\"@]/.test(domain) ||
      domain.split(".").some((l) => l === "")
    )
      return reject("malformed internationalized address");
    return either("internationalized address");
  }
  if (local.startsWith('"')) return either("quoted local part");
  if (!DOT_ATOM.test(local)) return reject(`local part not a dot-atom: ${JSON.stringify(local.slice(0, 40))}`);
  if (local.length > 64) return reject("local part over 64 octets");
  if (addr.length > 254) return reject("address over 254 octets");
  if (domain.startsWith("[")) return either("address literal");
  const labels = domain.split(".");
  if (labels.length < 2 || !labels.every((l) => LABEL.test(l)))
    return reject(`domain not a hostname: ${JSON.stringify(domain.slice(0, 40))}`);
  if (/^\d+$/.test(labels[labels.length - 1]!)) return reject("numeric top-level label");
  return ACCEPT;
}

/** One address, bare or as `Name <address>`. */
export function judgeAddress(text: unknown): Verdict {
  if (typeof text !== "string") return reject("address is not a string");
  if (text.trim() === "") return reject("empty address");
  if (CRLF.test(text)) return reject("CR/LF in an address field");
  // [\s\S]: a display name may hold U+2028/U+2029, which `.` does not match.
  const m = /^([\s\S]*)<([^<>]*)>\s*$/.exec(text);
  if (!m) {
    if (/[<>]/.test(text)) return reject("unbalanced angle brackets");
    return judgeBareAddress(text.trim());
  }
  const name = m[1]!.trim();
  const inner = judgeBareAddress(m[2]!.trim());
  if (inner.expect === "reject") return inner;
  if (/[",;:\\()\[\]@]/.test(name)) return all([inner, either("display name with specials")]);
  return inner;
}

function addressList(value: unknown, field: string, required: boolean): { verdict: Verdict; addrs: string[] } {
  if (value === undefined) return { verdict: required ? reject(`missing ${field}`) : ACCEPT, addrs: [] };
  if (typeof value === "string") {
    const v = judgeAddress(value);
    return { verdict: v, addrs: [value] };
  }
  if (!Array.isArray(value)) return { verdict: reject(`${field} is neither a string nor an array`), addrs: [] };
  if (value.length === 0)
    return { verdict: required ? reject(`empty ${field}`) : either(`empty ${field} array`), addrs: [] };
  return {
    verdict: all(value.map((a) => judgeAddress(a))),
    addrs: value.filter((a): a is string => typeof a === "string"),
  };
}

function bareOf(addr: string): string {
  const m = /<([^<>]*)>\s*$/.exec(addr);
  return (m ? m[1]! : addr).trim().toLowerCase();
}

/** Canonical base64 (RFC 4648 §4, padded). */
export function isStrictBase64(text: string): boolean {
  return text.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(text);
}

function decodedBytes(b64: string): number {
  const clean = b64.replace(/\s/g, "");
  return Math.floor((clean.length * 3) / 4) - (clean.endsWith("==") ? 2 : clean.endsWith("=") ? 1 : 0);
}

function judgeAttachment(a: unknown, i: number): Verdict {
  if (a === null || typeof a !== "object" || Array.isArray(a)) return reject(`attachments[${i}] is not an object`);
  const at = a as Record<string, unknown>;
  const vs: Verdict[] = [];
  for (const k of ["filename", "content_type", "content_id", "path"] as const) {
    if (at[k] === undefined) continue;
    if (typeof at[k] !== "string") vs.push(reject(`attachments[${i}].${k} is not a string`));
    else if (CRLF.test(at[k] as string)) vs.push(reject(`CR/LF in attachments[${i}].${k}`));
  }
  if (at.content === undefined)
    vs.push(
      at.path === undefined
        ? reject(`attachments[${i}] has neither content nor path`)
        : either("attachment by path (not fetched by a relay)"),
    );
  else if (typeof at.content !== "string") vs.push(reject(`attachments[${i}].content is not a string`));
  else if (/[^A-Za-z0-9+/=\s]/.test(at.content)) vs.push(reject(`attachments[${i}].content has non-base64 characters`));
  else if (!isStrictBase64(at.content)) vs.push(either("base64 without canonical padding or with whitespace"));
  if (typeof at.filename === "string" && (at.filename.length > 255 || NON_ASCII.test(at.filename)))
    vs.push(either("long or non-ASCII filename"));
  if (
    at.content_type !== undefined &&
    typeof at.content_type === "string" &&
    !/^[\w.+-]+\/[\w.+-]+$/.test(at.content_type)
  )
    vs.push(either("unusual content_type"));
  return all(vs);
}

function judgeHeaders(h: unknown): Verdict {
  if (h === undefined) return ACCEPT;
  if (h === null || typeof h !== "object" || Array.isArray(h)) return reject("headers is not an object");
  const vs: Verdict[] = [];
  for (const [name, value] of Object.entries(h as Record<string, unknown>)) {
    if (typeof value !== "string") vs.push(reject(`header ${JSON.stringify(name)} value is not a string`));
    else if (CRLF.test(value)) vs.push(reject(`CR/LF in header ${JSON.stringify(name)}`));
    else if (NON_ASCII.test(value) || value.length > 900) vs.push(either("non-ASCII or long header value"));
    if (!FIELD_NAME.test(name)) vs.push(reject(`invalid header name ${JSON.stringify(name.slice(0, 40))}`));
    else if (RESERVED_HEADERS.has(name.toLowerCase())) vs.push(either(`reserved header ${name}`));
  }
  return all(vs);
}

function judgeTags(t: unknown): Verdict {
  if (t === undefined) return ACCEPT;
  if (!Array.isArray(t)) return reject("tags is not an array");
  const vs = t.map((tag, i) => {
    if (tag === null || typeof tag !== "object") return reject(`tags[${i}] is not an object`);
    const { name, value } = tag as { name?: unknown; value?: unknown };
    if (typeof name !== "string" || !TAG.test(name)) return reject(`tags[${i}].name not [A-Za-z0-9_-]{1,256}`);
    if (typeof value !== "string" || !TAG.test(value)) return reject(`tags[${i}].value not [A-Za-z0-9_-]{1,256}`);
    return ACCEPT;
  });
  if (t.length > 50) vs.push(either("more than 50 tags"));
  return all(vs);
}

function optionalString(v: unknown, field: string): Verdict {
  return v === undefined || typeof v === "string" ? ACCEPT : reject(`${field} is not a string`);
}

/** A POST /emails body. */
export function judgeEmail(value: unknown, limits: Limits, bodyBytes = 0): Verdict {
  if (value === undefined) return reject("not JSON");
  if (value === null || typeof value !== "object" || Array.isArray(value)) return reject("body is not an object");
  const e = value as Record<string, unknown>;
  if (bodyBytes > limits.maxMessageBytes) return reject("request over the size limit");
  const from = e.from === undefined ? reject("missing from") : judgeAddress(e.from);
  const to = addressList(e.to, "to", true),
    cc = addressList(e.cc, "cc", false),
    bcc = addressList(e.bcc, "bcc", false);
  const replyTo = addressList(e.reply_to, "reply_to", false);
  const subject =
    typeof e.subject !== "string"
      ? reject("subject missing or not a string")
      : CRLF.test(e.subject)
        ? reject("CR/LF in subject")
        : ACCEPT;
  const count = new Set([...to.addrs, ...cc.addrs, ...bcc.addrs].map(bareOf)).size;
  const vs: Verdict[] = [
    from,
    to.verdict,
    cc.verdict,
    bcc.verdict,
    replyTo.verdict,
    subject,
    optionalString(e.html, "html"),
    optionalString(e.text, "text"),
    judgeHeaders(e.headers),
    judgeTags(e.tags),
  ];
  if (count > limits.maxRecipients) vs.push(reject(`${count} recipients (limit ${limits.maxRecipients})`));
  if (e.attachments !== undefined) {
    if (!Array.isArray(e.attachments)) vs.push(reject("attachments is not an array"));
    else {
      vs.push(...e.attachments.map(judgeAttachment));
      const bytes = e.attachments.reduce(
        (n: number, a) =>
          n +
          (a && typeof a === "object" && typeof (a as { content?: unknown }).content === "string"
            ? decodedBytes((a as { content: string }).content)
            : 0),
        0,
      );
      // Base64 in MIME grows 4/3 plus line breaks: close to the limit is left open.
      if (bytes * 1.4 > limits.maxMessageBytes * 0.9) vs.push(either("composed size near or over the limit"));
      if (e.attachments.length > 100) vs.push(either("more than 100 attachments"));
    }
  }
  if (e.scheduled_at !== undefined)
    vs.push(
      typeof e.scheduled_at === "string"
        ? either("scheduled_at (natural language allowed)")
        : reject("scheduled_at is not a string"),
    );
  if (e.html === undefined && e.text === undefined) vs.push(either("neither html nor text"));
  if (
    typeof e.subject === "string" &&
    NON_ASCII.test(e.subject) === false &&
    /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/.test(e.subject)
  )
    vs.push(either("control characters in subject"));
  return all(vs);
}

/** A POST /emails/batch body: the array as a whole and each item. */
export function judgeBatch(value: unknown, limits: Limits): { whole: Verdict; items: Verdict[] } {
  if (value === undefined) return { whole: reject("not JSON"), items: [] };
  if (!Array.isArray(value)) return { whole: reject("batch body is not an array"), items: [] };
  if (value.length === 0) return { whole: reject("empty batch"), items: [] };
  if (value.length > 100) return { whole: reject("more than 100 emails"), items: [] };
  return { whole: ACCEPT, items: value.map((v) => judgeEmail(v, limits)) };
}

/** A POST /relay/messages/raw body. */
export function judgeRaw(value: unknown, limits: Limits, bodyBytes = 0): Verdict {
  if (value === undefined) return reject("not JSON");
  if (value === null || typeof value !== "object" || Array.isArray(value)) return reject("body is not an object");
  const r = value as Record<string, unknown>;
  if (bodyBytes > limits.maxMessageBytes) return reject("request over the size limit");
  const vs: Verdict[] = [];
  if (typeof r.mail_from !== "string") vs.push(reject("mail_from missing or not a string"));
  else if (CRLF.test(r.mail_from)) vs.push(reject("CR/LF in mail_from"));
  else if (r.mail_from === "") vs.push(either("null reverse path"));
  else vs.push(judgeBareAddress(r.mail_from));
  const rc = addressList(r.rcpt_to, "rcpt_to", true);
  vs.push(rc.verdict);
  if (rc.addrs.some((a) => /[<>]/.test(a))) vs.push(either("rcpt_to with angle brackets"));
  if (new Set(rc.addrs.map(bareOf)).size > limits.maxRecipients) vs.push(reject("too many recipients"));
  const enc = r.encoding ?? "utf8";
  if (enc !== "utf8" && enc !== "base64") vs.push(reject("unknown encoding"));
  if (typeof r.message !== "string" || r.message === "") vs.push(reject("message missing or empty"));
  else if (enc === "base64" && /[^A-Za-z0-9+/=\s]/.test(r.message)) vs.push(reject("message is not base64"));
  else if (enc === "base64" && !isStrictBase64(r.message)) vs.push(either("loose base64 message"));
  vs.push(judgeTags(r.tags));
  return all(vs);
}

/** The Idempotency-Key header (Resend: 1–256 characters; printable ASCII here). */
export function judgeIdempotencyKey(key: string): Verdict {
  if (key.length === 0 || key.length > 256) return reject("idempotency key length");
  if (!/^[\x21-\x7e]+$/.test(key)) return reject("idempotency key not printable ASCII");
  return ACCEPT;
}
