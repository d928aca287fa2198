/**
 * Egress pools in the delivery stage (core/pools.ts chooses the pool, core/health.ts judges the
 * health): several ways out — SOCKS5 bridges, smarthosts, Cloudflare Email Service, direct — per
 * tenant, sending domain or provider, with failover.
 *
 * DESCRIPTION
 *   egressPoolsOf(env)        the parsed EGRESS_POOLS (null: none), once per env; a malformed value
 *                             is logged and ignored (mail leaves by EGRESS as before).
 *   healthOf(env, nowMs, owner?)  every egress's health (D1 `egress_health`), read at most once
 *                             per HEALTH_TTL_MS per isolate (a read under way shared by `owner`'s
 *                             callers only): a delivery in the happy path reads nothing more and
 *                             writes nothing.
 *   recordHealth(env, seen)   what deliveries saw of egresses (failure or success) folded into
 *                             their health by core/health.ts; a row is written only when a failure
 *                             was seen or an egress on probation succeeded, and each suspension,
 *                             failover and return is an event (`egress_events`, and a log line).
 *   egressEvents(env, limit)  the latest events (GET /relay/egress).
 *
 * INVARIANTS
 *   Health is shared by every agent and consumer through D1; a stale read costs at most one more
 *   delivery tried on a suspended egress (which fails over) or one probe delayed by HEALTH_TTL_MS.
 */
import { parseEgressPools, type EgressPools } from "./core/pools";
import { HEALTHY, observe, type EgressHealth } from "./core/health";
import { settingsOf } from "../settings/settings";
import { SharedCache } from "../lib/shared-cache";

/** How long an isolate reuses the health it read, ms. */
export const HEALTH_TTL_MS = 1_000;

const parsed = new WeakMap<object, EgressPools | null>();

/** See the header. */
export function egressPoolsOf(env: Env): EgressPools | null {
  if (parsed.has(env)) return parsed.get(env)!;
  const res = parseEgressPools(settingsOf(env).egressPools);
  if (!res.ok) console.error(JSON.stringify({ error: "EGRESS_POOLS ignored", problems: res.errors }));
  const pools = res.ok ? res.pools : null;
  parsed.set(env, pools);
  return pools;
}

/** The health last read: the value shared, a read under way only by its owner's callers (lib/shared-cache.ts). */
const lastRead = new SharedCache<Map<string, EgressHealth>>(1);

async function readHealth(env: Env): Promise<Map<string, EgressHealth>> {
  const { results } = await env.DB.prepare("SELECT egress, health FROM egress_health").all<{
    egress: string;
    health: string;
  }>();
  return new Map(results.map((r) => [r.egress, JSON.parse(r.health) as EgressHealth]));
}

/** See the header. */
export function healthOf(env: Env, nowMs = Date.now(), owner: object = {}): Promise<Map<string, EgressHealth>> {
  return lastRead
    .lookup(
      "",
      owner,
      () => readHealth(env),
      nowMs,
      () => nowMs + HEALTH_TTL_MS,
    )
    .catch((e: unknown) => {
      console.error(
        JSON.stringify({
          error: "egress health unreadable; every egress is taken as healthy",
          detail: e instanceof Error ? e.message : String(e),
        }),
      );
      return new Map<string, EgressHealth>();
    });
}

/** What one delivery saw of an egress. */
export interface Seen {
  egress: string;
  pool: string;
  failure: string | null;
  /** The member the delivery went on to after this one failed, if any. */
  failoverTo?: string;
}

/** See the header. */
export async function recordHealth(env: Env, seen: Seen[], nowMs = Date.now()): Promise<void> {
  const known = await healthOf(env, nowMs);
  const interesting = seen.filter((s) => s.failure !== null || (known.get(s.egress)?.state ?? "healthy") !== "healthy");
  if (interesting.length === 0) return;
  const s = settingsOf(env);
  const cfg = { failures: s.egressFailures, windowSec: 60, suspendSec: s.egressSuspendSeconds };
  const now = Math.floor(nowMs / 1000);
  const fresh = await readHealth(env);
  const stmts: D1PreparedStatement[] = [];
  for (const x of interesting) {
    const { health, event } = observe(fresh.get(x.egress) ?? HEALTHY, x.failure, now, cfg);
    fresh.set(x.egress, health);
    stmts.push(
      env.DB.prepare(
        `INSERT INTO egress_health (egress, pool, health, updated_at) VALUES (?1, ?2, ?3, ?4)
        ON CONFLICT (egress) DO UPDATE SET pool = excluded.pool, health = excluded.health,
          updated_at = excluded.updated_at`,
      ).bind(x.egress, x.pool, JSON.stringify(health), nowMs),
    );
    const events: { kind: string; detail: string | null }[] = [];
    if (x.failoverTo) events.push({ kind: "failover", detail: `to ${x.failoverTo}: ${x.failure}` });
    if (event?.kind === "suspended")
      events.push({
        kind: "suspended",
        detail: `until ${new Date(event.until * 1000).toISOString()}: ${event.reason}`,
      });
    if (event?.kind === "resumed") events.push({ kind: "resumed", detail: null });
    for (const e of events) {
      console.warn(JSON.stringify({ event: `egress ${e.kind}`, egress: x.egress, pool: x.pool, detail: e.detail }));
      stmts.push(
        env.DB.prepare("INSERT INTO egress_events (egress, pool, kind, detail, at) VALUES (?, ?, ?, ?, ?)").bind(
          x.egress,
          x.pool,
          e.kind,
          e.detail,
          nowMs,
        ),
      );
    }
  }
  await env.DB.batch(stmts);
  lastRead.set("", fresh, nowMs + HEALTH_TTL_MS);
}

/** See the header. */
export async function egressEvents(
  env: Env,
  limit = 100,
): Promise<{ egress: string; pool: string; kind: string; detail: string | null; at: number }[]> {
  return (
    await env.DB.prepare("SELECT egress, pool, kind, detail, at FROM egress_events ORDER BY id DESC LIMIT ?")
      .bind(limit)
      .all<{ egress: string; pool: string; kind: string; detail: string | null; at: number }>()
  ).results;
}
