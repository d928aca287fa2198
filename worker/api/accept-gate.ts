/**
 * Back-pressure at accept: the send routes hold one of ACCEPT_CONCURRENCY slots of their isolate
 * while they work (lib/gate.ts, Postfix's smtpd process_limit), and a request that finds no slot
 * within ACCEPT_WAIT_MS is answered 429 rate_limit_exceeded with Retry-After, before its body is
 * read: nothing of it was queued, and retrying it (with its Idempotency-Key) is safe.
 *
 * DESCRIPTION
 *   acceptGate()          Hono middleware for POST /emails, POST /emails/batch and POST
 *                         /relay/messages/raw.
 *   acceptGateOf(env)     the isolate's gate for these settings (one per isolate and setting).
 *   ACCEPT_CONCURRENCY    slots per isolate (default 8, at least 1).
 *   ACCEPT_WAIT_MS        longest wait for a slot (default 5000, at most 30000; "0": refuse at once).
 *
 * INVARIANTS
 *   A slot is released when the route answers, also when it throws; the in_flow_delay pause of
 *   an answer (accept.ts) is taken holding the slot, so while mail arrives faster than it is
 *   delivered, each slot accepts about one request a second, as an smtpd process does.
 */
import type { MiddlewareHandler } from "hono";
import { Gate } from "../lib/gate";
import { msSetting } from "../lib/settings";
import type { AppEnv } from "./app";
import { toErrorBody } from "./errors";

/** Waiters per slot at most; beyond, a request is refused at once (memory stays bounded). */
const WAITERS_PER_SLOT = 64;

let current: { key: string; gate: Gate } | null = null;

/** The isolate's accept gate for the env's settings. */
export function acceptGateOf(env: { ACCEPT_CONCURRENCY?: string; ACCEPT_WAIT_MS?: string }): Gate {
  const limit = Math.max(1, Math.floor(msSetting(env.ACCEPT_CONCURRENCY, 8, 10_000)) || 8);
  const maxWaitMs = msSetting(env.ACCEPT_WAIT_MS, 5000, 30_000);
  const key = `${limit}/${maxWaitMs}`;
  if (current?.key !== key) current = { key, gate: new Gate({ limit, maxWaitMs, maxWaiters: limit * WAITERS_PER_SLOT }) };
  return current.gate;
}

/** Holds an accept slot around the route, or answers 429 when none frees in time. */
export function acceptGate(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const gate = acceptGateOf(c.env);
    const release = await gate.enter(c.get("tenant"));
    if (release === null) {
      const waited = gate.opts.maxWaitMs;
      return c.json(toErrorBody(429, "rate_limit_exceeded", `The relay is accepting as much mail as it can deliver (${gate.opts.limit} send requests at once; none finished within ${waited} ms). Nothing was queued: retry after the Retry-After seconds, with the same Idempotency-Key.`), 429, { "Retry-After": "1" });
    }
    try {
      await next();
    } finally {
      release();
    }
  };
}
