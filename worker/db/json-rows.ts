/**
 * Rows given to a statement as one JSON array (read with json_each), as the D1 index and event
 * log write a whole batch: one statement per table, not one per row.
 *
 * DESCRIPTION
 *   chunkByJson(items, maxBytes)  the items in chunks whose JSON stays under maxBytes of UTF-8
 *                                 (D1 refuses a bound string above about 2 MB).
 *   jsonColumns(names, as?)       the select list reading `names` from a json_each row `j`.
 */
const utf8 = new TextEncoder();

/** Splits items into chunks whose JSON stays under `maxBytes` of UTF-8 (an oversize item gets its own). */
export function chunkByJson<T>(items: readonly T[], maxBytes: number): T[][] {
  const out: T[][] = [];
  let cur: T[] = [];
  let size = 2;
  for (const it of items) {
    const n = utf8.encode(JSON.stringify(it)).length + 1;
    if (cur.length > 0 && size + n > maxBytes) {
      out.push(cur);
      cur = [];
      size = 2;
    }
    cur.push(it);
    size += n;
  }
  if (cur.length > 0) out.push(cur);
  return out;
}

/** The select list reading `names` from a json_each row `j` (with `as`, each under its name). */
export function jsonColumns(names: readonly string[], as = false): string {
  return names.map((n) => `json_extract(j.value, '$.${n}')${as ? ` AS ${n}` : ""}`).join(", ");
}
