/*
 * NAME
 *   warmup - IP warm-up plans: daily and hourly caps per provider that ramp over days (issue #13, item 4)
 * DESCRIPTION
 *   A new egress IP has no reputation: mailbox providers throttle or junk a sudden volume from
 *   it. A warm-up plan caps what the egress sends to each provider (a provider rule's site) per
 *   UTC day and hour, and raises the caps day by day until the ramp ends; then it is done and
 *   nothing is capped. Mail beyond a cap waits (blocked_by warmup) and is never bounced.
 *
 *   A plan is data: { ramp: [{per_day, per_hour?}, …] (day 1, day 2, …), scale?: {<provider>:
 *   factor} } and the time it started. The caps of day d are ramp[d]'s per_day and per_hour
 *   (per_hour defaulting to a tenth of per_day, at least 1), times the provider's scale.
 *
 *   DEFAULT_WARMUP_RAMP     a common ramp: 50 a day to each provider, about doubling daily, to
 *                           500,000 on day 18 (each value with the reasoning in the README).
 *   warmupDay(startedAt, now)   the plan's day (0 = its first), from seconds.
 *   warmupCaps(plan, day, provider)  the caps on that provider that day, or null once the ramp
 *                           is over.
 *   warmupKey(egress, provider)  the policy key they go on: "egress:<e>+site:<p>" (policy.ts).
 *   parseWarmupPlan(input)  a plan, or its problems.
 * INVARIANTS
 *   Pure. Caps never fall from one day to the next in a valid plan (the ramp never decreases).
 */

/** A warm-up plan (see the header). */
export interface WarmupPlan {
  ramp: { per_day: number; per_hour?: number }[];
  /** Per provider rule name: a factor on the ramp's caps (default 1). */
  scale?: Record<string, number>;
}

/** 18 days from 50 to 500,000 a day per provider. */
export const DEFAULT_WARMUP_RAMP: WarmupPlan["ramp"] = [
  50, 100, 200, 400, 800, 1_500, 3_000, 6_000, 10_000, 20_000, 35_000, 50_000, 75_000, 100_000, 150_000, 200_000,
  300_000, 500_000,
].map((per_day) => ({ per_day }));

/** The plan's day (0-based) at `now`, both in seconds. */
export function warmupDay(startedAt: number, now: number): number {
  return Math.max(0, Math.floor((now - startedAt) / 86_400));
}

/** The caps on `provider` on day `day`, or null once the ramp is over (see the header). */
export function warmupCaps(
  plan: WarmupPlan,
  day: number,
  provider: string,
): { perDay: number; perHour: number } | null {
  const step = plan.ramp[day];
  if (!step) return null;
  const scale = plan.scale?.[provider] ?? 1;
  const perDay = Math.max(1, Math.floor(step.per_day * scale));
  const perHour = Math.max(1, Math.floor((step.per_hour ?? Math.ceil(step.per_day / 10)) * scale));
  return { perDay, perHour: Math.min(perHour, perDay) };
}

/** The policy key an egress's caps on a provider go on. */
export function warmupKey(egress: string, provider: string): string {
  return `egress:${egress}+site:${provider}`;
}

const int = (v: unknown, min: number, max: number) =>
  Number.isInteger(v) && (v as number) >= min && (v as number) <= max;

/** A plan from untrusted input, or its problems. */
export function parseWarmupPlan(input: unknown): { ok: true; plan: WarmupPlan } | { ok: false; errors: string[] } {
  const p = input as Record<string, unknown> | null;
  if (p === null || typeof p !== "object" || Array.isArray(p)) return { ok: false, errors: ["a plan is an object"] };
  const errors: string[] = [];
  for (const k of Object.keys(p)) if (k !== "ramp" && k !== "scale") errors.push(`${k}: unknown field`);
  const ramp = p.ramp as unknown[];
  if (!Array.isArray(ramp) || ramp.length === 0 || ramp.length > 366)
    errors.push("ramp: 1–366 days of {per_day, per_hour?}");
  else {
    ramp.forEach((s, i) => {
      const step = s as Record<string, unknown> | null;
      if (
        step === null ||
        typeof step !== "object" ||
        !int(step.per_day, 1, 100_000_000) ||
        (step.per_hour !== undefined && !int(step.per_hour, 1, 100_000_000)) ||
        Object.keys(step).some((k) => k !== "per_day" && k !== "per_hour")
      ) {
        errors.push(`ramp[${i}]: {per_day: 1…, per_hour?: 1…}`);
      } else if (
        i > 0 &&
        (ramp[i - 1] as { per_day?: unknown }).per_day !== undefined &&
        (step.per_day as number) < (ramp[i - 1] as { per_day: number }).per_day
      ) {
        errors.push(`ramp[${i}]: per_day below the day before's (a ramp never decreases)`);
      }
    });
  }
  if (
    p.scale !== undefined &&
    (p.scale === null ||
      typeof p.scale !== "object" ||
      Array.isArray(p.scale) ||
      !Object.values(p.scale).every((v) => typeof v === "number" && v > 0 && v <= 100))
  ) {
    errors.push("scale: {<provider>: a factor above 0, at most 100}");
  }
  return errors.length > 0
    ? { ok: false, errors }
    : {
        ok: true,
        plan: { ramp: ramp as WarmupPlan["ramp"], ...(p.scale ? { scale: p.scale as Record<string, number> } : {}) },
      };
}
