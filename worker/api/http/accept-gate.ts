/**
 * Back-pressure at accept: the send routes hold one of ACCEPT_CONCURRENCY slots of their isolate
 * while they work (lib/gate.ts, Postfix's smtpd process_limit), a tenant at most three quarters
 * of them. A request that finds no slot waits for one, in arrival order, up to ACCEPT_WAIT_MS
 * before its body is read (a sender at full speed is slowed down, not refused, as a client of a
 * busy Postfix waits); only then is it answered 429 rate_limit_exceeded with Retry-After: 1:
 * nothing of it was queued, and sending it again (with its Idempotency-Key) is safe.
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
 *   ACCEPT_WAIT_MS        how long a request waits for a slot (default 10 s; 0: refused at once).
 *                         A waiter polls the gate every POLL_MS on a timer of its own and is woken
 *                         at once when a slot it may take frees: the runtime never sees a request
 *                         that waits only on another request (which it cancels as hung).
 *
 * INVARIANTS
 *   A slot is released when the route answers, also when it throws; the in_flow_delay pause of
 *   an answer (accept.ts) is taken holding the slot, so while mail arrives faster than it is
 *   delivered, each slot accepts about one request a second, as an smtpd process does. A slot
 *   whose request never finished (the runtime cancelled it) is taken back after a minute; a
 *   waiter that stopped polling is forgotten after a second.
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
/** How often a waiter asks the gate on its own, ms (a release wakes the next one sooner). */
const POLL_MS = 100;

let current: { limit: number; gate: Gate; wake: Map<number, () => void> } | null = null;

function stateOf(env: object): NonNullable<typeof current> {
  const limit = settingsOf(env).acceptConcurrency;
  if (current?.limit !== limit) {
    const perKey = Math.max(1, limit - Math.max(1, Math.floor(limit / 4)));
    current = { limit, gate: new Gate({ limit, perKey, maxHoldMs: MAX_HOLD_MS, activeMs: SENDING_MS, staleMs: 10 * POLL_MS }, Date.now), wake: new Map() };
  }
  return current;
}

/** The isolate's accept gate for the env's settings. */
export function acceptGateOf(env: object): Gate {
  return stateOf(env).gate;
}

/** A slot for `tenant`, waiting in line up to `waitMs`; null when none came in time. */
async function slotFor(state: NonNullable<typeof current>, tenant: string, waitMs: number): Promise<(() => void) | null> {
  const { gate, wake } = state;
  const now = gate.enter(tenant);
  if (now !== null || waitMs <= 0) return now;
  const ticket = gate.wait(tenant);
  const deadline = Date.now() + waitMs;
  try {
    for (;;) {
      const release = gate.claim(ticket);
      if (release !== null) return release;
      const left = deadline - Date.now();
      if (left <= 0) return null;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(POLL_MS, left));
        wake.set(ticket, () => { clearTimeout(timer); resolve(); });
      });
      wake.delete(ticket);
    }
  } finally {
    wake.delete(ticket);
    gate.leave(ticket);
  }
}

/** Holds an accept slot around the route, waiting for one up to ACCEPT_WAIT_MS, or answers 429. */
export function acceptGate(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const state = stateOf(c.env);
    const { gate } = state;
    const tenant = c.get("tenant");
    const waitMs = settingsOf(c.env).acceptWaitMs;
    const release = await slotFor(state, tenant, waitMs);
    if (release === null) {
      const share = gate.share(tenant);
      const mine = gate.held(tenant) >= share;
      const why = mine ? `this tenant has ${share} send requests in progress, its share of ${gate.opts.limit} while ${gate.sending()} tenants are sending` : `${gate.opts.limit} send requests are in progress`;
      const waited = waitMs > 0 ? ` and no slot freed within ${waitMs} ms` : "";
      return c.json(toErrorBody(429, "rate_limit_exceeded", `The relay is accepting as fast as it can (${why}${waited}). Nothing was queued: send the request again after Retry-After seconds, with the same Idempotency-Key.`), 429, { "Retry-After": "1" });
    }
    try {
      await next();
    } finally {
      release();
      // The next waiter that may take the freed slot goes now, not at its next poll.
      const first = gate.next();
      if (first !== null) state.wake.get(first)?.();
    }
  };
}
