/**
 * Delivery through an egress pool (worker/egress/): the mx kind's entries whose tenant, sending
 * domain or provider has a pool leave by its members instead of EGRESS.
 *
 * DESCRIPTION
 *   sendPooled(env, prepared, hosts, settings, cache, rule, sts, background)  null when no pool
 *       applies to any entry (the caller delivers as before); else the parts of every entry: each
 *       pool's entries go by its first member that is not suspended, in the pool's order — a
 *       SOCKS5 bridge or direct to the MX hosts (MTA-STS as always), a smarthost (the relay
 *       kind's settings), or Cloudflare Email Service. A member whose delivery failed its health
 *       (core/health.ts healthFailure) before anything was sent (a connection or TLS failure) is
 *       passed over for the next within the same attempt (failover); its deferred recipients, if
 *       none is left, wait with blocked_by egress:<id>. A pool whose members are all suspended
 *       defers its entries without connecting, blocked_by egress_suspended:<pool>. What each
 *       member did is folded into the shared health in the background (recordHealth).
 *
 * INVARIANTS
 *   A recipient is sent by one member at most within an attempt: the next member is tried only
 *   when the session ended before any transaction completed.
 */
import type { MxHost } from "../net/core/mx-hosts";
import type { ProviderRule } from "../net/core/providers";
import { createEgressConnect } from "../net/socks5";
import { egressPoolsOf, healthOf, recordHealth, type Seen } from "../egress/egress";
import { healthFailure, orderMembers } from "../egress/core/health";
import { poolFor, type Egress } from "../egress/core/pools";
import { lookupFailureParts, runMxSessions, type MxSettings, type StsContext } from "./mx";
import { runSession, type PreparedJob, type SessionPart } from "./session";
import { sendViaEmailService } from "./cf-email";
import type { SessionCache } from "./session-cache";

type Secrets = { EGRESS_USERNAME?: string; EGRESS_PASSWORD?: string };

async function sendVia(
  env: Env,
  e: Egress,
  prepared: PreparedJob[],
  hosts: MxHost[],
  settings: MxSettings,
  cache?: SessionCache,
  rule?: ProviderRule,
  sts?: StsContext,
): Promise<SessionPart[]> {
  if (e.kind === "cf-email") return sendViaEmailService(env, prepared);
  if (e.kind === "smtp")
    return runSession(env, { host: e.host, port: e.port }, prepared, { ...(cache ? { cache } : {}), egress: e.id });
  const secrets = env as unknown as Secrets;
  const credentials = secrets.EGRESS_USERNAME
    ? { username: secrets.EGRESS_USERNAME, password: secrets.EGRESS_PASSWORD ?? "" }
    : null;
  const connect = createEgressConnect(
    e.kind === "direct" ? { kind: "direct" } : { kind: "socks5", hostname: e.host, port: e.port, credentials },
  );
  return runMxSessions(env, hosts, prepared, { ...settings, connect, egress: e.id }, cache, rule, sts);
}

function failureOf(parts: SessionPart[]): string | null {
  const site = parts.find((p) => p.site)?.site ?? null;
  const replies = parts
    .flatMap((p) => p.txn?.recipients ?? [])
    .map((r) => ({ code: r.code, text: r.text, source: r.source }));
  return healthFailure({ site, replies });
}

function deferAll(prepared: PreparedJob[], text: string, blockedBy: string): SessionPart[] {
  return lookupFailureParts(prepared, {
    kind: "defer",
    code: 451,
    enhanced: "4.4.0",
    text,
    expiresAtMs: 0,
  } as never).map((p) => ({ ...p, blockedBy }));
}

async function viaPool(
  env: Env,
  pool: { name: string; members: Egress[] },
  prepared: PreparedJob[],
  hosts: MxHost[],
  settings: MxSettings,
  cache: SessionCache | undefined,
  rule: ProviderRule | undefined,
  sts: StsContext | undefined,
  background: (p: Promise<unknown>) => void,
): Promise<SessionPart[]> {
  const nowMs = Date.now();
  const health = await healthOf(env, nowMs);
  const order = orderMembers(pool.members, health, Math.floor(nowMs / 1000));
  if (order.length === 0) {
    const until = Math.min(...pool.members.map((m) => health.get(m.id)?.suspendedUntil ?? 0));
    return deferAll(
      prepared,
      `every egress of pool ${pool.name} is suspended (the first returns at ${new Date(until * 1000).toISOString()})`,
      `egress_suspended:${pool.name}`,
    );
  }
  const seen: Seen[] = [];
  let parts: SessionPart[] = [];
  for (const [i, e] of order.entries()) {
    parts = await sendVia(env, e, prepared, hosts, settings, cache, rule, sts);
    const failure = failureOf(parts);
    seen.push({ egress: e.id, pool: pool.name, failure });
    if (failure === null) break;
    parts = parts.map((p) => ({ ...p, blockedBy: p.blockedBy ?? `egress:${e.id}` }));
    // Nothing reached the server (a site failure ends a session before any transaction completed): the next member may try.
    const untouched = parts.every((p) => p.site !== null || p.txn === undefined);
    const next = order[i + 1];
    if (!untouched || !next) break;
    seen[seen.length - 1]!.failoverTo = next.id;
  }
  background(
    recordHealth(env, seen).catch((e: unknown) =>
      console.error(
        JSON.stringify({ error: "egress health not recorded", detail: e instanceof Error ? e.message : String(e) }),
      ),
    ),
  );
  const used = seen[seen.length - 1]!.egress;
  return parts.map((p) => ({ ...p, egress: used }));
}

/** See the header. */
export async function sendPooled(
  env: Env,
  prepared: PreparedJob[],
  hosts: MxHost[],
  settings: MxSettings,
  cache: SessionCache | undefined,
  rule: ProviderRule | undefined,
  sts: StsContext | undefined,
  background: (p: Promise<unknown>) => void,
): Promise<SessionPart[] | null> {
  const cfg = egressPoolsOf(env);
  if (!cfg) return null;
  const groups = new Map<string, { pool: { name: string; members: Egress[] } | null; items: PreparedJob[] }>();
  for (const p of prepared) {
    const from = p.envelope?.mailFrom ?? "";
    const pool = poolFor(cfg, {
      tenant: p.envelope?.tenant ?? null,
      domain: from.includes("@") ? from.slice(from.lastIndexOf("@") + 1) : null,
      provider: rule?.name ?? null,
    });
    const key = pool?.name ?? "";
    const g = groups.get(key) ?? { pool, items: [] };
    g.items.push(p);
    groups.set(key, g);
  }
  if (groups.size === 1 && groups.has("")) return null;
  const out = await Promise.all(
    [...groups.values()].map((g) =>
      g.pool
        ? viaPool(env, g.pool, g.items, hosts, settings, cache, rule, sts, background)
        : runMxSessions(env, hosts, g.items, settings, cache, rule, sts),
    ),
  );
  // Back in the order the entries came.
  const byEntry = new Map(out.flat().map((p) => [p.job.entryId, p]));
  return prepared.map((p) => byEntry.get(p.job.entryId)!);
}
