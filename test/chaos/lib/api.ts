/**
 * The campaigns' HTTP client for the relay API, and how they observe outcomes.
 *
 * DESCRIPTION
 *   request(rt, method, path, body?, headers?)  one API call → { status, body (parsed JSON or
 *                          text), ms }; a network error (the runtime was killed) → status 0.
 *                          wrangler dev's own 503 for a connection its proxy lost (not an
 *                          answer of the relay, see devFetch in scripts/lib/dev-server.ts) is
 *                          sent again, up to 5 times, and counted in proxyResets.
 *                          A 429 rate_limit_exceeded (back-pressure at accept, nothing queued:
 *                          worker/api/http/accept-gate.ts) is sent again after its Retry-After, up to
 *                          30 times (devFetch), and counted in refusals, unless the caller says
 *                          `resendRefused: false` (the load campaign's open loop counts them).
 *   proxyResets            how many requests were sent again that way (campaigns report it).
 *   refusals               how many 429 answers were sent again.
 *   lostConnections        requests with an Idempotency-Key sent again because their pooled
 *                          connection closed before any answer (request's `resendLost`).
 *   recipientsOf(rt, id)   GET /emails/:id recipients[] (status, attempts, last_response…).
 *   eventsOf(rt, ids)      the events of those emails: from the pull feed GET /relay/events
 *                          when the runtime serves it, otherwise from the D1 `events` table.
 *                          Same shape either way, so switching sources changes nothing else.
 *   destinationsOf(rt)     GET /relay/destinations when served, else null ("not checked").
 *   FINAL                  recipient statuses that end a recipient's story.
 */
import { devFetch } from "../../../scripts/lib/dev-server";
import type { Runtime } from "./runtime";

/** An API answer. */
export interface Answer {
  status: number;
  body: unknown;
  ms: number;
}

/** A recipient as GET /emails/:id shows it. */
export interface Rcpt {
  email: string;
  status: string;
  attempts: number;
  next_attempt_at: string | null;
  blocked_by?: string | null;
  last_response: { code?: number; enhanced?: string; text?: string; mx?: string; tls?: boolean } | null;
}

/** One event, whichever source it came from. */
export interface ChaosEvent {
  type: string;
  email_id: string;
  recipient: string | null;
  /** SMTP reply code and enhanced status, from `data.response` (D1) or `data.delivery` (feed). */
  code: number | null;
  enhanced: string | null;
  data: Record<string, unknown>;
}

function normalise(type: string, emailId: string, recipient: string | null, data: Record<string, unknown>): ChaosEvent {
  const resp = (data.response ?? null) as { code?: number; enhanced?: string } | null;
  const del = (data.delivery ?? null) as { smtp_code?: number; enhanced_code?: string } | null;
  return {
    type,
    email_id: emailId,
    recipient,
    code: resp?.code ?? del?.smtp_code ?? null,
    enhanced: resp?.enhanced ?? del?.enhanced_code ?? null,
    data,
  };
}

/** Recipient statuses that are final. */
export const FINAL = new Set(["delivered", "bounced", "expired", "suppressed", "cancelled"]);

/** Requests sent again after wrangler dev's ProxyWorker answered 503 for a lost connection. */
export const proxyResets = { count: 0 };

/** POSTs sent again after the connection closed under them (see request's `resendLost`). */
export const lostConnections = { count: 0, causes: new Set<string>() };

/** 429 answers (back-pressure) sent again after their Retry-After. */
export const refusals = { count: 0 };

const LOST = new Set(["UND_ERR_SOCKET", "ECONNRESET"]);

/** Whether a fetch error is a connection that closed before any answer (not a refused one). */
function lostConnection(e: unknown): string | null {
  const c = (e as { cause?: { code?: string } } | null)?.cause;
  return c?.code && LOST.has(c.code) ? networkError(e) : null;
}

/**
 * One API call; status 0 when the connection failed. With `resendLost` (only for a request
 * that carries an Idempotency-Key, so sending it again cannot duplicate anything), a request
 * whose pooled connection closed before any answer is sent again, up to twice, as any client
 * would; each is counted in lostConnections with its cause.
 */
export async function request(
  rt: Pick<Runtime, "url" | "key">,
  method: string,
  path: string,
  body?: string,
  headers: Record<string, string> = {},
  timeoutMs = 30_000,
  resendLost = false,
  resendRefused = true,
): Promise<Answer> {
  const t0 = performance.now();
  for (let attempt = 0; ; attempt++) {
    try {
      // Each attempt (a 429 or a proxy reset sent again) gets a fresh timeout signal.
      const res = await devFetch(
        `${rt.url}${path}`,
        () => ({
          method,
          body,
          signal: AbortSignal.timeout(timeoutMs),
          headers: {
            authorization: `Bearer ${rt.key}`,
            ...(body !== undefined ? { "content-type": "application/json" } : {}),
            ...headers,
          },
        }),
        () => proxyResets.count++,
        resendRefused,
        () => refusals.count++,
      );
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        /* not JSON */
      }
      return { status: res.status, body: parsed, ms: performance.now() - t0 };
    } catch (e) {
      const lost = resendLost && attempt < 2 ? lostConnection(e) : null;
      if (lost) {
        lostConnections.count++;
        lostConnections.causes.add(lost);
        continue;
      }
      return { status: 0, body: networkError(e), ms: performance.now() - t0 };
    }
  }
}

/** A network error with its cause (undici's "fetch failed" says nothing without it). */
export function networkError(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const c = e.cause as { code?: string; message?: string } | undefined;
  return c ? `${e.message} (${[c.code, c.message].filter(Boolean).join(": ")})` : e.message;
}

/** The recipients of one email, or null when it cannot be read now. */
export async function recipientsOf(rt: Pick<Runtime, "url" | "key">, id: string): Promise<Rcpt[] | null> {
  const a = await request(rt, "GET", `/emails/${id}`);
  if (a.status !== 200) return null;
  return (a.body as { recipients?: Rcpt[] }).recipients ?? null;
}

/** Whether the runtime serves a route (anything but 404/405 for a GET). */
async function serves(rt: Pick<Runtime, "url" | "key">, path: string): Promise<boolean> {
  const a = await request(rt, "GET", path);
  return a.status === 200;
}

async function feedEvents(rt: Runtime, ids: Set<string>): Promise<ChaosEvent[]> {
  const out: ChaosEvent[] = [];
  let after = "";
  for (let page = 0; page < 1000; page++) {
    const a = await request(rt, "GET", `/relay/events?limit=100${after ? `&after=${encodeURIComponent(after)}` : ""}`);
    if (a.status !== 200) break;
    const list = a.body as { has_more: boolean; data: { id: string; type: string; data: Record<string, unknown> }[] };
    for (const e of list.data) {
      const emailId = String(e.data.email_id ?? "");
      if (ids.has(emailId))
        out.push(normalise(e.type, emailId, (e.data.recipient as string | undefined) ?? null, e.data));
    }
    if (!list.has_more || list.data.length === 0) break;
    after = list.data[list.data.length - 1]!.id;
  }
  return out;
}

async function d1Events(rt: Runtime, ids: Set<string>): Promise<ChaosEvent[]> {
  const list = [...ids].map((i) => `'${i.replace(/'/g, "''")}'`).join(",");
  const rows = await rt.sql<{ type: string; email_id: string; recipient: string | null; data: string }>(
    `SELECT type, email_id, recipient, data FROM event_log WHERE email_id IN (${list}) AND data IS NOT NULL ORDER BY seq`,
  );
  return rows.map((r) => {
    let data: Record<string, unknown> = {};
    try {
      data = JSON.parse(r.data) as Record<string, unknown>;
    } catch {
      /* keep empty */
    }
    return normalise(r.type, r.email_id, r.recipient, data);
  });
}

/** The events of `ids` and where they were read from. */
export async function eventsOf(rt: Runtime, ids: string[]): Promise<{ source: "feed" | "d1"; events: ChaosEvent[] }> {
  const set = new Set(ids);
  if (await serves(rt, "/relay/events?limit=1")) return { source: "feed", events: await feedEvents(rt, set) };
  return { source: "d1", events: await d1Events(rt, set) };
}

/** A destination as GET /relay/destinations shows it (the fields the campaigns read). */
export interface Destination {
  transport: string;
  queue: string;
  state: string;
  window: number | null;
  failure?: number;
  fail_cohorts?: number;
  last_response?: string | null;
}

/** GET /relay/destinations with the operator key, or null when the runtime does not serve it. */
export async function destinationsOf(rt: Pick<Runtime, "url" | "operatorKey">): Promise<Destination[] | null> {
  if (!rt.operatorKey) return null;
  const a = await request({ url: rt.url, key: rt.operatorKey }, "GET", "/relay/destinations");
  return a.status === 200 ? ((a.body as { data?: Destination[] }).data ?? null) : null;
}

/** Sleeps `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
