/**
 * IP warm-up plans under /relay/warmup (issue 13, item 4; operator key only): per egress
 * ("direct", or the SOCKS5 bridge's "host:port"), daily and hourly caps per provider rule that
 * ramp over days (durable-objects/core/warmup.ts, api/warmup.ts).
 *
 * DESCRIPTION
 *   GET    /relay/warmup                    every plan: its day, whether it is done, and today's
 *                                           caps per provider.
 *   PUT    /relay/warmup/:egress            { ramp?, scale? } → the plan (the default ramp when
 *                                           none is given); a new plan starts now, a replaced one
 *                                           keeps its start. Its caps apply at once.
 *   POST   /relay/warmup/:egress/advance    { days } → moves the plan on (or back, negative)
 *                                           that many days; its caps apply at once.
 *   DELETE /relay/warmup/:egress            the plan and its caps go.
 *
 * ERRORS
 *   422 validation_error naming each problem; 404 not_found for an unknown plan.
 */
import { Hono } from "hono";
import { z } from "zod";
import { DEFAULT_WARMUP_RAMP, parseWarmupPlan, warmupCaps, warmupDay } from "../../../../durable-objects/core";
import { listProviderRules } from "../../../db/providers";
import { type AppEnv } from "../../http/context";
import { parseInput, readJson } from "../../http/body";
import { ApiError } from "../../../model/errors";
import { applyWarmups, deleteWarmup, listWarmups, putWarmup, type WarmupRow } from "../../../policy/warmup";

export const WarmupAdvanceSchema = z.object({ days: z.number().int().min(-366).max(366) }).strict();
export const WarmupPlanSchema = z
  .object({
    ramp: z
      .array(z.object({ per_day: z.number().int().min(1), per_hour: z.number().int().min(1).optional() }))
      .min(1)
      .max(366)
      .optional()
      .describe("day 1, day 2, …: caps per provider (per_hour defaults to a tenth of per_day); never decreasing"),
    scale: z
      .record(z.string(), z.number().positive().max(100))
      .optional()
      .describe("per provider rule name: a factor on the caps"),
  })
  .strict();

const EGRESS = /^(direct|[A-Za-z0-9.-]+:\d{1,5}|\[[0-9A-Fa-f:.]+\]:\d{1,5})$/;

function egressOf(raw: string): string {
  if (!EGRESS.test(raw))
    throw new ApiError(
      422,
      "validation_error",
      'Invalid egress: "direct" or the SOCKS5 bridge\'s "host:port" (as EGRESS names it).',
    );
  return raw;
}

/** A plan as the routes show it; `providers` are the provider rule names (read once per request). */
function view(w: WarmupRow, providers: readonly { name: string }[], nowSec: number) {
  const day = warmupDay(w.startedAt, nowSec);
  const caps = Object.fromEntries(
    providers.flatMap((p) => {
      const c = warmupCaps(w.plan, day, p.name);
      return c ? [[p.name, { per_day: c.perDay, per_hour: c.perHour }]] : [];
    }),
  );
  return {
    object: "warmup" as const,
    egress: w.egress,
    started_at: new Date(w.startedAt * 1000).toISOString(),
    day: day + 1,
    days: w.plan.ramp.length,
    done: day >= w.plan.ramp.length,
    caps_today: caps,
    plan: w.plan,
  };
}

async function one(env: Env, egress: string, nowSec: number) {
  const w = (await listWarmups(env.DB)).find((x) => x.egress === egress);
  if (!w) throw new ApiError(404, "not_found", "Warm-up plan not found.");
  return view(w, await listProviderRules(env.DB), nowSec);
}

/** The /relay/warmup routes (mounted behind the operator check). */
export function warmupRoutes() {
  const r = new Hono<AppEnv>();
  const now = () => Math.floor(Date.now() / 1000);

  r.get("/warmup", async (c) => {
    const t = now();
    const [plans, providers] = await Promise.all([listWarmups(c.env.DB), listProviderRules(c.env.DB)]);
    return c.json({ object: "list", data: plans.map((w) => view(w, providers, t)) });
  });

  r.put("/warmup/:egress", async (c) => {
    const egress = egressOf(c.req.param("egress"));
    const body = parseInput(WarmupPlanSchema, (await readJson(c, 64 * 1024)).value);
    const parsed = parseWarmupPlan({
      ramp: body.ramp ?? DEFAULT_WARMUP_RAMP,
      ...(body.scale ? { scale: body.scale } : {}),
    });
    if (!parsed.ok) throw new ApiError(422, "validation_error", `Invalid warm-up plan: ${parsed.errors.join("; ")}.`);
    const t = now();
    const existing = (await listWarmups(c.env.DB)).find((x) => x.egress === egress);
    await putWarmup(c.env.DB, egress, parsed.plan, existing?.startedAt ?? t, Date.now());
    await applyWarmups(c.env, t, true);
    return c.json(await one(c.env, egress, t));
  });

  r.post("/warmup/:egress/advance", async (c) => {
    const egress = egressOf(c.req.param("egress"));
    const body = parseInput(WarmupAdvanceSchema, (await readJson(c, 1024)).value);
    const existing = (await listWarmups(c.env.DB)).find((x) => x.egress === egress);
    if (!existing) throw new ApiError(404, "not_found", "Warm-up plan not found.");
    const t = now();
    await putWarmup(c.env.DB, egress, existing.plan, existing.startedAt - body.days * 86_400, Date.now());
    await applyWarmups(c.env, t, true);
    return c.json(await one(c.env, egress, t));
  });

  r.delete("/warmup/:egress", async (c) => {
    const egress = egressOf(c.req.param("egress"));
    if (!(await deleteWarmup(c.env, egress))) throw new ApiError(404, "not_found", "Warm-up plan not found.");
    return c.json({ object: "warmup", egress, deleted: true });
  });

  return r;
}
