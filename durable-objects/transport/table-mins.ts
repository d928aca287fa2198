/**
 * What a Transport DO knows of two small tables without reading them again: the earliest time in
 * `finished` (sqlite-source.ts) and in `retry_due` (delivery-state.ts), and whether `finished`
 * gained rows since the last forgetFinished. Every call of the object arms its alarm from both
 * minimums, and every checkpoint asked `finished` for what to drop: statements that mostly
 * found nothing, each on the object's one thread.
 *
 * DESCRIPTION
 *   knownOf(sql)        the knowledge of one object's SQLite (one per SqlStorage; none at a start).
 *   min(table, read, now)  the table's minimum: the known one while it is null or later than
 *                       `now`, else `read()`'s, which is then known.
 *   inserted(table, at) a row with time `at` was inserted: a known minimum is lowered to it.
 *   replaced(table, at) a row with time `at` was inserted or replaced one of the same key: a
 *                       known minimum is lowered to it, or unknown when `at` is later.
 *   changed(table)      rows were deleted or updated: the minimum is unknown until read again.
 *   finishedSince       `finished` may have rows written since the last forgetFinished (true at a
 *                       start: nothing is known then; an insert sets it).
 *
 * INVARIANTS
 *   A known minimum is never later than the table's: it is set only by a read, lowered by an
 *   insert, and forgotten at every delete or update that wrote a row and every replace that may
 *   have moved it later. Only a write that a failed transaction undoes leaves it earlier than the
 *   table's; a known minimum that has passed is read again, so such a one costs one early alarm.
 */

type Table = "finished" | "retry_due";

export class KnownMins {
  private readonly mins = new Map<Table, number | null>();
  finishedSince = true;

  min(table: Table, read: () => number | null, now: number): number | null {
    const known = this.mins.get(table);
    if (known === null || (known !== undefined && known > now)) return known;
    const at = read();
    this.mins.set(table, at);
    return at;
  }

  inserted(table: Table, at: number): void {
    if (table === "finished") this.finishedSince = true;
    const known = this.mins.get(table);
    if (known !== undefined) this.mins.set(table, known === null ? at : Math.min(known, at));
  }

  replaced(table: Table, at: number): void {
    const known = this.mins.get(table);
    if (known === undefined || known === null || at <= known) this.inserted(table, at);
    else this.changed(table);
  }

  changed(table: Table): void {
    this.mins.delete(table);
  }
}

const BY_SQL = new WeakMap<SqlStorage, KnownMins>();

/** The knowledge kept for the object whose SQLite this is. */
export function knownOf(sql: SqlStorage): KnownMins {
  let k = BY_SQL.get(sql);
  if (!k) BY_SQL.set(sql, (k = new KnownMins()));
  return k;
}
