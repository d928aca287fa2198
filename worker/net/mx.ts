/*
 * NAME
 *   mx - MX resolution over DNS-over-HTTPS (JSON API), the fetch side
 *
 * SUMMARY
 *   resolveMx(domain, options) asks a DoH JSON resolver the queries that
 *   core/mx.ts names and returns its MxResolution: mail hosts in order, a
 *   bounce, or a deferral.
 *
 * DESCRIPTION
 *   Each query is GET <resolverUrl>?name=<name>&type=<MX|A|AAAA> with
 *   "accept: application/dns-json" (the Cloudflare and Google JSON API). The
 *   resolver URL is configurable; any query string it already has is kept.
 *   Each query is time-boxed by an AbortSignal and a race, so a fetch that
 *   ignores the signal cannot hold the caller either. The clock is read once
 *   per answer and handed to the core.
 *
 *   toAsciiDomain(domain) turns an internationalised domain into its
 *   punycode (A-label) form with the platform's URL parser (WHATWG UTS #46),
 *   which the core requires; ASCII input (address literals included) comes
 *   back lower-cased and otherwise untouched.
 *
 * INVARIANTS
 *   Decides nothing itself: every outcome is the core's.
 *
 * ERRORS
 *   Never rejects for resolver, network or timeout problems (those are
 *   "defer" results). A non-2xx status, a body over MAX_DOH_BODY_BYTES or
 *   that is not JSON is a failed query.
 */

import {
  advanceMxLookup,
  createMxConfig,
  startMxLookup,
  type DohEvent,
  type MxConfig,
  type MxQueryType,
  type MxResolution,
} from "./core/mx";
import { DNS_TYPE, parseDohJson, selectAnswers } from "./core/doh";
import { parseIPv4, parseIPv6 } from "./core/ip-literal";

/** Cloudflare's public DoH JSON endpoint. */
export const DEFAULT_DOH_URL = "https://cloudflare-dns.com/dns-query";

/** Per-query timeout default, in milliseconds. */
export const DEFAULT_DOH_TIMEOUT_MS = 5_000;

/** Largest answer body read, in bytes (a big MX set is a few KB). */
export const MAX_DOH_BODY_BYTES = 256 * 1024;

/** How to resolve. Every field has a default. */
export interface MxResolverOptions {
  /** DoH JSON endpoint. Default DEFAULT_DOH_URL. */
  resolverUrl?: string;
  /** Per-query timeout. Default DEFAULT_DOH_TIMEOUT_MS. */
  timeoutMs?: number;
  /** fetch to use. Default globalThis.fetch. */
  fetch?: typeof fetch;
  /** Cache lifetimes (core/mx.ts). Default DEFAULT_MX_CONFIG. */
  config?: Partial<MxConfig>;
  /** Seed for the order of equal-preference MX hosts; null: name order. Default null. */
  tieSeed?: number | null;
  /** Clock. Default Date.now. */
  now?: () => number;
}

/** Resolves where mail for `domain` goes (see header). */
export async function resolveMx(domain: string, options: MxResolverOptions = {}): Promise<MxResolution> {
  const cfg = createMxConfig(options.config);
  const now = options.now ?? Date.now;
  const ascii = toAsciiDomain(domain) ?? domain;
  let step = startMxLookup({ domain: ascii, tieSeed: options.tieSeed ?? null }, now(), cfg);
  while (step.kind === "query") {
    const event = await queryDoh(step.name, step.type, options);
    step = advanceMxLookup(step.state, event, now(), cfg);
  }
  return step.result;
}

/**
 * The IPv4 address an MX host name resolves to (its first A record, through CNAMEs), the host
 * itself when it is an IP literal, or null when it has none or the lookup failed (the caller
 * then connects by name and does not know the address).
 */
export async function resolveAddress(host: string, options: MxResolverOptions = {}): Promise<string | null> {
  const name = host.replace(/\.$/, "").replace(/^\[|\]$/g, "");
  if (parseIPv4(name) || parseIPv6(name)) return name;
  const event = await queryDoh(name, "A", options);
  if (event.kind !== "answer") return null;
  const message = parseDohJson(event.body);
  if ("error" in message) return null;
  const found = selectAnswers(message, name, DNS_TYPE.A).records.find((r) => parseIPv4(r.data) !== null);
  return found?.data ?? null;
}

/** Punycode form of a domain, or null when the URL parser rejects it. */
export function toAsciiDomain(domain: string): string | null {
  const trimmed = domain.trim();
  // ASCII is left alone: the URL parser would also rewrite numeric names ("1.2.3" → "1.2.0.3").
  if (/^[\x00-\x7f]*$/.test(trimmed)) return trimmed.toLowerCase();
  const trailingDot = trimmed.endsWith(".") ? "." : "";
  try {
    return new URL(`http://${trimmed.replace(/\.$/, "")}/`).hostname + trailingDot;
  } catch {
    return null;
  }
}

const TIMED_OUT = Symbol("timed out");

/** Runs one DoH query; never rejects. */
export async function queryDoh(name: string, type: MxQueryType | "TXT", options: MxResolverOptions): Promise<DohEvent> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_DOH_TIMEOUT_MS;
  const doFetch = options.fetch ?? globalThis.fetch;
  const url = new URL(options.resolverUrl ?? DEFAULT_DOH_URL);
  url.searchParams.set("name", name);
  url.searchParams.set("type", type);
  const abort = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(() => {
      abort.abort();
      resolve(TIMED_OUT);
    }, timeoutMs);
  });
  const request = (async (): Promise<DohEvent> => {
    const res = await doFetch(url.toString(), { headers: { accept: "application/dns-json" }, signal: abort.signal });
    if (!res.ok) {
      void res.body?.cancel().catch(() => undefined);
      return { kind: "failed", reason: `resolver answered HTTP ${res.status}` };
    }
    return readJsonBody(res);
  })();
  try {
    const result = await Promise.race([request, timeout]);
    return result === TIMED_OUT ? { kind: "failed", reason: `resolver timed out after ${timeoutMs} ms` } : result;
  } catch (e) {
    return { kind: "failed", reason: `resolver request failed: ${e instanceof Error ? e.message : String(e)}` };
  } finally {
    clearTimeout(timer);
    request.catch(() => undefined);
  }
}

/** Reads at most MAX_DOH_BODY_BYTES and parses them as JSON. */
async function readJsonBody(res: Response): Promise<DohEvent> {
  const length = Number(res.headers.get("content-length") ?? "0");
  if (length > MAX_DOH_BODY_BYTES) {
    void res.body?.cancel().catch(() => undefined);
    return { kind: "failed", reason: `resolver answer of ${length} bytes is too large` };
  }
  const text = await readCapped(res, MAX_DOH_BODY_BYTES);
  if (text === null) return { kind: "failed", reason: `resolver answer is larger than ${MAX_DOH_BODY_BYTES} bytes` };
  try {
    return { kind: "answer", body: JSON.parse(text) as unknown };
  } catch {
    return { kind: "failed", reason: "resolver answer is not JSON" };
  }
}

/** The body as UTF-8 text, or null (and the body cancelled) once it passes `limit` bytes. */
async function readCapped(res: Response, limit: number): Promise<string | null> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      void reader.cancel().catch(() => undefined);
      return null;
    }
    chunks.push(value);
  }
  const all = new Uint8Array(total);
  let offset = 0;
  for (const c of chunks) {
    all.set(c, offset);
    offset += c.byteLength;
  }
  return new TextDecoder().decode(all);
}
