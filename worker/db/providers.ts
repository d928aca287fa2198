/**
 * Provider rules in D1 (migrations/0015): one row per rule, the rule as JSON.
 *
 * DESCRIPTION
 *   listProviderRules(db)        every rule, by name (a row that no longer parses is skipped
 *                                and logged, never used).
 *   putProviderRule(db, rule, nowMs)  insert or replace.
 *   deleteProviderRule(db, name) false when there was none.
 *   providerRulesOf(env, owner?) the rules as the delivery stage reads them: once per
 *                                PROVIDER_RULES_TTL_MS per isolate (a change applies to
 *                                deliveries from then on); the last rules read (or none) when D1
 *                                cannot answer, so delivery never waits on it. The accept path's
 *                                compliance check reads them the same way.
 *   forgetProviderRules()        drops this isolate's copy (tests, and after an edit here).
 */
import { parseProviderRule, type ProviderRule } from "../net/core/providers";
import { SharedCache } from "../lib/shared-cache";

/** How long an isolate reuses the rules it read (ms). */
export const PROVIDER_RULES_TTL_MS = 30_000;

export async function listProviderRules(db: D1Database): Promise<ProviderRule[]> {
  const { results } = await db
    .prepare("SELECT name, rule FROM provider_rules ORDER BY name")
    .all<{ name: string; rule: string }>();
  const out: ProviderRule[] = [];
  for (const row of results) {
    let parsed: ReturnType<typeof parseProviderRule>;
    try {
      parsed = parseProviderRule(JSON.parse(row.rule));
    } catch {
      parsed = { ok: false, errors: ["not JSON"] };
    }
    if (parsed.ok && parsed.rule.name === row.name) out.push(parsed.rule);
    else console.error(JSON.stringify({ error: "provider rule skipped: malformed row", name: row.name }));
  }
  return out;
}

export async function putProviderRule(db: D1Database, rule: ProviderRule, nowMs: number): Promise<void> {
  await db
    .prepare(
      "INSERT INTO provider_rules (name, rule, updated_at) VALUES (?1, ?2, ?3) " +
        "ON CONFLICT (name) DO UPDATE SET rule = excluded.rule, updated_at = excluded.updated_at",
    )
    .bind(rule.name, JSON.stringify(rule), nowMs)
    .run();
}

export async function deleteProviderRule(db: D1Database, name: string): Promise<boolean> {
  return (await db.prepare("DELETE FROM provider_rules WHERE name = ?").bind(name).run()).meta.changes > 0;
}

/** This isolate's copy of the rules: the value shared, a read under way only by its owner's callers (lib/shared-cache.ts). */
const copy = new SharedCache<ProviderRule[]>(1);
let lastGood: ProviderRule[] = [];

/** Drops this isolate's copy of the rules (see the header). */
export function forgetProviderRules(): void {
  copy.clear();
}

/** The rules for delivery (see the header); `owner` shares its read under way (a new one by default). */
export function providerRulesOf(env: Pick<Env, "DB">, owner: object = {}, nowMs = Date.now()): Promise<ProviderRule[]> {
  return copy
    .lookup(
      "",
      owner,
      () => listProviderRules(env.DB).then((r) => (lastGood = r)),
      nowMs,
      () => nowMs + PROVIDER_RULES_TTL_MS,
    )
    .catch((e: unknown) => {
      console.error(
        JSON.stringify({
          error: "provider rules unreadable; the last ones read apply",
          detail: e instanceof Error ? e.message : String(e),
        }),
      );
      return lastGood;
    });
}
