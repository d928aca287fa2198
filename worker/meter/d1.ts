/**
 * The meter's D1 wrapper: every statement's rows read and written as D1 reports them
 * (meta.rows_read / rows_written), by statement, with first() and raw() answered from all().
 */
import { bindTo } from "./meter";
import { add, levels, quiet, reg } from "./registry";
import { trackIo } from "./activity";

interface D1Meta {
  rows_read?: number;
  rows_written?: number;
  size_after?: number;
}

export const keys = new Map<string, Map<string, string>>();

/**
 * The key of a statement in rows_written_by_statement and rows_read_by_statement: its first
 * words, whitespace folded (cached per text: a few hundred distinct ones).
 */
export function statementKey(owner: string, q: string): string {
  let byText = keys.get(owner);
  if (byText === undefined) keys.set(owner, (byText = new Map()));
  let v = byText.get(q);
  if (v === undefined) {
    v = `${owner}: ${q.replace(/\s+/g, " ").trim().slice(0, 72)}`;
    if (byText.size < 1000) byText.set(q, v);
  }
  return v;
}

/** Adds the rows of one D1 result (its `meta`); `q` is the statement's text when known. */
export function recordD1(meta: D1Meta | undefined, q = "?"): void {
  if (typeof meta?.size_after === "number") levels.d1_bytes = meta.size_after;
  if (quiet > 0) return;
  reg.d1_statements++;
  add(reg.runs_by_statement, statementKey("D1", q), 1);
  reg.d1_rows_read += meta?.rows_read ?? 0;
  const w = meta?.rows_written ?? 0;
  reg.d1_rows_written += w;
  if (w > 0) add(reg.rows_written_by_statement, statementKey("D1", q), w);
  if ((meta?.rows_read ?? 0) > 0) add(reg.rows_read_by_statement, statementKey("D1", q), meta!.rows_read!);
}

const RAW_STATEMENT = Symbol("cohort.meter.rawStatement");

class MeteredStatement {
  [RAW_STATEMENT]: D1PreparedStatement;

  constructor(
    raw: D1PreparedStatement,
    readonly query: string,
  ) {
    this[RAW_STATEMENT] = raw;
  }

  bind(...values: unknown[]): MeteredStatement {
    return new MeteredStatement(this[RAW_STATEMENT].bind(...values), this.query);
  }

  async run<T = Record<string, unknown>>(): Promise<D1Result<T>> {
    const r = await trackIo(this[RAW_STATEMENT].run<T>());
    recordD1(r.meta, this.query);
    return r;
  }

  async all<T = Record<string, unknown>>(): Promise<D1Result<T>> {
    const r = await trackIo(this[RAW_STATEMENT].all<T>());
    recordD1(r.meta, this.query);
    return r;
  }

  /** As D1's first(): the same query through all(), so its rows are counted. */
  async first<T = unknown>(column?: string): Promise<T | null> {
    const row = (await this.all<Record<string, unknown>>()).results[0];
    if (row === undefined) return null;
    if (column === undefined) return row as T;
    if (!(column in row)) throw new Error(`D1_COLUMN_NOTFOUND: Column not found (${column})`);
    return row[column] as T;
  }

  /** As D1's raw(): rows as arrays (through all(); columns with the same name collapse as in all()). */
  async raw<T = unknown[]>(options?: { columnNames?: boolean }): Promise<T[]> {
    const rows = (await this.all<Record<string, unknown>>()).results;
    const arrays = rows.map((r) => Object.values(r)) as T[];
    if (options?.columnNames) return [Object.keys(rows[0] ?? {}) as T, ...arrays];
    return arrays;
  }
}

function rawStatement(s: D1PreparedStatement): D1PreparedStatement {
  return (s as unknown as MeteredStatement)[RAW_STATEMENT] ?? s;
}

/** A D1Database whose every result's rows are counted. */
export function meterD1(db: D1Database): D1Database {
  return new Proxy(db, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (prop === "prepare") return (q: string) => new MeteredStatement(target.prepare(q), q);
      if (prop === "batch") {
        return async (stmts: D1PreparedStatement[]) => {
          const rs = await trackIo(target.batch(stmts.map(rawStatement)));
          rs.forEach((r, i) => recordD1(r.meta, (stmts[i] as unknown as MeteredStatement).query ?? "?"));
          return rs;
        };
      }
      if (prop === "exec") {
        // exec() answers no row counts: each of its statements is counted with none.
        return async (q: string) => {
          const r = await trackIo(target.exec(q));
          if (quiet === 0) reg.d1_statements += r.count;
          return r;
        };
      }
      return bindTo(target, v);
    },
  });
}

// ---------------------------------------------------------------------------------------------
// Durable Object storage
