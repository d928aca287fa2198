/**
 * Schema upgrades in place for Durable Object SQLite tables.
 *
 * DESCRIPTION
 *   addMissingColumns(sql, table, columns)  adds each column (name → its type and default) the
 *                                           table lacks, after one read of its columns.
 *
 * INVARIANTS
 *   A table is created with every column it has now, so a new object never runs an ALTER TABLE
 *   (each rewrites the schema: a cost per object, which the Destination DOs of a world of many
 *   domains pay once each); this only upgrades the tables of older objects.
 */

/** Adds the columns `table` lacks (name → type and default), reading its columns once. */
export function addMissingColumns(sql: SqlStorage, table: string, columns: Record<string, string>): void {
  const have = new Set(
    sql
      .exec<{ name: string }>(`PRAGMA table_info(${table})`)
      .toArray()
      .map((c) => c.name),
  );
  for (const [name, type] of Object.entries(columns))
    if (!have.has(name)) sql.exec(`ALTER TABLE ${table} ADD COLUMN ${name} ${type}`);
}
