/**
 * Egress pools under /relay/egress (operator key only; worker/egress/).
 *
 * DESCRIPTION
 *   GET /relay/egress   { object: "egress", pools: [{ name, members: [{ id, state, suspended_until,
 *                       reason }] }], events: [{ egress, pool, kind, detail, at }] }: each pool's
 *                       members with their health (healthy, suspended, probation), and the latest
 *                       100 suspensions, failovers and returns, newest first.
 */
import { Hono } from "hono";
import { type AppEnv } from "../../http/context";
import { egressEvents, egressPoolsOf, healthOf } from "../../../egress/egress";
import { usable } from "../../../egress/core/health";
import type { Egress } from "../../../egress/core/pools";

const iso = (ms: number) => new Date(ms).toISOString();

export function egressRoutes() {
  const r = new Hono<AppEnv>();
  r.get("/egress", async (c) => {
    const now = Date.now();
    const [health, events] = await Promise.all([healthOf(c.env, now), egressEvents(c.env)]);
    const pools = [...(egressPoolsOf(c.env)?.pools ?? new Map<string, Egress[]>())].map(([name, members]) => ({
      name,
      members: members.map((m) => {
        const h = health.get(m.id);
        const state = !h
          ? "healthy"
          : { up: "healthy", probe: "probation", down: "suspended" }[usable(h, Math.floor(now / 1000))];
        return {
          id: m.id,
          state,
          suspended_until: h && h.state === "suspended" ? iso(h.suspendedUntil * 1000) : null,
          reason: h?.reason ?? null,
        };
      }),
    }));
    return c.json({ object: "egress", pools, events: events.map((e) => ({ ...e, at: iso(e.at) })) });
  });
  return r;
}
