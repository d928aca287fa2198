/*
 * NAME
 *   operator-views - pure helpers of the admin API (/relay/…) and the dashboard
 * DESCRIPTION
 *   mergeQshape()        one qshape across transports: the TOTAL row first, then every
 *                        (transport, destination) row, largest first.
 *   percentileRanks()    nearest-rank positions (0-based) of percentiles in n sorted values.
 *   throughputSeries()   per-minute delivered/bounced/deferred/failed counts over a window,
 *                        zero-filled, from grouped event rows.
 *   suspensionKey()      the Transport DO policy key of a suspension target; parseSuspensionKey()
 *                        the reverse; suspendRule()/resumeRule() change a rule's suspension and
 *                        keep its other fields.
 *   activeSuspensions()  the policies that suspend something now, as operators see them.
 *   stateTable()         grouped recipient counts → by state, by transport, by destination.
 * INVARIANTS
 *   Nothing here reads the clock or does I/O; `now` is passed in (seconds unless named Ms).
 * ERRORS
 *   suspensionKey() returns null for a target it cannot name (caller answers 422).
 */

/** One qshape row (as durable-objects/core/inspect.ts makes it). */
export interface ShapeRowIn {
  destination: string;
  total: number;
  buckets: number[];
}

/** A qshape row with its transport ("" for TOTAL). */
export interface ShapeRowOut extends ShapeRowIn {
  transport: string;
}

/** The qshape of every transport as one table. */
export function mergeQshape(shapes: { transport: string; qshape: ShapeRowIn[] }[], bucketCount: number): ShapeRowOut[] {
  const total: ShapeRowOut = {
    transport: "",
    destination: "TOTAL",
    total: 0,
    buckets: new Array<number>(bucketCount).fill(0),
  };
  const rows: ShapeRowOut[] = [];
  for (const s of shapes) {
    for (const r of s.qshape) {
      if (r.destination === "TOTAL") continue;
      rows.push({ transport: s.transport, destination: r.destination, total: r.total, buckets: [...r.buckets] });
      total.total += r.total;
      r.buckets.forEach((n, i) => {
        if (i < bucketCount) total.buckets[i]! += n;
      });
    }
  }
  rows.sort((a, b) => b.total - a.total || (a.transport + a.destination < b.transport + b.destination ? -1 : 1));
  return [total, ...rows];
}

/** Nearest-rank 0-based positions of `ps` (0–100) in `n` sorted values; empty when n = 0. */
export function percentileRanks(n: number, ps: readonly number[]): { p: number; rank: number }[] {
  if (n <= 0) return [];
  return ps.map((p) => ({ p, rank: Math.min(n - 1, Math.max(0, Math.ceil((p / 100) * n) - 1)) }));
}

/** The outcome kinds of the throughput chart, with the event types counted as each. */
export const THROUGHPUT_TYPES = {
  delivered: "email.delivered",
  bounced: "email.bounced",
  deferred: "email.delivery_delayed",
  failed: "email.failed",
} as const;

/** One minute of the throughput chart. */
export interface ThroughputPoint {
  /** Start of the minute, epoch ms. */
  at: number;
  delivered: number;
  bounced: number;
  deferred: number;
  failed: number;
}

/** Zero-filled per-minute counts for minutes [fromMin, toMin] from rows {minute, type, n}. */
export function throughputSeries(
  rows: { minute: number; type: string; n: number }[],
  fromMin: number,
  toMin: number,
): ThroughputPoint[] {
  const out: ThroughputPoint[] = [];
  for (let m = fromMin; m <= toMin; m++) out.push({ at: m * 60_000, delivered: 0, bounced: 0, deferred: 0, failed: 0 });
  const kindOf = new Map<string, keyof typeof THROUGHPUT_TYPES>(
    Object.entries(THROUGHPUT_TYPES).map(([k, t]) => [t, k as keyof typeof THROUGHPUT_TYPES]),
  );
  for (const r of rows) {
    const kind = kindOf.get(r.type);
    const point = out[r.minute - fromMin];
    if (kind && point) point[kind] += r.n;
  }
  return out;
}

/** What can be suspended. */
export type SuspensionTarget = "destination" | "tenant" | "transport" | "site" | "egress" | "jobid" | "bulk";

/** Targets whose key every transport holds (a tenant's, a site's or a campaign's mail may go through any). */
export const EVERYWHERE: readonly SuspensionTarget[] = ["tenant", "site", "egress", "jobid", "bulk"];

/** The policy key of a suspension target, or null when the name is not usable. */
export function suspensionKey(target: SuspensionTarget, name: string, transport: string): string | null {
  if (name === "" || /[\s]/.test(name)) return null;
  if (EVERYWHERE.includes(target)) return `${target}:${name}`;
  if (target === "transport") return `transport:${name}`;
  return transport === "" ? null : `dest:${transport}/${name}`;
}

/** The target of a policy key, or null for a key that is not one. */
export function parseSuspensionKey(
  key: string,
): { target: SuspensionTarget; transport: string | null; name: string } | null {
  const colon = key.indexOf(":");
  const kind = key.slice(0, colon);
  const rest = key.slice(colon + 1);
  if (colon < 0 || rest === "") return null;
  if ((EVERYWHERE as readonly string[]).includes(kind))
    return { target: kind as SuspensionTarget, transport: null, name: rest };
  if (kind === "transport") return { target: "transport", transport: rest, name: rest };
  if (kind !== "dest") return null;
  const slash = rest.indexOf("/");
  return slash > 0 ? { target: "destination", transport: rest.slice(0, slash), name: rest.slice(slash + 1) } : null;
}

/** A pickup policy rule (durable-objects/core/model.ts PolicyRule). */
export interface Rule {
  concurrency?: number;
  rate?: { count: number; perSec: number };
  suspendedUntil?: number;
  /** What set the suspension when not an operator (a reply rule: "reply_rule:<name>"). */
  label?: string;
}

/** The rule with an operator's suspension until `until` (caps and rate kept). */
export function suspendRule(rule: Rule | undefined, until: number): Rule {
  const { label: _set, ...rest } = rule ?? {};
  return { ...rest, suspendedUntil: until };
}

/** The rule without its suspension: null when nothing else is left (clear the key). */
export function resumeRule(rule: Rule | undefined): Rule | null {
  if (!rule) return null;
  const { suspendedUntil: _gone, label: _set, ...rest } = rule;
  return Object.keys(rest).length === 0 ? null : rest;
}

/** A suspension as the admin API lists it. */
export interface SuspensionView {
  target: SuspensionTarget;
  transport: string | null;
  name: string;
  key: string;
  /** Epoch seconds. */
  until: number;
  /** The Transport DOs that hold it. */
  transports: string[];
  /** What set it: null for an operator, "reply_rule:<name>" for a reply rule. */
  setBy: string | null;
}

/** Suspensions in force at `now`, one per key (a tenant's is held by every transport). */
export function activeSuspensions(
  policies: { transport: string; key: string; rule: Rule }[],
  now: number,
): SuspensionView[] {
  const byKey = new Map<string, SuspensionView>();
  for (const p of policies) {
    const until = p.rule.suspendedUntil;
    const target = parseSuspensionKey(p.key);
    if (until === undefined || until <= now || !target) continue;
    const seen = byKey.get(p.key);
    if (seen) {
      if (until > seen.until) seen.setBy = p.rule.label ?? null;
      seen.until = Math.max(seen.until, until);
      seen.transports.push(p.transport);
    } else {
      byKey.set(p.key, { ...target, key: p.key, until, transports: [p.transport], setBy: p.rule.label ?? null });
    }
  }
  return [...byKey.values()].sort((a, b) => (a.key < b.key ? -1 : 1));
}

/** A grouped count row from the recipient index. */
export interface StateCountRow {
  status: string;
  transport: string | null;
  nexthop: string | null;
  n: number;
}

/** A group's counts by state. */
export interface StateGroup {
  transport: string | null;
  destination?: string | null;
  total: number;
  states: Record<string, number>;
}

/** Counts by state, by transport and by destination (largest first, at most `maxDest`). */
export function stateTable(
  rows: StateCountRow[],
  maxDest: number,
): { by_state: Record<string, number>; by_transport: StateGroup[]; by_destination: StateGroup[]; total: number } {
  const byState: Record<string, number> = {};
  const byTransport = new Map<string, StateGroup>();
  const byDest = new Map<string, StateGroup>();
  let total = 0;
  for (const r of rows) {
    total += r.n;
    byState[r.status] = (byState[r.status] ?? 0) + r.n;
    const t = byTransport.get(r.transport ?? "") ?? { transport: r.transport, total: 0, states: {} };
    byTransport.set(r.transport ?? "", bump(t, r));
    const dk = `${r.transport ?? ""}\u0000${r.nexthop ?? ""}`;
    const d = byDest.get(dk) ?? { transport: r.transport, destination: r.nexthop, total: 0, states: {} };
    byDest.set(dk, bump(d, r));
  }
  const order = (a: StateGroup, b: StateGroup) =>
    b.total - a.total || (`${a.transport}${a.destination ?? ""}` < `${b.transport}${b.destination ?? ""}` ? -1 : 1);
  return {
    by_state: byState,
    by_transport: [...byTransport.values()].sort(order),
    by_destination: [...byDest.values()].sort(order).slice(0, maxDest),
    total,
  };
}

function bump(g: StateGroup, r: StateCountRow): StateGroup {
  g.total += r.n;
  g.states[r.status] = (g.states[r.status] ?? 0) + r.n;
  return g;
}
