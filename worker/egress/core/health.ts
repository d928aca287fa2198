/*
 * NAME
 *   health - an egress's health: failures suspend it for a while, a success after the
 *            suspension brings it back
 *
 * DESCRIPTION
 *   healthFailure(outcome)   whether a delivery's outcome speaks against the egress it left by,
 *                            and why: a connection that could not be made (the bridge or the
 *                            target unreachable, 4.4.1), a TLS handshake that failed (4.7.5), a
 *                            421 (the server closing on us), or a reply naming a block list
 *                            (Spamhaus, "blocklist", "RBL", "listed at" …). A refusal of the
 *                            recipient or the message is the mail's business, not the egress's.
 *   observe(h, failure, now, cfg)  the next health after one delivery, and the event it made:
 *                            `cfg.failures` failures within cfg.windowSec suspend the egress
 *                            ("suspended") for cfg.suspendSec · 2^strikes (at most 16 doublings);
 *                            once that time has passed it is on probation: the next delivery may
 *                            use it, and a success makes it healthy again ("resumed", strikes
 *                            reset) while a failure suspends it again, longer.
 *   usable(h, now)           "up" (healthy), "probe" (on probation) or "down" (suspended).
 *   orderMembers(members, healths, now)  the members a delivery may try, in the pool's order,
 *                            suspended ones left out.
 *
 * INVARIANTS
 *   Pure. A suspended egress is never offered before its time; a healthy one has no strikes.
 *
 * ERRORS
 *   None thrown.
 */

export interface EgressHealth {
  state: "healthy" | "suspended";
  /** Failure times (epoch seconds) within the window. */
  failures: number[];
  suspendedUntil: number;
  strikes: number;
  reason: string | null;
}

export interface HealthConfig {
  failures: number;
  windowSec: number;
  suspendSec: number;
}

export type HealthEvent = { kind: "suspended"; reason: string; until: number } | { kind: "resumed" } | null;

export const HEALTHY: Readonly<EgressHealth> = Object.freeze({
  state: "healthy",
  failures: [],
  suspendedUntil: 0,
  strikes: 0,
  reason: null,
});

const BLOCKLIST =
  /spamhaus|block ?list|black ?list|\brbl\b|dnsbl|listed (at|on|in)|blocked using|poor reputation|sender ip.*(blocked|listed)/i;

/** What a delivery's outcome says against its egress (see the header). */
export interface DeliveryOutcome {
  site: { dsnStatus: string; reason: string } | null;
  replies: { code: number; text: string; source: "remote" | "local" }[];
}

export function healthFailure(o: DeliveryOutcome): string | null {
  if (o.site && /^4\.4\.1$|^4\.7\.5$/.test(o.site.dsnStatus)) return o.site.reason;
  if (o.site && /proxy|socks|tunnel|connect to/i.test(o.site.reason)) return o.site.reason;
  const r = o.replies.find((x) => x.source === "remote" && (x.code === 421 || BLOCKLIST.test(x.text)));
  if (r) return `${r.code} ${r.text}`;
  if (o.site && (/^421\b/.test(o.site.reason) || BLOCKLIST.test(o.site.reason))) return o.site.reason;
  return null;
}

export function usable(h: EgressHealth, now: number): "up" | "probe" | "down" {
  if (h.state === "healthy") return "up";
  return now >= h.suspendedUntil ? "probe" : "down";
}

export function observe(
  h: EgressHealth,
  failure: string | null,
  now: number,
  cfg: HealthConfig,
): { health: EgressHealth; event: HealthEvent } {
  if (failure === null) {
    if (h.state === "suspended" && now >= h.suspendedUntil)
      return { health: { ...HEALTHY, failures: [] }, event: { kind: "resumed" } };
    return { health: h, event: null };
  }
  if (h.state === "suspended") {
    if (now < h.suspendedUntil) return { health: h, event: null }; // a delivery that was already under way
    const strikes = Math.min(h.strikes + 1, 16);
    const until = now + cfg.suspendSec * 2 ** strikes;
    return {
      health: { state: "suspended", failures: [], suspendedUntil: until, strikes, reason: failure },
      event: { kind: "suspended", reason: failure, until },
    };
  }
  const failures = [...h.failures.filter((t) => t > now - cfg.windowSec), now];
  if (failures.length < cfg.failures) return { health: { ...h, failures, reason: failure }, event: null };
  const until = now + cfg.suspendSec;
  return {
    health: { state: "suspended", failures: [], suspendedUntil: until, strikes: 0, reason: failure },
    event: { kind: "suspended", reason: failure, until },
  };
}

export function orderMembers<T extends { id: string }>(
  members: readonly T[],
  healths: ReadonlyMap<string, EgressHealth>,
  now: number,
): T[] {
  return members.filter((m) => usable(healths.get(m.id) ?? HEALTHY, now) !== "down");
}
