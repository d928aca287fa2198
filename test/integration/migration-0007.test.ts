/**
 * Migration 0007 moves the old two logs into event_log: the feed keeps its order and ids,
 * transitions keep their data, every seq is at least created_at * 1000.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import migration from "../../migrations/0007_one_event_log.sql?raw";
import { seqFloor } from "../../worker/db/events";
import { feedSeqOf, listFeed } from "../../worker/db/feed";

describe("migration 0007", () => {
  it("moves events and event_feed into event_log", async () => {
    const moves = migration
      .replace(/--[^\n]*\n/g, "")
      .split(";")
      .map((s) => s.trim())
      .filter((s) => /^INSERT INTO event_log/.test(s));
    expect(moves).toHaveLength(2);
    await env.DB.batch([
      env.DB.prepare(
        "CREATE TABLE events (tenant_id TEXT NOT NULL, seq INTEGER NOT NULL, source_key TEXT " +
          "NOT NULL UNIQUE, type TEXT NOT NULL, email_id TEXT NOT NULL, recipient TEXT, created_at " +
          "INTEGER NOT NULL, data TEXT NOT NULL DEFAULT '{}', PRIMARY KEY (tenant_id, seq))",
      ),
      env.DB.prepare(
        "CREATE TABLE event_feed (tenant_id TEXT NOT NULL, seq INTEGER NOT NULL, event_id TEXT " +
          "NOT NULL UNIQUE, type TEXT NOT NULL, email_id TEXT NOT NULL, recipient TEXT, created_at " +
          "INTEGER NOT NULL, body TEXT NOT NULL, enqueued_at INTEGER, PRIMARY KEY (tenant_id, seq))",
      ),
      // The feed's insertion order is not its time order (a late publication).
      env.DB.prepare(
        "INSERT INTO event_feed VALUES ('mig', 1, 'evt_a', 'email.sent', 'm1', 'r@x', 5000, " +
          "'{\"type\":\"email.sent\"}', 1), ('mig', 2, 'evt_b', 'email.delivered', 'm1', 'r@x', " +
          "9000, '{\"type\":\"email.delivered\"}', 1), ('mig', 3, 'evt_c', 'email.sent', 'm2', " +
          "'r@x', 7000, '{\"type\":\"email.sent\"}', 1)",
      ),
      env.DB.prepare(
        "INSERT INTO events VALUES ('mig', 1, 'm1:1', 'email.accepted', 'm1', NULL, 4000, " +
          "'{}'), ('mig', 2, 'm1:2', 'email.queued', 'm1', 'r@x', 5000, '{}'), ('mig', 3, 'm1:12', " +
          "'email.delivered', 'm1', 'r@x', 9000, '{\"a\":1}')",
      ),
      // The table is event_runs since migration 0040 (event_log is a view of it).
      ...moves.map((sql) => env.DB.prepare(sql.replace(/^INSERT INTO event_log/, "INSERT INTO event_runs"))),
      env.DB.prepare("DROP TABLE events"),
      env.DB.prepare("DROP TABLE event_feed"),
    ]);
    const feed = await listFeed(env.DB, "mig", { afterSeq: 0, limit: 10 });
    expect(feed.rows.map((r) => r.event_id)).toEqual(["evt_a", "evt_b", "evt_c"]);
    const after = await listFeed(env.DB, "mig", {
      afterSeq: (await feedSeqOf(env.DB, "mig", "evt_a"))!,
      limit: 10,
      types: ["email.sent"],
    });
    expect(after.rows.map((r) => r.event_id)).toEqual(["evt_c"]);
    const rows = (
      await env.DB.prepare(
        "SELECT seq, source_seq, type, created_at, data FROM event_log WHERE tenant_id = 'mig' ORDER BY seq",
      ).all<{ seq: number; source_seq: number; type: string; created_at: number; data: string | null }>()
    ).results;
    expect(rows.filter((r) => r.data !== null).map((r) => [r.type, r.source_seq])).toEqual([
      ["email.accepted", 1],
      ["email.queued", 2],
      ["email.delivered", 12],
    ]);
    for (const r of rows) expect(r.seq).toBeGreaterThanOrEqual(seqFloor(r.created_at));
    expect(new Set(rows.map((r) => r.seq)).size).toBe(6);
  });
});
