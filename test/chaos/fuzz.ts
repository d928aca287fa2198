/**
 * Fuzz campaign: fast-check generated API requests (fuzz-gen.ts) against a real wrangler dev,
 * each judged by the independent oracle (core/oracle.ts); every accepted message must then
 * reach the sink, parse (postal-mime) and carry what was asked for.
 *
 * DESCRIPTION
 *   runFuzz({ requests, seed, log })  one wrangler dev with SMARTHOST at a catch-all sink
 *       (smtp-server) and MAX_MESSAGE_BYTES 1 MiB (so "huge" costs little), 6 workers. Rules:
 *       - no 5xx (and no connection failure) for any request;
 *       - nothing the oracle rejects is accepted (a batch: strict mode accepts nothing when an
 *         item is invalid; permissive lists every invalid item in `errors`);
 *       - Idempotency-Key (5 keys per worker): a repeat of an accepted body answers the same
 *         id; a different body under a used key is not accepted;
 *       - every accepted message arrives at the sink for each of its recipients (matched by
 *         Message-ID), parses with postal-mime, and its Subject and attachment count match.
 *   Valid requests that were rejected are counted and listed (not a failure of this rule set).
 *
 * ERRORS
 *   Everything started is stopped; failures are listed with the request's mutation tags and a
 *   short excerpt so the case can be replayed with --seed.
 */
import PostalMime from "postal-mime";
import { startCatcher, type Catcher } from "../../scripts/lib/smtp-catcher";
import { judgeBatch, judgeEmail, judgeIdempotencyKey, judgeRaw, type Limits, type Verdict } from "./core/oracle";
import { generate, materialise, type FuzzRequest } from "./fuzz-gen";
import { recipientsOf, request, sleep } from "./lib/api";
import { headerOf, rawOf } from "./lib/mail";
import type { CampaignResult } from "./lib/report";
import { createRuntime, type Runtime } from "./lib/runtime";

/** Fuzz options. */
export interface FuzzOptions {
  requests: number;
  seed: number;
  log: (line: string) => void;
}

const LIMITS: Limits = { maxRecipients: 50, maxMessageBytes: 1 << 20 };
const WORKERS = 6;

/** An accepted message and what must arrive. */
interface Expected {
  id: string;
  /** Message-ID local part to match at the sink. */
  key: string;
  rcpts: string[];
  subject: string | null;
  attachments: number | null;
  index: number;
}

interface Tally {
  byKind: Record<string, Record<string, number>>;
  fiveXx: string[];
  invalidAccepted: string[];
  validRejected: string[];
  idemViolations: string[];
  eitherAccepted: number;
  eitherRejected: number;
  expected: Expected[];
  realIds: string[];
}

function excerpt(req: FuzzRequest, body: string | undefined): string {
  return `#${req.kind} ${req.tags.join(",") || "valid"} ${JSON.stringify((body ?? "").slice(0, 160))}`;
}

function parsed(body: string | undefined): unknown {
  if (body === undefined) return undefined;
  try {
    return JSON.parse(body) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * An address as one string for both sides: lower case, the domain as A-labels. smtp-server writes
 * a recipient's domain back in Unicode (punycode.toUnicode) while the relay sends A-labels, and a
 * request may give either form (rené@xn--bcher-kva.example, user@bücher.example).
 */
function bare(a: string): string {
  const m = /<([^<>]*)>\s*$/.exec(a);
  const addr = (m ? m[1]! : a).trim().toLowerCase();
  const at = addr.lastIndexOf("@");
  if (at < 0 || addr.slice(at + 1).startsWith("[")) return addr;
  try {
    return `${addr.slice(0, at)}@${new URL(`http://${addr.slice(at + 1)}`).hostname}`;
  } catch {
    return addr;
  }
}

function listOf(v: unknown): string[] {
  return (Array.isArray(v) ? v : v === undefined ? [] : [v]).filter((a): a is string => typeof a === "string");
}

function expectedOf(value: Record<string, unknown>, id: string, index: number): Expected {
  const rcpts = [...new Set([...listOf(value.to), ...listOf(value.cc), ...listOf(value.bcc)].map(bare))];
  return {
    id,
    key: id,
    rcpts,
    subject: typeof value.subject === "string" ? value.subject : null,
    attachments: Array.isArray(value.attachments) ? value.attachments.length : 0,
    index,
  };
}

function expectedRaw(value: Record<string, unknown>, id: string, index: number): Expected {
  const text =
    value.encoding === "base64" ? Buffer.from(String(value.message), "base64").toString("utf8") : String(value.message);
  const mid = headerOf(text, "Message-ID");
  const key = mid ? mid.replace(/^<|@.*$/g, "") : id;
  return { id, key, rcpts: [...new Set(listOf(value.rcpt_to).map(bare))], subject: null, attachments: null, index };
}

/** The oracle's verdict for a non-batch request. */
function verdictOf(req: FuzzRequest, value: unknown, bytes: number): Verdict {
  const key = req.headers["idempotency-key"];
  const keyVerdict = key === undefined ? null : judgeIdempotencyKey(key);
  if (keyVerdict?.expect === "reject") return keyVerdict;
  if (req.kind === "raw" || req.path === "/relay/messages/raw") return judgeRaw(value, LIMITS, bytes);
  return judgeEmail(value, LIMITS, bytes);
}

function count(t: Tally, kind: string, status: number): void {
  const k = (t.byKind[kind] ??= {});
  const bucket = status === 0 ? "conn" : `${Math.floor(status / 100)}xx`;
  k[bucket] = (k[bucket] ?? 0) + 1;
}

type Slot = { body: string; path: string; status: number; id: string | null };

async function sendOne(
  rt: Runtime,
  req: FuzzRequest,
  index: number,
  worker: number,
  slots: Map<number, Slot>,
  t: Tally,
): Promise<void> {
  let body = materialise(req);
  let path = req.path;
  const headers = { ...req.headers };
  let prior: Slot | undefined;
  if (req.idem) {
    prior = slots.get(req.idem.slot);
    if (prior && req.idem.reuseBody) {
      body = prior.body;
      path = prior.path;
    }
    headers["idempotency-key"] = `fuzz-${worker}-${req.idem.slot}`;
  }
  if (path === "/emails/:id")
    path = `/emails/${req.realId && t.realIds.length > 0 ? t.realIds[index % t.realIds.length] : `bogus-${index}`}`;
  const a = await request(rt, req.method, path, body, headers, 60_000);
  count(t, req.kind, a.status);
  const what = excerpt(req, body);
  if (a.status === 0 || a.status >= 500) {
    t.fiveXx.push(`${a.status} ${what} → ${JSON.stringify(a.body).slice(0, 200)}`);
    return;
  }
  const ok = a.status >= 200 && a.status < 300;
  let idemVerdict: Verdict | null = null;
  if (req.idem) {
    const sameBody = prior?.body === body && prior?.path === path;
    // A key already used with another payload: Resend answers 409 invalid_idempotent_request.
    if (prior && !sameBody)
      idemVerdict = { expect: prior.id ? "reject" : "either", why: "idempotency key reused with a different body" };
    if (prior && prior.id && sameBody && ok && (a.body as { id?: string }).id !== prior.id)
      t.idemViolations.push(`same key, same body, new id: ${what}`);
    if (prior && prior.id && !sameBody && ok) t.idemViolations.push(`same key, different body accepted: ${what}`);
    // A key stays bound to the first body it was accepted with.
    if (!prior || (!prior.id && ok))
      slots.set(req.idem.slot, {
        body: body ?? "",
        path,
        status: a.status,
        id: ok ? ((a.body as { id?: string }).id ?? null) : null,
      });
    if (prior?.id && ok) return; // a replay: its message is already expected once
  }
  if (req.kind === "patch" || req.kind === "get") {
    if (!req.realId && ok) t.invalidAccepted.push(`${req.method} on a bogus id answered ${a.status}: ${what}`);
    if (req.kind === "patch" && ok)
      t.invalidAccepted.push(`PATCH of an already sent message accepted (${a.status}): ${what}`);
    return;
  }
  const value = parsed(body);
  if (path === "/emails/batch") return judgeBatchAnswer(req, value, a, what, index, t, idemVerdict);
  const own = verdictOf({ ...req, path }, value, Buffer.byteLength(body ?? ""));
  const v = own.expect === "reject" || !idemVerdict ? own : idemVerdict;
  record(t, v, ok, what, a);
  if (ok) {
    const id = (a.body as { id: string }).id;
    t.realIds.push(id);
    t.expected.push(
      path === "/relay/messages/raw"
        ? expectedRaw(value as Record<string, unknown>, id, index)
        : expectedOf(value as Record<string, unknown>, id, index),
    );
  }
}

function record(t: Tally, v: Verdict, ok: boolean, what: string, a: { status: number; body: unknown }): void {
  if (v.expect === "reject" && ok) t.invalidAccepted.push(`${v.why}: ${what}`);
  else if (v.expect === "accept" && !ok)
    t.validRejected.push(`${a.status} ${JSON.stringify(a.body).slice(0, 160)} for ${what}`);
  else if (v.expect === "either") {
    if (ok) t.eitherAccepted++;
    else t.eitherRejected++;
  }
}

function judgeBatchAnswer(
  req: FuzzRequest,
  value: unknown,
  a: { status: number; body: unknown },
  what: string,
  index: number,
  t: Tally,
  idem: Verdict | null,
): void {
  const ok = a.status >= 200 && a.status < 300;
  const judged = judgeBatch(value, LIMITS);
  const { items } = judged;
  const whole = judged.whole.expect === "accept" && idem ? idem : judged.whole;
  const permissive = req.headers["x-batch-validation"] === "permissive";
  if (whole.expect === "reject" || !permissive) {
    const v =
      whole.expect === "reject"
        ? whole
        : (items.find((i) => i.expect === "reject") ?? items.find((i) => i.expect === "either") ?? whole);
    record(t, v, ok, what, a);
  } else if (!ok) t.validRejected.push(`${a.status} permissive batch rejected whole: ${what}`);
  if (!ok) return;
  const res = a.body as { data: { id: string }[]; errors?: { index: number }[] };
  const failed = new Set((res.errors ?? []).map((e) => e.index));
  let next = 0;
  (value as unknown[]).forEach((item, i) => {
    if (items[i]?.expect === "reject" && !failed.has(i))
      t.invalidAccepted.push(`batch item ${i} ${items[i]!.why}: ${what}`);
    if (failed.has(i)) return;
    const id = res.data[next++]?.id;
    if (!id) return;
    t.realIds.push(id);
    t.expected.push(expectedOf(item as Record<string, unknown>, id, index));
  });
}

/** Checks what reached the sink against what was accepted. */
async function checkDelivery(rt: Runtime, sink: Catcher, t: Tally, timeoutS: number, log: (l: string) => void) {
  const byKey = new Map<string, { rcpts: Set<string>; raws: string[] }>();
  let seen = 0;
  const absorb = () => {
    for (; seen < sink.messages.length; seen++) {
      const m = sink.messages[seen]!;
      const raw = rawOf(m);
      const key = (headerOf(raw, "Message-ID") ?? "").replace(/^<|@.*$/g, "");
      const e = byKey.get(key) ?? { rcpts: new Set(), raws: [] };
      for (const r of m.rcptTo) e.rcpts.add(bare(r));
      e.raws.push(raw);
      byKey.set(key, e);
    }
  };
  const missing = () => t.expected.filter((x) => x.rcpts.some((r) => !byKey.get(x.key)?.rcpts.has(r)));
  const deadline = Date.now() + timeoutS * 1000;
  const t0 = Date.now();
  for (;;) {
    absorb();
    const left = missing().length;
    if (left === 0 || Date.now() > deadline) break;
    log(
      `  delivery ${((Date.now() - t0) / 1000).toFixed(0)} s: ${t.expected.length - left}/${t.expected.length} accepted messages complete at the sink`,
    );
    await sleep(5000);
  }
  const notDelivered: string[] = [];
  for (const x of missing().slice(0, 20)) {
    const rs = await recipientsOf(rt, x.id);
    notDelivered.push(
      `${x.id} (request ${x.index}) ` +
        `rcpts ${JSON.stringify(rs?.map((r) => [r.email, r.status, r.last_response?.code, r.last_response?.text?.slice(0, 60)]) ?? "?")}`,
    );
  }
  const parseFailures: string[] = [];
  let parsedOk = 0;
  for (const x of t.expected) {
    const got = byKey.get(x.key);
    if (!got) continue;
    for (const raw of got.raws.slice(0, 1)) {
      try {
        const mail = await PostalMime.parse(raw);
        const norm = (s: string) => s.replace(/\s+/g, " ").trim();
        if (x.subject !== null && norm(mail.subject ?? "") !== norm(x.subject))
          parseFailures.push(`${x.id}: subject ${JSON.stringify(mail.subject)} != ${JSON.stringify(x.subject)}`);
        else if (x.attachments !== null && mail.attachments.length !== x.attachments)
          parseFailures.push(`${x.id}: ${mail.attachments.length} attachments, sent ${x.attachments}`);
        else parsedOk++;
      } catch (e) {
        parseFailures.push(`${x.id}: postal-mime failed: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
  }
  return { missing: missing().length, notDelivered, parseFailures, parsedOk, sinkMessages: sink.messages.length };
}

/** Runs the fuzz campaign. */
export async function runFuzz(o: FuzzOptions): Promise<CampaignResult> {
  const sink = await startCatcher();
  const rt = await createRuntime({
    tenant: "chaos-fuzz",
    vars: {
      SMARTHOST: `[127.0.0.1]:${sink.smtpPort}`,
      MAX_MESSAGE_BYTES: String(LIMITS.maxMessageBytes),
      MAX_RECIPIENTS: String(LIMITS.maxRecipients),
      RELAY_TLS: "off",
    },
    routes: [],
  });
  try {
    await rt.start();
    return await campaign(rt, sink, o);
  } finally {
    await rt.dispose();
    await sink.close();
  }
}

async function campaign(rt: Runtime, sink: Catcher, o: FuzzOptions): Promise<CampaignResult> {
  const reqs = generate(o.requests, o.seed, LIMITS);
  o.log(`  ${reqs.length} requests generated (seed ${o.seed}); sending with ${WORKERS} workers`);
  const t: Tally = {
    byKind: {},
    fiveXx: [],
    invalidAccepted: [],
    validRejected: [],
    idemViolations: [],
    eitherAccepted: 0,
    eitherRejected: 0,
    expected: [],
    realIds: [],
  };
  const t0 = Date.now();
  let done = 0;
  await Promise.all(
    Array.from({ length: WORKERS }, async (_, w) => {
      const slots = new Map<number, Slot>();
      for (let i = w; i < reqs.length; i += WORKERS) {
        await sendOne(rt, reqs[i]!, i, w, slots, t);
        if (++done % 2000 === 0)
          o.log(
            `  ${done}/${reqs.length} sent (${((Date.now() - t0) / 1000).toFixed(0)} s), ${t.expected.length} accepted so far`,
          );
      }
    }),
  );
  const sendS = (Date.now() - t0) / 1000;
  const d = await checkDelivery(rt, sink, t, 300, o.log);
  const queue = d.missing > 0 ? await request({ url: rt.url, key: rt.operatorKey }, "GET", "/relay/queue") : null;
  const failures: string[] = [];
  if (t.fiveXx.length)
    failures.push(`${t.fiveXx.length} 5xx/connection failures, e.g. ${t.fiveXx.slice(0, 3).join(" | ")}`);
  if (t.invalidAccepted.length)
    failures.push(
      `${t.invalidAccepted.length} invalid requests accepted, e.g. ${t.invalidAccepted.slice(0, 5).join(" | ")}`,
    );
  if (t.idemViolations.length)
    failures.push(
      `${t.idemViolations.length} idempotency violations, e.g. ${t.idemViolations.slice(0, 3).join(" | ")}`,
    );
  if (d.missing)
    failures.push(
      `${d.missing} accepted messages not (fully) delivered, e.g. ${d.notDelivered.slice(0, 5).join(" | ")}`,
    );
  if (d.parseFailures.length)
    failures.push(
      `${d.parseFailures.length} delivered messages did not parse as sent, e.g. ${d.parseFailures.slice(0, 3).join(" | ")}`,
    );
  const kinds = Object.entries(t.byKind)
    .map(
      ([k, v]) =>
        `${k} ${Object.entries(v)
          .map(([b, n]) => `${b}:${n}`)
          .join("/")}`,
    )
    .join("; ");
  return {
    campaign: "fuzz",
    tried:
      `${reqs.length} fast-check requests (seed ${o.seed}): POST /emails, /emails/batch ` +
      `(strict/permissive), /relay/messages/raw, PATCH/GET /emails/:id, Idempotency-Key reuse; ` +
      `malformed JSON, wrong types, oversized fields, CR/LF in every header-bearing field, ` +
      `invalid and internationalized addresses, huge attachments (limit 1 MiB), invalid base64`,
    result: failures.length === 0 ? "pass" : "fail",
    figures:
      `${t.fiveXx.length} 5xx; ${t.invalidAccepted.length} invalid ` +
      `accepted; ${t.expected.length} accepted messages, ${t.expected.length - d.missing} ` +
      `delivered, ${d.parsedOk} parsed as sent; ` +
      `${t.validRejected.length} valid rejected; open cases accepted ${t.eitherAccepted} / ` +
      `rejected ${t.eitherRejected}; ${(reqs.length / sendS).toFixed(0)} req/s; ${kinds}`,
    failures,
    details: {
      seed: o.seed,
      requests: reqs.length,
      by_kind: t.byKind,
      five_xx: t.fiveXx.slice(0, 20),
      invalid_accepted: t.invalidAccepted.slice(0, 50),
      valid_rejected: t.validRejected.slice(0, 30),
      valid_rejected_count: t.validRejected.length,
      idempotency_violations: t.idemViolations.slice(0, 20),
      either_accepted: t.eitherAccepted,
      either_rejected: t.eitherRejected,
      accepted: t.expected.length,
      not_delivered: d.missing,
      not_delivered_examples: d.notDelivered,
      parse_failures: d.parseFailures.slice(0, 20),
      parsed_ok: d.parsedOk,
      sink_messages: d.sinkMessages,
      send_s: Math.round(sendS),
      ...(queue ? { queue_when_stuck: queue.body } : {}),
      runtime_errors: rt.errors().slice(-30),
    },
  };
}
