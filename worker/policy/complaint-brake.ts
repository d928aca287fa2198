/**
 * The complaint-rate brake: when a complaint takes a tenant's complaint rate above
 * COMPLAINT_RATE_THRESHOLD, its bulk mail (emails with one-click unsubscribe) is paused.
 *
 * DESCRIPTION
 *   complaintCounts(db, tenant, fromMs)  email.delivered and email.complained events of the tenant
 *       since fromMs, by the From domain of their email (event_log's primary key, each email by
 *       its own): Map domain → { d, c }.
 *   windowStart(env, days, nowMs)  now minus `days`, but no further back than
 *       MESSAGE_RETENTION_DAYS (older events are gone).
 *   complaintThreshold(env)  COMPLAINT_RATE_THRESHOLD (default 0.003).
 *   sumCounts(by), complaintRate(delivered, complained)  the tenant's totals; the rate to six
 *       places (0 when nothing was delivered).
 *   pausedUntil(db, tenant, nowMs)  the brake's end when it holds, else null.
 *   recordComplaint(env, id, scope, who, feedbackType)  records a complaint through the
 *       Outbox (email.complained) about `who` (an address, or a recipient index with the addresses
 *       the report names, for a report to a VERP address), then, unless the brake already holds, counts the tenant's last
 *       COMPLAINT_WINDOW_DAYS (7) in D1 with this complaint added (it is not indexed yet): with
 *       at least COMPLAINT_MIN_DELIVERED (1000) deliveries and a rate above the threshold, it
 *       pauses the tenant's bulk mail for COMPLAINT_PAUSE_HOURS (24) (tenant_settings,
 *       read with the key of every send request: accept.ts answers 429 complaint_rate_exceeded)
 *       and records relay.complaint_rate.exceeded on the complained email (webhooks, feed). Bulk
 *       mail already queued is held too: every Transport DO suspends the key bulk:<tenant>
 *       (core/policy.ts) until then, labelled complaint_brake (blocked_by), and nothing of it is
 *       bounced.
 *   liftBrake(env, tenant)  an operator's resume: the pause and the suspensions end.
 *
 * INVARIANTS
 *   Only authenticated complaints are recorded, so only they count: an API key's
 *   (POST /relay/complaints, POST /relay/messages/:id/complaint), an ARF report to a VERP
 *   address or from a DKIM-aligned feedback-loop sender (inbound/email.ts). A report that does
 *   not prove itself records no email.complained, and the brake counts nothing else.
 *   The counting runs only when a complaint is recorded, never on a message's path. Mail without
 *   unsubscribe (transactional) is never paused.
 */
import { REST_MAX } from "../db/events";
import { outboxOf } from "../model/ids";
import { resumeRule, suspendRule } from "../dashboard/core/operator-views";
import { allTransports, inspectAll, transportStub } from "./transports";
import { settingsOf } from "../settings/settings";
import type { ComplaintTarget } from "../../durable-objects/outbox/control";

/** complaintCounts' read (?1 tenant, ?2 its seq floor), exported for its plan's test. */
export const RATE_SQL = `SELECT e.type AS type, lower(rtrim(substr(m.from_addr, instr(m.from_addr, '@') + 1), '> ')) AS domain, count(*) AS n
  FROM event_log e JOIN messages m ON m.id = e.email_id
  WHERE e.tenant_id = ?1 AND e.seq >= ?2 AND e.head_seq >= ?2 - ${REST_MAX} AND e.type IN ('email.delivered', 'email.complained')
  GROUP BY 1, 2`;

/** See the header. */
export function complaintThreshold(env: Env): number {
  return settingsOf(env).complaintThreshold;
}

/** See the header. */
export function windowStart(env: Env, days: number, nowMs: number): number {
  return nowMs - Math.min(days, settingsOf(env).retentionMs / 86_400_000 || days) * 86_400_000;
}

/** See the header. */
export async function complaintCounts(
  db: D1Database,
  tenant: string,
  fromMs: number,
): Promise<Map<string, { d: number; c: number }>> {
  const rows = (
    await db
      .prepare(RATE_SQL)
      .bind(tenant, fromMs * 1000)
      .all<{ type: string; domain: string; n: number }>()
  ).results;
  const by = new Map<string, { d: number; c: number }>();
  for (const row of rows) {
    const cur = by.get(row.domain) ?? { d: 0, c: 0 };
    if (row.type === "email.delivered") cur.d += row.n;
    else cur.c += row.n;
    by.set(row.domain, cur);
  }
  return by;
}

/** The counts of every domain together. */
export function sumCounts(by: ReadonlyMap<string, { d: number; c: number }>): { d: number; c: number } {
  return [...by.values()].reduce((t, x) => ({ d: t.d + x.d, c: t.c + x.c }), { d: 0, c: 0 });
}

/** complained / delivered to six places (0 when nothing was delivered). */
export function complaintRate(delivered: number, complained: number): number {
  return delivered === 0 ? 0 : Math.round((complained / delivered) * 1e6) / 1e6;
}

/** See the header. */
export async function pausedUntil(db: D1Database, tenant: string, nowMs: number): Promise<number | null> {
  const row = await db
    .prepare("SELECT bulk_paused_until AS until FROM tenant_settings WHERE tenant_id = ?")
    .bind(tenant)
    .first<{ until: number | null }>();
  return row?.until != null && row.until > nowMs ? row.until : null;
}

/** The label of the brake's suspension, as blocked_by shows it. */
export const BRAKE_LABEL = "complaint_brake";

/** Suspends (until `untilMs`) or resumes (null) bulk:<tenant> in every Transport DO, keeping what else the key's rule holds. */
async function holdBulk(env: Env, tenant: string, untilMs: number | null): Promise<void> {
  const key = `bulk:${tenant}`;
  const inspections = await inspectAll(env, await allTransports(env));
  await Promise.all(
    inspections.map(async (i) => {
      const existing = i.policies.find((p) => p.key === key)?.rule;
      if (untilMs === null) {
        if (existing?.label === BRAKE_LABEL) await transportStub(env, i.transport).setPolicy(key, resumeRule(existing));
        return;
      }
      await transportStub(env, i.transport).setPolicy(key, {
        ...suspendRule(existing, Math.ceil(untilMs / 1000)),
        label: BRAKE_LABEL,
      });
    }),
  );
}

/** See the header. */
export async function liftBrake(env: Env, tenant: string): Promise<void> {
  await env.DB.prepare(
    "UPDATE tenant_settings SET bulk_paused_until = NULL, bulk_paused_reason = NULL, updated_at = ? WHERE tenant_id = ?",
  )
    .bind(Date.now(), tenant)
    .run();
  await holdBulk(env, tenant, null);
}

type Recorded = Awaited<ReturnType<ReturnType<typeof outboxOf>["afterDelivery"]>>;

/** See the header. */
export async function recordComplaint(
  env: Env,
  id: string,
  scope: string | null,
  who: ComplaintTarget,
  feedbackType: string,
): Promise<Recorded> {
  const outbox = outboxOf(env, id);
  const res = await outbox.afterDelivery(id, scope, { kind: "complaint", address: who, feedbackType });
  if (res.result !== "ok") return res;
  const nowMs = Date.now();
  if ((await pausedUntil(env.DB, res.tenant, nowMs)) !== null) return res;
  const counted = sumCounts(
    await complaintCounts(env.DB, res.tenant, windowStart(env, settingsOf(env).complaintWindowDays, nowMs)),
  );
  const all = { d: counted.d, c: counted.c + 1 }; // this complaint is not indexed yet
  const threshold = complaintThreshold(env);
  if (all.d < settingsOf(env).complaintMinDelivered || all.c / all.d <= threshold) return res;
  const until = nowMs + settingsOf(env).complaintPauseHours * 3_600_000;
  const rate = complaintRate(all.d, all.c);
  await env.DB.prepare(
    `INSERT INTO tenant_settings (tenant_id, updated_at, bulk_paused_until, bulk_paused_reason) VALUES (?1, ?2, ?3, ?4)
      ON CONFLICT (tenant_id) DO UPDATE SET bulk_paused_until = excluded.bulk_paused_until, ` +
      `bulk_paused_reason = excluded.bulk_paused_reason, updated_at = excluded.updated_at`,
  )
    .bind(res.tenant, nowMs, until, `complaint rate ${rate} above ${threshold}`)
    .run();
  await holdBulk(env, res.tenant, until).catch((e: unknown) => {
    // New bulk mail is refused already; queued bulk mail goes on until an operator suspends bulk:<tenant>.
    console.error(
      JSON.stringify({
        error: "complaint-rate brake: queued bulk mail not held",
        tenant: res.tenant,
        detail: e instanceof Error ? e.message : String(e),
      }),
    );
  });
  await outbox.afterDelivery(id, null, {
    kind: "brake",
    address: res.address,
    data: { rate, threshold, delivered: all.d, complained: all.c, paused_until: until },
  });
  console.log(
    JSON.stringify({
      event: "complaint-rate brake",
      tenant: res.tenant,
      rate,
      threshold,
      until: new Date(until).toISOString(),
    }),
  );
  return res;
}
