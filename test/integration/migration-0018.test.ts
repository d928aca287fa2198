/**
 * Migration 0018 rebuilds `domains` without 0008's `name UNIQUE`: the rows keep every column, a
 * domain verified before it gets its created_at as verified_at, and afterwards several tenants
 * may claim one name while only one may have verified it.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import migration from "../../migrations/0018_domain_claims.sql?raw";
import { statements } from "./migration-sql";

describe("migration 0018", () => {
  it("keeps the rows, backfills verified_at, and turns the one-name rule into one claim per tenant and one owner per name", async () => {
    await env.DB.batch([
      env.DB.prepare("DROP TABLE domains"),
      // The table as migrations/0008 made it.
      env.DB.prepare(
        `CREATE TABLE domains (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, name TEXT NOT NULL UNIQUE, status TEXT NOT NULL DEFAULT 'not_started',
        region TEXT NOT NULL DEFAULT 'us-east-1', return_path TEXT NOT NULL DEFAULT 'send', open_tracking INTEGER NOT NULL DEFAULT 0,
        click_tracking INTEGER NOT NULL DEFAULT 0, tls TEXT NOT NULL DEFAULT 'opportunistic', records TEXT NOT NULL, ` +
          `created_at INTEGER NOT NULL, verified_at INTEGER)`,
      ),
      env.DB.prepare("CREATE INDEX domains_by_tenant ON domains (tenant_id, created_at)"),
      env.DB
        .prepare(`INSERT INTO domains (id, tenant_id, name, status, return_path, open_tracking, records, created_at, verified_at) VALUES
        ('d1', 'ta', 'old.test', 'verified', 'bounce', 1, '[]', 1000, NULL), ('d2', 'ta', 'new.test', 'not_started', 'send', 0, '[{"r":1}]', 2000, NULL),
        ('d3', 'tb', 'kept.test', 'verified', 'send', 0, '[]', 3000, 3500)`),
      ...statements(migration).map((s) => env.DB.prepare(s)),
    ]);
    const rows = (
      await env.DB.prepare(
        "SELECT id, tenant_id, name, status, return_path, open_tracking, records, created_at, verified_at FROM domains ORDER BY id",
      ).all()
    ).results;
    expect(rows).toEqual([
      {
        id: "d1",
        tenant_id: "ta",
        name: "old.test",
        status: "verified",
        return_path: "bounce",
        open_tracking: 1,
        records: "[]",
        created_at: 1000,
        verified_at: 1000,
      },
      {
        id: "d2",
        tenant_id: "ta",
        name: "new.test",
        status: "not_started",
        return_path: "send",
        open_tracking: 0,
        records: '[{"r":1}]',
        created_at: 2000,
        verified_at: null,
      },
      {
        id: "d3",
        tenant_id: "tb",
        name: "kept.test",
        status: "verified",
        return_path: "send",
        open_tracking: 0,
        records: "[]",
        created_at: 3000,
        verified_at: 3500,
      },
    ]);
    const claim = (id: string, tenant: string, name: string, verifiedAt: number | null) =>
      env.DB.prepare(
        "INSERT INTO domains (id, tenant_id, name, records, created_at, verified_at) VALUES (?, ?, ?, '[]', 4000, ?)",
      )
        .bind(id, tenant, name, verifiedAt)
        .run();
    await claim("d4", "tb", "new.test", null);
    await expect(claim("d5", "ta", "new.test", null)).rejects.toThrow(
      /UNIQUE constraint failed: domains\.tenant_id, domains\.name/,
    );
    await expect(claim("d6", "tc", "old.test", 4000)).rejects.toThrow(/UNIQUE constraint failed: domains\.name/);
    expect(await env.DB.prepare("SELECT count(*) AS n FROM domains WHERE name = 'new.test'").first("n")).toBe(2);
  });
});
