/**
 * The meter's Durable Object storage wrapper: SQL rows read and written from the cursor as it is
 * consumed, setAlarm as a row written, and the bytes each object's database holds after a write
 * (meterClass in objects.ts applies it to every object; meterCtx wraps a state for tests).
 */
import { bindTo } from "./meter";
import { DoClass, add, levels, meterQuietly, reg } from "./registry";
import { statementKey } from "./d1";

/** The part of a SqlStorageCursor the meter reads. */
interface CursorLike {
  readonly rowsRead: number;
  readonly rowsWritten: number;
  next(): IteratorResult<unknown>;
  toArray(): unknown[];
  one(): unknown;
  raw(): IterableIterator<unknown[]>;
  readonly columnNames: string[];
}

/** A cursor that adds its rowsRead/rowsWritten growth to `cls` each time it is consumed. */
export class MeteredCursor {
  private seenRead = 0;
  private seenWritten = 0;

  constructor(
    private readonly cursor: CursorLike,
    private readonly cls: DoClass,
    private readonly query = "?",
    private readonly onWrite: () => void = () => undefined,
  ) {
    add(reg.runs_by_statement, statementKey(cls, query), 1);
    this.sync();
  }

  private sync(): void {
    const r = this.cursor.rowsRead;
    const w = this.cursor.rowsWritten;
    add(reg.do_rows_read, this.cls, r - this.seenRead);
    add(reg.do_rows_written, this.cls, w - this.seenWritten);
    if (w > this.seenWritten) {
      add(reg.rows_written_by_statement, statementKey(this.cls, this.query), w - this.seenWritten);
      this.onWrite();
    }
    if (r > this.seenRead) add(reg.rows_read_by_statement, statementKey(this.cls, this.query), r - this.seenRead);
    this.seenRead = r;
    this.seenWritten = w;
  }

  next(): IteratorResult<unknown> {
    try {
      return this.cursor.next();
    } finally {
      this.sync();
    }
  }

  toArray(): unknown[] {
    try {
      return this.cursor.toArray();
    } finally {
      this.sync();
    }
  }

  one(): unknown {
    try {
      return this.cursor.one();
    } finally {
      this.sync();
    }
  }

  raw(): IterableIterator<unknown[]> {
    const it = this.cursor.raw();
    const self = this;
    return {
      next() {
        try {
          return it.next();
        } finally {
          self.sync();
        }
      },
      [Symbol.iterator]() {
        return this;
      },
    } as IterableIterator<unknown[]>;
  }

  [Symbol.iterator](): this {
    return this;
  }

  get columnNames(): string[] {
    return this.cursor.columnNames;
  }

  get rowsRead(): number {
    return this.cursor.rowsRead;
  }

  get rowsWritten(): number {
    return this.cursor.rowsWritten;
  }
}

/**
 * A SqlStorage whose exec() cursors are metered for `cls`; with `key` ("<class>/<name>"), the
 * database's size after each write is kept as the bytes that object holds (levels.do_bytes).
 */
export function meterSql(sql: SqlStorage, cls: DoClass, key?: string): SqlStorage {
  const onWrite =
    key === undefined
      ? undefined
      : () => {
          levels.do_bytes.set(key, sql.databaseSize);
        };
  return new Proxy(sql, {
    get(target, prop) {
      if (prop === "exec") {
        return (q: string, ...b: unknown[]) => {
          // The local runtime's own bookkeeping (miniflare records each object's name): not billed.
          if (q.includes("__miniflare")) return target.exec(q, ...b);
          add(reg.do_sql_statements, cls, 1);
          return new MeteredCursor(target.exec(q, ...b) as unknown as CursorLike, cls, q, onWrite);
        };
      }
      return bindTo(target, Reflect.get(target, prop, target));
    },
  });
}

/**
 * What each Durable Object storage method the relay uses costs, as the meter counts it: SQL by the
 * rows each statement reports; an alarm set or deleted is a row written (cost.md); reading the
 * alarm and wrapping statements in a transaction are not billed of themselves. A method not
 * listed is not counted: test/integration/delivery/meter-coverage.test.ts fails when the relay
 * uses one.
 */
export const STORAGE_METHODS = {
  sql: "rows",
  setAlarm: "row written",
  deleteAlarm: "row written",
  getAlarm: "free",
  transactionSync: "free",
} as const;

/** A DurableObjectStorage whose SQL is metered (meterSql) and whose alarm writes count as rows written (STORAGE_METHODS). */
export function meterStorage(storage: DurableObjectStorage, cls: DoClass, key?: string): DurableObjectStorage {
  const sql = meterSql(storage.sql, cls, key);
  return new Proxy(storage, {
    get(target, prop) {
      if (prop === "sql") return sql;
      const v = Reflect.get(target, prop, target);
      if (typeof prop === "string" && STORAGE_METHODS[prop as keyof typeof STORAGE_METHODS] === "row written") {
        return (...a: unknown[]) => {
          if (prop === "setAlarm") add(reg.do_set_alarms, cls, 1);
          add(reg.do_rows_written, cls, 1);
          return Reflect.apply(v as (...x: unknown[]) => unknown, target, a);
        };
      }
      return bindTo(target, v);
    },
  });
}

/** A DurableObjectState whose storage is metered for `cls` (see header). */
export function meterCtx(ctx: DurableObjectState, cls: DoClass): DurableObjectState {
  const storage = meterStorage(ctx.storage, cls);
  return new Proxy(ctx, {
    get(target, prop) {
      if (prop === "storage") return storage;
      return bindTo(target, Reflect.get(target, prop, target));
    },
  });
}

/** Rows held now in every table of a DO's SQLite (not sqlite_, _cf_ or miniflare's own), read without counting. */
export function sqlRowCounts(sql: SqlStorage): Record<string, number> {
  return meterQuietly(() => {
    const tables = sql
      .exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'")
      .toArray()
      .filter(({ name }) => !name.startsWith("sqlite_") && !name.startsWith("_cf_") && !name.startsWith("__miniflare"));
    const out: Record<string, number> = {};
    for (const { name } of tables)
      out[name] = sql.exec<{ n: number }>(`SELECT count(*) AS n FROM "${name.replace(/"/g, '""')}"`).one().n;
    return out;
  });
}
