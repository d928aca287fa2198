import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { schemaKey } from "../../../scripts/lib/migrated-state";

// The migrated-state template is reused only for the same schema: its key must change with
// every input that decides the migrated database, and with nothing else.
describe("migrated state's key", () => {
  const roots: string[] = [];
  afterEach(async () => {
    await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })));
  });

  async function root(files: Record<string, string>): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), "cohort-schema-key-"));
    roots.push(dir);
    for (const [name, text] of Object.entries(files)) {
      await mkdir(join(dir, name, ".."), { recursive: true });
      await writeFile(join(dir, name), text);
    }
    return dir;
  }

  const base = {
    "migrations/0001_init.sql": "CREATE TABLE a (x);",
    "migrations/0002_more.sql": "CREATE TABLE b (y);",
    "wrangler.toml": 'name = "cohort"\n',
    "node_modules/wrangler/package.json": '{"version":"4.86.0"}',
    "README.md": "anything",
  };

  it("is the same for the same inputs, whatever else the tree holds", async () => {
    const a = await schemaKey(await root(base));
    const b = await schemaKey(await root({ ...base, "README.md": "something else", "worker/x.ts": "1" }));
    expect(a).toBe(b);
  });

  it.each([
    ["a migration's text", { "migrations/0002_more.sql": "CREATE TABLE b (z);" }],
    ["a new migration", { "migrations/0003_new.sql": "" }],
    ["wrangler.toml", { "wrangler.toml": 'name = "other"\n' }],
    ["wrangler's version", { "node_modules/wrangler/package.json": '{"version":"4.87.0"}' }],
  ])("changes with %s", async (_what, change) => {
    const a = await schemaKey(await root(base));
    const b = await schemaKey(await root({ ...base, ...change }));
    expect(b).not.toBe(a);
  });

  it("changes when a migration is renamed with the same text", async () => {
    const { "migrations/0002_more.sql": text, ...rest } = base;
    const a = await schemaKey(await root(base));
    const b = await schemaKey(await root({ ...rest, "migrations/0003_more.sql": text }));
    expect(b).not.toBe(a);
  });
});
