/**
 * Accept refusals, counted for GET /metrics: every answer of 400 or more to a send request
 * (POST /emails, /emails/batch, /relay/messages/raw), by its error name and status.
 *
 * DESCRIPTION
 *   countRefusals()   middleware for the send routes: after the route (its error answer
 *                     included) it counts the refusal in this isolate, and writes what the
 *                     isolate counted to D1 `accept_refusals` (UTC day × reason × status) at once
 *                     when nothing was written for FLUSH_MS, else with a later request: a flood of
 *                     429s costs one D1 write per isolate per FLUSH_MS, not one per refusal.
 *   flushRefusals()   middleware for every route: writes what is pending once FLUSH_MS passed.
 *
 * INVARIANTS
 *   The write is waitUntil'd: a refusal's answer never waits for it.
 */
import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "./context";

/** How long counts gather in an isolate before they are written, ms. */
export const FLUSH_MS = 10_000;

const pending = new Map<string, number>();
let lastFlush = 0;

function flush(env: Env, nowMs: number): Promise<void> | null {
  if (pending.size === 0 || nowMs - lastFlush < FLUSH_MS) return null;
  lastFlush = nowMs;
  const day = new Date(nowMs).toISOString().slice(0, 10);
  const rows = [...pending].map(([k, n]) => {
    const [reason, status] = k.split("|");
    return { reason, status: Number(status), n };
  });
  pending.clear();
  return env.DB.prepare(
    `INSERT INTO accept_refusals (day, reason, status, n)
      SELECT ?1, json_extract(value, '$.reason'), json_extract(value, '$.status'), json_extract(value, '$.n') FROM json_each(?2) WHERE true
      ON CONFLICT (day, reason, status) DO UPDATE SET n = n + excluded.n`,
  )
    .bind(day, JSON.stringify(rows))
    .run()
    .then(() => undefined)
    .catch((e: unknown) =>
      console.error(
        JSON.stringify({ error: "accept refusals not counted", detail: e instanceof Error ? e.message : String(e) }),
      ),
    );
}

function later(c: Parameters<MiddlewareHandler<AppEnv>>[0], p: Promise<void> | null): void {
  if (!p) return;
  try {
    c.executionCtx.waitUntil(p);
  } catch {
    void p; // no execution context (a direct call in a test): the write runs on its own
  }
}

/** See the header. */
export function countRefusals(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    await next();
    if (c.req.method !== "POST" || c.res.status < 400) return;
    const err = c.error as { errorName?: string } | undefined;
    const reason =
      err?.errorName ??
      (c.res.status === 429 ? "rate_limit_exceeded" : c.res.status === 413 ? "validation_error" : "other");
    const key = `${reason}|${c.res.status}`;
    pending.set(key, (pending.get(key) ?? 0) + 1);
    later(c, flush(c.env, Date.now()));
  };
}

/** See the header. */
export function flushRefusals(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    await next();
    if (pending.size > 0) later(c, flush(c.env, Date.now()));
  };
}
