/**
 * The shape of one settings knob and the small parsers the knob table is written with (each takes
 * the raw [vars] string and never throws: a bad value gives the default).
 *
 * DESCRIPTION
 *   Knob, knob(name, def, meaning, parse)   one row of the table in settings.ts.
 *   nonNegative, positive, text, isOn, list  curried parsers for the common kinds of value.
 */

/** The [vars] as the env holds them. */
export type Vars = Record<string, string | undefined>;

/** One knob of the table: its name, default and meaning, and how its value is parsed. */
export interface Knob<T> {
  /** The [vars] name. */
  name: string;
  /** The default, as written in wrangler.toml. */
  def: string;
  /** One line: what it does. */
  meaning: string;
  parse(raw: string | undefined, vars: Vars): T;
}

/** A knob (the table's rows, written positionally). */
export const knob = <T>(
  name: string,
  def: string,
  meaning: string,
  parse: (raw: string | undefined, vars: Vars) => T,
): Knob<T> => ({ name, def, meaning, parse });

/** A number ≥ 0 (unset or empty: the default), times `unit`. */
export const nonNegative =
  (def: number, unit = 1) =>
  (raw: string | undefined) => {
    const n = raw === undefined || raw === "" ? def : Number(raw);
    return (Number.isFinite(n) && n >= 0 ? n : def) * unit;
  };
/** A number > 0, else the default, times `unit`. */
export const positive =
  (def: number, unit = 1) =>
  (raw: string | undefined) => {
    const n = Number(raw);
    return (Number.isFinite(n) && n > 0 ? n : def) * unit;
  };
/** The raw text, or the default when unset or empty. */
export const text = (def: string) => (raw: string | undefined) => raw || def;
/** Whether the raw value is `on`, case-insensitively. */
export const isOn = (on: string) => (raw: string | undefined) => (raw ?? "").toLowerCase() === on;
/** A list separated by commas or spaces, lower-cased, without empty entries or a trailing dot. */
export const list = (raw: string | undefined): string[] =>
  (raw ?? "")
    .split(/[\s,]+/)
    .map((x) => x.trim().toLowerCase().replace(/\.$/, ""))
    .filter((x) => x !== "");
