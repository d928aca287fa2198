/**
 * Numeric settings read from string bindings (wrangler.toml [vars]).
 *
 *   msSetting(raw, def, max)   a millisecond setting: `def` when unset, empty or invalid (not a
 *                              finite number ≥ 0), else the number, at most `max`.
 */
export function msSetting(raw: string | undefined, def: number, max: number): number {
  const n = raw === undefined || raw === "" ? def : Number(raw);
  return Number.isFinite(n) && n >= 0 ? Math.min(n, max) : def;
}
