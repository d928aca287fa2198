/**
 * A tenant's defaults for the mail it sends.
 *
 * DESCRIPTION
 *   GET   /relay/settings   { object: "settings", unsubscribe, receiving_daily_quota, compliance }:
 *                           the default of a send request's `unsubscribe` (true, { topic }, or
 *                           null: off); the tenant's own limit of received messages per UTC day
 *                           (null: the operator's RECEIVING_DAILY_QUOTA; worker/receiving/); and
 *                           what the compliance check at send time does: "warn" (the default:
 *                           warnings in the response and in GET /emails/:id) or "strict" (a send
 *                           with any warning is refused, 422 compliance_error naming the rule).
 *   PATCH /relay/settings   { unsubscribe?: true | { topic } | null, receiving_daily_quota?: n | null,
 *                           compliance?: "warn" | "strict" } → the settings; a field left out stays
 *                           as it was. With a default, every one-recipient email that says nothing
 *                           about it (and sets no List-Unsubscribe of its own) gets the one-click
 *                           headers;
 *                           `"unsubscribe": false` opts one email out.
 *   The default is read in the query that authenticates a send request (db/sending-domains.ts keyAccess).
 *
 * ERRORS
 *   422 validation_error for a body that is not one of the above.
 */
import { Hono } from "hono";
import { z } from "zod";
import { type AppEnv } from "../http/context";
import { parseInput, readJson } from "../http/body";

const TopicSchema = z.string().regex(/^[A-Za-z0-9_-]{1,256}$/, "must be 1–256 characters of A–Z, a–z, 0–9, _ or -");

/** The body of PATCH /relay/settings. */
export const SettingsSchema = z
  .object({
    unsubscribe: z.union([z.literal(true), z.object({ topic: TopicSchema.optional() }).strict(), z.null()]).optional(),
    receiving_daily_quota: z.number().int().min(0).max(10_000_000).nullable().optional(),
    compliance: z.enum(["warn", "strict"]).optional(),
  })
  .strict()
  .refine((b) => b.unsubscribe !== undefined || b.receiving_daily_quota !== undefined || b.compliance !== undefined, {
    message: "give unsubscribe, receiving_daily_quota or compliance",
  });

/** GET and PATCH /relay/settings's answer. */
export const SettingsBody = z.object({
  object: z.literal("settings"),
  unsubscribe: z.union([z.literal(true), z.object({ topic: z.string().optional() }), z.null()]),
  receiving_daily_quota: z.number().int().nullable(),
  compliance: z.enum(["warn", "strict"]),
});

async function read(db: D1Database, tenant: string): Promise<z.infer<typeof SettingsBody>> {
  const row = await db
    .prepare("SELECT unsubscribe, receiving_daily_quota, compliance FROM tenant_settings WHERE tenant_id = ?")
    .bind(tenant)
    .first<{ unsubscribe: string | null; receiving_daily_quota: number | null; compliance: string | null }>();
  const unsubscribe = row?.unsubscribe ? (JSON.parse(row.unsubscribe) as true | { topic?: string }) : null;
  return {
    object: "settings",
    unsubscribe,
    receiving_daily_quota: row?.receiving_daily_quota ?? null,
    compliance: row?.compliance === "strict" ? "strict" : "warn",
  };
}

/** The /relay/settings routes (behind the API key middleware). */
export function settingsRoutes() {
  const r = new Hono<AppEnv>();
  r.get("/", async (c) => c.json(await read(c.env.DB, c.get("tenant"))));
  r.patch("/", async (c) => {
    const input = parseInput(SettingsSchema, (await readJson(c, 4096)).value);
    // A field left out keeps its value (?5, ?6, ?7: whether each was given).
    await c.env.DB.prepare(
      `INSERT INTO tenant_settings (tenant_id, unsubscribe, receiving_daily_quota, compliance, updated_at) VALUES (?1, ?2, ?3, ?4, ?8)
        ON CONFLICT (tenant_id) DO UPDATE SET unsubscribe = CASE WHEN ?5 THEN excluded.unsubscribe ELSE unsubscribe END,
          receiving_daily_quota = CASE WHEN ?6 THEN excluded.receiving_daily_quota ELSE receiving_daily_quota END,
          compliance = CASE WHEN ?7 THEN excluded.compliance ELSE compliance END, updated_at = excluded.updated_at`,
    )
      .bind(
        c.get("tenant"),
        input.unsubscribe == null ? null : JSON.stringify(input.unsubscribe),
        input.receiving_daily_quota ?? null,
        input.compliance ?? null,
        Number(input.unsubscribe !== undefined),
        Number(input.receiving_daily_quota !== undefined),
        Number(input.compliance !== undefined),
        Date.now(),
      )
      .run();
    return c.json(await read(c.env.DB, c.get("tenant")));
  });
  return r;
}
