/**
 * Numeric settings read from string bindings (wrangler.toml [vars]).
 *
 *   msSetting(raw, def, max)   a millisecond setting: `def` when unset, empty or invalid (not a
 *                              finite number ≥ 0), else the number, at most `max`.
 *   countSetting(raw, def)     a count: `def` when unset, empty or not an integer ≥ 1, else the
 *                              number.
 */
export function msSetting(raw: string | undefined, def: number, max: number): number {
  const n = raw === undefined || raw === "" ? def : Number(raw);
  return Number.isFinite(n) && n >= 0 ? Math.min(n, max) : def;
}

export function countSetting(raw: string | undefined, def: number): number {
  const n = Number(raw);
  return Number.isInteger(n) && n > 0 ? n : def;
}
