/** A migration file's statements, for a test that applies it to tables it set up (migration-*.test.ts). */
export const statements = (sql: string): string[] =>
  sql
    .replace(/--[^\n]*\n/g, "")
    .split(";")
    .map((s) => s.trim())
    .filter((s) => s !== "");
