/**
 * The Outbox's `meta` table: small named values of the shard (its number, the sweeper's R2
 * cursor, the event forwarder's cursor). A module of its own so that the modules that keep values
 * there (outbox-sweep.ts, outbox-forward.ts) need not import each other.
 *
 * DESCRIPTION
 *   getMeta(sql, key)          the value, or null.
 *   setMeta(sql, key, value)   keeps it (null: forgets it); an update rewrites the row in place,
 *                              one row written.
 */

/** A value kept in the Outbox's meta table, or null. */
export function getMeta(sql: SqlStorage, key: string): string | null {
  return sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = ?", key).toArray()[0]?.value ?? null;
}

/** Keeps (null: forgets) a meta value; an update rewrites the row in place (one row written). */
export function setMeta(sql: SqlStorage, key: string, value: string | null): void {
  if (value === null) sql.exec("DELETE FROM meta WHERE key = ?", key);
  else sql.exec("INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = ?2", key, value);
}
