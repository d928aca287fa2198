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
 *                         A waiter polls the gate on a timer of its own (often near the head of
 *                         the line, seldom further back) and nothing else: no request ever waits on a promise another request resolves. The
 *                         runtime cancels such a request as hung ("your Worker's code had hung")
 *                         when its own events run out, also when another request's release woke
 *                         it and cleared its timer (the chaos load campaign's quick run, with a
 *                         wake-up on release: 21 cancelled, their slots lost for a minute).
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
/**
 * How often a waiter asks the gate, ms: one of the first ACCEPT_CONCURRENCY in line every
 * POLL_MS (the most a freed slot stays unused while someone waits), one further back every
 * POLL_BACK_MS (a flood's hundreds of waiters would otherwise take the CPU with their timers).
 */
const POLL_MS = 5;
const POLL_BACK_MS = 100;

let current: { limit: number; gate: Gate } | null = null;

function stateOf(env: object): NonNullable<typeof current> {
  const limit = settingsOf(env).acceptConcurrency;
  if (current?.limit !== limit) {
    const perKey = Math.max(1, limit - Math.max(1, Math.floor(limit / 4)));
    current = {
      limit,
      gate: new Gate({ limit, perKey, maxHoldMs: MAX_HOLD_MS, activeMs: SENDING_MS, staleMs: 1000 }, Date.now),
    };
  }
  return current;
}

/** The isolate's accept gate for the env's settings. */
export function acceptGateOf(env: object): Gate {
  return stateOf(env).gate;
}

/** A slot for `tenant`, waiting in line up to `waitMs`; null when none came in time. */
async function slotFor(gate: Gate, tenant: string, waitMs: number): Promise<(() => void) | null> {
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
      const poll = gate.rank(ticket, gate.opts.limit) < gate.opts.limit ? POLL_MS : POLL_BACK_MS;
      await new Promise<void>((resolve) => setTimeout(resolve, Math.min(poll, left)));
    }
  } finally {
    gate.leave(ticket);
  }
}

/** Holds an accept slot around the route, waiting for one up to ACCEPT_WAIT_MS, or answers 429. */
export function acceptGate(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const gate = stateOf(c.env).gate;
    const tenant = c.get("tenant");
    const waitMs = settingsOf(c.env).acceptWaitMs;
    const release = await slotFor(gate, tenant, waitMs);
    if (release === null) {
      const share = gate.share(tenant);
      const mine = gate.held(tenant) >= share;
      const why = mine
        ? `this tenant has ${share} send requests in progress, its share of ${gate.opts.limit} while ${gate.sending()} tenants are sending`
        : `${gate.opts.limit} send requests are in progress`;
      const waited = waitMs > 0 ? ` and no slot freed within ${waitMs} ms` : "";
      return c.json(
        toErrorBody(
          429,
          "rate_limit_exceeded",
          `The relay is accepting as fast as it can (${why}${waited}).` +
            ` Nothing was queued: send the request again after Retry-After seconds, with the same Idempotency-Key.`,
        ),
        429,
        { "Retry-After": "1" },
      );
    }
    let held = true;
    const leave = () => {
      if (held) release();
      held = false;
    };
    c.set("leaveGate", leave);
    try {
      await next();
    } finally {
      leave();
    }
  };
}
