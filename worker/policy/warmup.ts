/**
 * IP warm-up plans (durable-objects/core/warmup.ts) in D1 (migrations/0016), and their caps in
 * the Transport DOs.
 *
 * DESCRIPTION
 *   listWarmups(db)              every plan with its egress, start and last applied day.
 *   putWarmup(db, egress, plan, startedAt, nowMs)  create or replace (applied_day reset).
 *   deleteWarmup(env, egress)    removes the plan and its caps; false when there was none.
 *   applyWarmups(env, nowSec, force?)  pushes each plan's caps of today onto the key
 *                                egress:<egress>+site:<provider> of every provider rule, in every
 *                                Transport DO (keeping what else the key's rule holds), once per
 *                                plan day unless forced; a finished ramp's caps are removed. Run
 *                                by the cron (every 10 minutes) and after every change.
 *
 * INVARIANTS
 *   Caps are labelled "warmup" (blocked_by warmup); nothing here bounces or drops mail.
 */
import {
  parseWarmupPlan,
  warmupCaps,
  warmupDay,
  warmupKey,
  type PolicyRule,
  type WarmupPlan,
} from "../../durable-objects/core";
import { listProviderRules } from "../db/providers";
import { allTransports, inspectAll, transportStub } from "./transports";

export interface WarmupRow {
  egress: string;
  plan: WarmupPlan;
  startedAt: number;
  appliedDay: number | null;
}

export async function listWarmups(db: D1Database): Promise<WarmupRow[]> {
  const { results } = await db
    .prepare("SELECT egress, plan, started_at, applied_day FROM warmup_plans ORDER BY egress")
    .all<{ egress: string; plan: string; started_at: number; applied_day: number | null }>();
  return results.flatMap((r) => {
    const parsed = parseWarmupPlan(JSON.parse(r.plan));
    return parsed.ok
      ? [{ egress: r.egress, plan: parsed.plan, startedAt: r.started_at, appliedDay: r.applied_day }]
      : [];
  });
}

export async function putWarmup(
  db: D1Database,
  egress: string,
  plan: WarmupPlan,
  startedAt: number,
  nowMs: number,
): Promise<void> {
  await db
    .prepare(
      `INSERT INTO warmup_plans (egress, plan, started_at, applied_day, updated_at) VALUES (?1, ?2, ?3, NULL, ?4)
    ON CONFLICT (egress) DO UPDATE SET plan = excluded.plan, started_at = excluded.started_at, applied_day = NULL, updated_at = excluded.updated_at`,
    )
    .bind(egress, JSON.stringify(plan), startedAt, nowMs)
    .run();
}

/** Sets (or, with null, removes) the warm-up caps of `keys` in every Transport DO. */
async function setCaps(env: Env, caps: Map<string, PolicyRule["caps"] | null>): Promise<void> {
  if (caps.size === 0) return;
  const inspections = await inspectAll(env, await allTransports(env));
  await Promise.all(
    inspections.flatMap((i) =>
      [...caps].map(async ([key, c]) => {
        const existing = i.policies.find((p) => p.key === key)?.rule;
        if (!existing && !c) return;
        const { caps: old, ...rest } = existing ?? {};
        if (JSON.stringify(old ?? null) === JSON.stringify(c)) return; // never rewrite an unchanged rule
        const next: PolicyRule = { ...rest, ...(c ? { caps: c } : {}) };
        await transportStub(env, i.transport).setPolicy(key, Object.keys(next).length > 0 ? next : null);
      }),
    ),
  );
}

export async function deleteWarmup(env: Env, egress: string): Promise<boolean> {
  const res = await env.DB.prepare("DELETE FROM warmup_plans WHERE egress = ?").bind(egress).run();
  if (res.meta.changes === 0) return false;
  const providers = await listProviderRules(env.DB);
  await setCaps(env, new Map(providers.map((p) => [warmupKey(egress, p.name), null])));
  return true;
}

export async function applyWarmups(env: Env, nowSec: number, force = false): Promise<void> {
  const plans = await listWarmups(env.DB);
  const due = plans.filter((p) => force || p.appliedDay !== warmupDay(p.startedAt, nowSec));
  if (due.length === 0) return;
  const providers = await listProviderRules(env.DB);
  const caps = new Map<string, PolicyRule["caps"] | null>();
  for (const p of due) {
    const day = warmupDay(p.startedAt, nowSec);
    for (const provider of providers) {
      const c = warmupCaps(p.plan, day, provider.name);
      caps.set(
        warmupKey(p.egress, provider.name),
        c ? { perDay: c.perDay, perHour: c.perHour, label: "warmup" } : null,
      );
    }
  }
  await setCaps(env, caps);
  await env.DB.batch(
    due.map((p) =>
      env.DB.prepare("UPDATE warmup_plans SET applied_day = ? WHERE egress = ?").bind(
        warmupDay(p.startedAt, nowSec),
        p.egress,
      ),
    ),
  );
}
