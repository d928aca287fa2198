/**
 * The fuzz campaign's request generator (fast-check): valid Resend-shaped requests with 0–3
 * mutations each, malformed JSON, batches, raw messages, PATCH/GET on real and bogus ids, and
 * Idempotency-Key reuse. Deterministic for a seed (fc.sample with { seed }).
 *
 * DESCRIPTION
 *   generate(n, seed, limits)  n FuzzRequest values. A request carries the endpoint, the JSON
 *       value (or raw text when the JSON is malformed on purpose), optional headers, an
 *       Idempotency-Key slot (reuse with the same or a different body) and, for huge
 *       attachments, only their size (materialise() builds the bytes when sending).
 *   materialise(req)           the request body text.
 */
import fc from "fast-check";
import type { Limits } from "./core/oracle";

/** One generated request. */
export interface FuzzRequest {
  kind: "email" | "batch" | "raw" | "patch" | "get" | "malformed";
  path: string;
  method: "POST" | "PATCH" | "GET";
  /** JSON value to send (undefined with `text`). */
  value?: unknown;
  /** Raw body text (malformed JSON). */
  text?: string;
  headers: Record<string, string>;
  /** Idempotency-Key slot (per worker), and whether to resend the slot's last body. */
  idem?: { slot: number; reuseBody: boolean };
  /** Target a real accepted id (patch/get) rather than a bogus one. */
  realId?: boolean;
  /** Mutations applied (for the report only: the oracle never reads them). */
  tags: string[];
  /** Bytes of a huge attachment to add at send time. */
  hugeBytes?: number;
}

const DOMAINS = ["fuzz.example", "mail.fuzz.example", "fuzz-two.example"];
const INVALID_ADDRS = [
  "",
  " ",
  "plainaddress",
  "@no-local.example",
  "a@",
  "a@@b.example",
  "a b@c.example",
  "a@b..example",
  "<a@b.example",
  "a@b.example>",
  ".a@b.example",
  "a.@b.example",
  "a..b@c.example",
  "a@-b.example",
  "a@b-.example",
  "a@b.123",
  "a@b",
  `${"l".repeat(65)}@b.example`,
  `a@${"d".repeat(250)}.example`,
  "a@b.example, c@d.example",
  "a@[1.2.3]x",
  "Name <>",
  "Name <a@b.example",
];
const INTL_ADDRS = [
  "jürgen@fuzz.example",
  "user@bücher.example",
  "用户@例子.example",
  "δοκιμή@παράδειγμα.example",
  "Jörg <jörg@fuzz.example>",
  "rené@xn--bcher-kva.example",
];
const INJECTIONS = ["\r\n", "\n", "\r", "\r\nBcc: victim@evil.example", "\nX-Injected: yes", "\r\n\r\nbody"];
const BAD_B64 = [
  "!!!not base64!!!",
  "abc",
  "ab=c",
  "====",
  "aGVsbG8",
  "aGVs bG8=",
  "aGVsbG8=\n",
  "-_-_",
  "aGVsbG8=aGVsbG8=",
  "%%%%",
];
const BAD_HEADER_NAMES = ["Bad Name", "X:Colon", "", "X-Ü", "X\tTab", "(comment)x", "X-\u0000"];
const BAD_IDEM_KEYS = ["a b", "x".repeat(257), "tab\tkey"];
const ADDRESS_FIELDS = ["from", "to", "cc", "bcc", "reply_to"] as const;
const CRLF_FIELDS = [
  ...ADDRESS_FIELDS,
  "subject",
  "headerName",
  "headerValue",
  "tagName",
  "tagValue",
  "filename",
  "content_type",
] as const;

const clean = (s: string) => s.replace(/[\r\n<>"\\,;:@()[\]]/g, "");
const local = fc.stringMatching(/^[a-z0-9]{1,10}(\.[a-z0-9]{1,6})?$/);
const addr = fc.tuple(local, fc.constantFrom(...DOMAINS)).map(([l, d]) => `${l}@${d}`);
const name = fc.string({ unit: "grapheme", maxLength: 20 }).map(clean);
const mailbox = fc.oneof(
  addr,
  fc.tuple(name, addr).map(([n, a]) => (n.trim() ? `${n} <${a}>` : a)),
);
const addrList = fc.oneof(mailbox, fc.array(mailbox, { minLength: 1, maxLength: 4 }));
const text = fc.string({ unit: "grapheme", maxLength: 300 });
const subject = fc.string({ unit: "grapheme", maxLength: 80 }).map((s) => s.replace(/[\r\n]/g, " "));
const printable = fc.stringMatching(/^[\x20-\x7e]{0,40}$/);
const headers = fc.dictionary(fc.stringMatching(/^X-[A-Za-z0-9-]{1,12}$/), printable, { maxKeys: 3 });
const token = fc.stringMatching(/^[A-Za-z0-9_-]{1,20}$/);
const tags = fc.array(fc.record({ name: token, value: token }), { maxLength: 3 });
const attachment = fc.record({
  filename: fc.stringMatching(/^[a-z0-9]{1,10}\.(txt|pdf|png)$/),
  content: fc.uint8Array({ maxLength: 400 }).map((b) => Buffer.from(b).toString("base64")),
});

/** A valid POST /emails body. */
const validEmail = fc
  .record({
    from: mailbox,
    to: addrList,
    subject,
    text,
    cc: fc.option(addrList, { nil: undefined }),
    bcc: fc.option(addrList, { nil: undefined }),
    reply_to: fc.option(addrList, { nil: undefined }),
    html: fc.option(
      text.map((t) => `<p>${t.replace(/[<&]/g, "")}</p>`),
      { nil: undefined },
    ),
    headers: fc.option(headers, { nil: undefined }),
    tags: fc.option(tags, { nil: undefined }),
    attachments: fc.option(fc.array(attachment, { minLength: 1, maxLength: 2 }), { nil: undefined }),
  })
  .map((e) => Object.fromEntries(Object.entries(e).filter(([, v]) => v !== undefined)) as Record<string, unknown>);

type Mutation =
  | { k: "crlf"; field: (typeof CRLF_FIELDS)[number]; seq: string; at: number }
  | { k: "type"; field: string; value: unknown }
  | { k: "delete"; field: string }
  | { k: "badaddr" | "intl"; field: (typeof ADDRESS_FIELDS)[number]; value: string }
  | { k: "oversize"; what: "subject" | "recipients" | "tagValue" | "text" | "attachments"; n: number }
  | { k: "b64"; value: string }
  | { k: "huge"; factor: number }
  | { k: "headerName"; value: string }
  | { k: "unknown"; key: string; value: unknown };

const wrongType = fc.oneof(
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc
    .dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 2 })
    .map((d) => JSON.parse(JSON.stringify(d)) as Record<string, number>),
  fc.array(fc.integer(), { maxLength: 3 }),
);
const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  {
    arbitrary: fc.record({
      k: fc.constant("crlf" as const),
      field: fc.constantFrom(...CRLF_FIELDS),
      seq: fc.constantFrom(...INJECTIONS),
      at: fc.nat(30),
    }),
    weight: 5,
  },
  {
    arbitrary: fc.record({
      k: fc.constant("type" as const),
      field: fc.constantFrom(
        "from",
        "to",
        "cc",
        "subject",
        "text",
        "html",
        "headers",
        "tags",
        "attachments",
        "reply_to",
      ),
      value: wrongType,
    }),
    weight: 3,
  },
  {
    arbitrary: fc.record({
      k: fc.constant("delete" as const),
      field: fc.constantFrom("from", "to", "subject", "text"),
    }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      k: fc.constant("badaddr" as const),
      field: fc.constantFrom(...ADDRESS_FIELDS),
      value: fc.constantFrom(...INVALID_ADDRS),
    }),
    weight: 3,
  },
  {
    arbitrary: fc.record({
      k: fc.constant("intl" as const),
      field: fc.constantFrom(...ADDRESS_FIELDS),
      value: fc.constantFrom(...INTL_ADDRS),
    }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      k: fc.constant("oversize" as const),
      what: fc.constantFrom("subject", "recipients", "tagValue", "text", "attachments"),
      n: fc.integer({ min: 1, max: 12 }),
    }),
    weight: 2,
  },
  { arbitrary: fc.record({ k: fc.constant("b64" as const), value: fc.constantFrom(...BAD_B64) }), weight: 2 },
  {
    arbitrary: fc.record({ k: fc.constant("huge" as const), factor: fc.double({ min: 0.2, max: 1.6, noNaN: true }) }),
    weight: 1,
  },
  {
    arbitrary: fc.record({ k: fc.constant("headerName" as const), value: fc.constantFrom(...BAD_HEADER_NAMES) }),
    weight: 1,
  },
  {
    arbitrary: fc.record({
      k: fc.constant("unknown" as const),
      key: fc.stringMatching(/^[a-z_]{1,10}$/),
      value: wrongType,
    }),
    weight: 1,
  },
);

function inject(s: string, seq: string, at: number): string {
  const i = Math.min(at, s.length);
  return s.slice(0, i) + seq + s.slice(i);
}

function firstOf(v: unknown): string {
  const x = Array.isArray(v) ? v[0] : v;
  return typeof x === "string" ? x : JSON.stringify(x ?? "");
}

/** Applies one mutation to an email value (in place); returns the size of a huge attachment. */
function mutate(e: Record<string, unknown>, m: Mutation, limits: Limits): number | undefined {
  switch (m.k) {
    case "crlf": {
      if ((ADDRESS_FIELDS as readonly string[]).includes(m.field))
        e[m.field] = inject(firstOf(e[m.field] ?? "x@fuzz.example"), m.seq, m.at);
      else if (m.field === "subject") e.subject = inject(firstOf(e.subject ?? ""), m.seq, m.at);
      else if (m.field === "headerName") e.headers = { [inject("X-Fuzz", m.seq, m.at)]: "v" };
      else if (m.field === "headerValue") e.headers = { "X-Fuzz": inject("value", m.seq, m.at) };
      else if (m.field === "tagName" || m.field === "tagValue")
        e.tags = [
          {
            name: m.field === "tagName" ? inject("tag", m.seq, m.at) : "tag",
            value: m.field === "tagValue" ? inject("val", m.seq, m.at) : "val",
          },
        ];
      else
        e.attachments = [
          {
            filename: m.field === "filename" ? inject("a.txt", m.seq, m.at) : "a.txt",
            content: "aGVsbG8=",
            ...(m.field === "content_type" ? { content_type: inject("text/plain", m.seq, m.at) } : {}),
          },
        ];
      return undefined;
    }
    case "type":
      e[m.field] = m.value;
      return undefined;
    case "delete":
      delete e[m.field];
      return undefined;
    case "badaddr":
    case "intl":
      e[m.field] = m.value;
      return undefined;
    case "oversize":
      if (m.what === "subject") e.subject = "S".repeat(200 * m.n);
      else if (m.what === "recipients")
        e.to = Array.from({ length: limits.maxRecipients - 6 + m.n }, (_, i) => `r${i}@fuzz.example`);
      else if (m.what === "tagValue") e.tags = [{ name: "t", value: "v".repeat(250 + m.n) }];
      else if (m.what === "text") e.text = "t".repeat(20_000 * m.n);
      else e.attachments = Array.from({ length: 95 + m.n }, (_, i) => ({ filename: `f${i}.txt`, content: "aGk=" }));
      return undefined;
    case "b64":
      e.attachments = [{ filename: "bad.bin", content: m.value }];
      return undefined;
    case "huge":
      return Math.floor((limits.maxMessageBytes * m.factor) / 3) * 3;
    case "headerName":
      e.headers = { [m.value]: "value" };
      return undefined;
    case "unknown":
      e[`x_${m.key}`] = m.value;
      return undefined;
  }
}

function describe(m: Mutation): string {
  return m.k === "crlf"
    ? `crlf:${m.field}`
    : m.k === "oversize"
      ? `oversize:${m.what}`
      : "field" in m
        ? `${m.k}:${m.field}`
        : m.k;
}

/** `arb` in `some` of `some + none` cases, undefined otherwise. */
function sometimes<T>(arb: fc.Arbitrary<T>, some: number, none: number): fc.Arbitrary<T | undefined> {
  return fc.oneof({ arbitrary: arb, weight: some }, { arbitrary: fc.constant(undefined), weight: none });
}

/** A valid email and 0–3 mutations (none in about 40 % of the cases). */
const emailWithMutations = fc.tuple(
  validEmail,
  fc.oneof(
    { arbitrary: fc.constant([] as Mutation[]), weight: 2 },
    { arbitrary: fc.array(mutation, { minLength: 1, maxLength: 3 }), weight: 3 },
  ),
);

function emailRequest(limits: Limits) {
  return fc
    .tuple(
      emailWithMutations,
      sometimes(fc.record({ slot: fc.nat(4), reuseBody: fc.boolean() }), 1, 4),
      sometimes(fc.constantFrom(...BAD_IDEM_KEYS), 1, 30),
    )
    .map(([[e, ms], idem, badKey]): FuzzRequest => {
      let huge: number | undefined;
      for (const m of ms) huge = mutate(e, m, limits) ?? huge;
      return {
        kind: "email",
        method: "POST",
        path: "/emails",
        value: e,
        headers: badKey !== undefined ? { "idempotency-key": badKey } : {},
        ...(idem && badKey === undefined ? { idem } : {}),
        tags: ms.map(describe),
        ...(huge ? { hugeBytes: huge } : {}),
      };
    });
}

function batchRequest(limits: Limits) {
  return fc
    .tuple(
      fc.array(emailWithMutations, { minLength: 1, maxLength: 5 }),
      fc.constantFrom("strict", "permissive", undefined),
      fc.nat(20),
    )
    .map(([items, mode, size]): FuzzRequest => {
      const values = items.map(([e, ms]) => {
        for (const m of ms) if (m.k !== "huge") mutate(e, m, limits);
        return e;
      });
      // Now and then a batch over the 100-item limit or an empty one.
      const value = size === 0 ? [] : size === 1 ? Array.from({ length: 101 }, () => values[0]) : values;
      return {
        kind: "batch",
        method: "POST",
        path: "/emails/batch",
        value,
        headers: mode ? { "x-batch-validation": mode } : {},
        tags: items.flatMap(([, ms]) => ms.map(describe)),
      };
    });
}

const rawMessage = fc.tuple(addr, subject, text, fc.nat(1_000_000)).map(([from, s, t, n]) => ({
  from,
  text:
    `From: ${from}\r\nTo: someone@fuzz.example\r\n` +
    `Subject: ${s.replace(/[^\x20-\x7e]/g, "?")}\r\nMessage-ID: <fz-${n}@fuzz.example>\r\n` +
    `Content-Type: text/plain; charset=utf-8\r\n\r\n${t.replace(/\r?\n/g, "\r\n")}\r\n`,
}));

const rawRequest = fc
  .tuple(
    rawMessage,
    fc.array(addr, { minLength: 1, maxLength: 3 }),
    fc.constantFrom("utf8", "base64"),
    fc.option(
      fc.oneof(
        fc.record({ k: fc.constant("crlf-from"), seq: fc.constantFrom(...INJECTIONS) }),
        fc.record({ k: fc.constant("crlf-rcpt"), seq: fc.constantFrom(...INJECTIONS) }),
        fc.record({ k: fc.constant("bad-b64"), seq: fc.constantFrom(...BAD_B64) }),
        fc.record({ k: fc.constant("bad-rcpt"), seq: fc.constantFrom(...INVALID_ADDRS) }),
        fc.record({ k: fc.constant("intl-rcpt"), seq: fc.constantFrom(...INTL_ADDRS.filter((a) => !a.includes("<"))) }),
        fc.record({ k: fc.constant("encoding"), seq: fc.constantFrom("utf-8", "binary", "") }),
      ),
      { nil: undefined, freq: 2 },
    ),
  )
  .map(([msg, rcpts, encoding, m]): FuzzRequest => {
    const value: Record<string, unknown> = {
      mail_from: msg.from,
      rcpt_to: rcpts,
      message: encoding === "base64" ? Buffer.from(msg.text).toString("base64") : msg.text,
      encoding,
    };
    if (m?.k === "crlf-from") value.mail_from = inject(msg.from, m.seq, 3);
    if (m?.k === "crlf-rcpt") value.rcpt_to = [inject(rcpts[0]!, m.seq, 2)];
    if (m?.k === "bad-b64") {
      value.encoding = "base64";
      value.message = m.seq;
    }
    if (m?.k === "bad-rcpt") value.rcpt_to = [m.seq];
    if (m?.k === "intl-rcpt") value.rcpt_to = [m.seq];
    if (m?.k === "encoding") value.encoding = m.seq;
    return {
      kind: "raw",
      method: "POST",
      path: "/relay/messages/raw",
      value,
      headers: {},
      tags: m ? [`raw:${m.k}`] : [],
    };
  });

const malformed = fc
  .tuple(
    validEmail,
    fc.constantFrom("truncate", "garbage", "random", "empty", "array", "string"),
    fc.nat(200),
    fc.string({ maxLength: 30 }),
  )
  .map(([e, how, at, junk]): FuzzRequest => {
    const json = JSON.stringify(e);
    const textBody =
      how === "truncate"
        ? json.slice(0, Math.max(1, Math.min(at, json.length - 1)))
        : how === "garbage"
          ? `${json}}${junk}`
          : how === "random"
            ? `{${junk}`
            : how === "empty"
              ? ""
              : how === "array"
                ? `[${json}]`
                : JSON.stringify(junk);
    return {
      kind: "malformed",
      method: "POST",
      path: fc.sample(fc.constantFrom("/emails", "/relay/messages/raw"), { seed: at, numRuns: 1 })[0]!,
      text: textBody,
      headers: {},
      tags: [`malformed:${how}`],
    };
  });

const patchRequest = fc
  .tuple(
    fc.boolean(),
    fc.oneof(
      fc.constantFrom("not a date", "", "2020-13-45T99:99:99Z", "tomorrow-ish"),
      wrongType,
      fc.constant("2030-01-01T00:00:00.000Z"),
    ),
    fc.constantFrom("PATCH", "GET"),
  )
  .map(([realId, when, method]): FuzzRequest => ({
    kind: method === "PATCH" ? "patch" : "get",
    method: method as "PATCH" | "GET",
    path: "/emails/:id",
    value: method === "PATCH" ? { scheduled_at: when } : undefined,
    headers: {},
    realId,
    tags: [`${method.toLowerCase()}:${realId ? "real" : "bogus"}`],
  }));

/** n requests for `seed`. */
export function generate(n: number, seed: number, limits: Limits): FuzzRequest[] {
  const arb = fc.oneof(
    { arbitrary: emailRequest(limits), weight: 50 },
    { arbitrary: batchRequest(limits), weight: 12 },
    { arbitrary: rawRequest, weight: 15 },
    { arbitrary: malformed, weight: 10 },
    { arbitrary: patchRequest, weight: 8 },
  );
  return fc.sample(arb, { seed, numRuns: n });
}

/** The body text of a request (a huge attachment built here, not kept in memory before). */
export function materialise(req: FuzzRequest): string | undefined {
  if (req.text !== undefined) return req.text;
  if (req.value === undefined) return undefined;
  if (!req.hugeBytes) return JSON.stringify(req.value);
  const v = { ...(req.value as Record<string, unknown>) };
  v.attachments = [{ filename: "huge.bin", content: "A".repeat((req.hugeBytes / 3) * 4) }];
  return JSON.stringify(v);
}
