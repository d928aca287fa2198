/**
 * Back-pressure at accept: the send routes hold one of ACCEPT_CONCURRENCY slots of their isolate
 * while they work (lib/gate.ts, Postfix's smtpd process_limit), a tenant at most three quarters
 * of them; a request that finds no slot is answered at once 429 rate_limit_exceeded with
 * Retry-After: 1, before its body is read: nothing of it was queued, and sending it again (with
 * its Idempotency-Key) is safe.
 *
 * DESCRIPTION
 *   acceptGate()          Hono middleware for POST /emails, POST /emails/batch and POST
 *                         /relay/messages/raw.
 *   acceptGateOf(env)     the isolate's gate for these settings (one per isolate and setting).
 *   ACCEPT_CONCURRENCY    slots per isolate (default 4, at least 1); a tenant alone may hold all
 *                         but a quarter of them (at least one left to the others when there are
 *                         2+), and while others are sending (a send request within SENDING_MS)
 *                         its fair share, ceil(slots / tenants sending) (lib/gate.ts). Four
 *                         slots, because more let a flood of sends take the isolate from delivery
 *                         (docs/flood.md has the measurements). Resend allows 2 requests a second
 *                         by default; a batch carries 100 messages.
 *
 * INVARIANTS
 *   A slot is released when the route answers, also when it throws; the in_flow_delay pause of
 *   an answer (accept.ts) is taken holding the slot, so while mail arrives faster than it is
 *   delivered, each slot accepts about one request a second, as an smtpd process does. A slot
 *   whose request never finished (the runtime cancelled it) is taken back after a minute.
 */
import type { MiddlewareHandler } from "hono";
import { Gate } from "../../lib/gate";
import { type AppEnv } from "./context";
import { toErrorBody } from "../../model/errors";
import { settingsOf } from "../../settings/settings";

/** A slot held this long is presumed lost (its request cancelled) and freed, ms. */
const MAX_HOLD_MS = 60_000;
/**
 * How long a tenant counts as sending after its last send request, ms: longer than the
 * Retry-After it is told, so a refused tenant still counts when it comes back.
 */
const SENDING_MS = 5_000;

let current: { limit: number; gate: Gate } | null = null;

/** The isolate's accept gate for the env's settings. */
export function acceptGateOf(env: object): Gate {
  const limit = settingsOf(env).acceptConcurrency;
  if (current?.limit !== limit) {
    const perKey = Math.max(1, limit - Math.max(1, Math.floor(limit / 4)));
    current = { limit, gate: new Gate({ limit, perKey, maxHoldMs: MAX_HOLD_MS, activeMs: SENDING_MS }, Date.now) };
  }
  return current.gate;
}

/** Holds an accept slot around the route, or answers 429 when none is free. */
export function acceptGate(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const gate = acceptGateOf(c.env);
    const tenant = c.get("tenant");
    const release = gate.enter(tenant);
    if (release === null) {
      const share = gate.share(tenant);
      const mine = gate.held(tenant) >= share;
      const why = mine ? `this tenant has ${share} send requests in progress, its share of ${gate.opts.limit} while ${gate.sending()} tenants are sending` : `${gate.opts.limit} send requests are in progress`;
      return c.json(toErrorBody(429, "rate_limit_exceeded", `The relay is accepting as fast as it can (${why}). Nothing was queued: send the request again after Retry-After seconds, with the same Idempotency-Key.`), 429, { "Retry-After": "1" });
    }
    try {
      await next();
    } finally {
      release();
    }
  };
}
