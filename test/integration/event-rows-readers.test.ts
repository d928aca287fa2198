/**
 * Migration 0040: the readers of the event log over rows that hold a run each. The pull feed
 * pages through envelopes in seq order, whatever rows hold them, and reads no more rows than its
 * page and REST_MAX; a type filter and a replay's time range take exactly the events they name;
 * the counts by time (metrics, the complaint brake, the admin throughput) read from their seq
 * floor through the primary key, never the whole log, and count every event once.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { newMessageId } from "../../worker/model/ids";
import { logInsertStatements, releaseFeedClaims, REST_MAX, seqFloor, type LogRow } from "../../worker/db/events";
import { feedRange, listFeed, listFeedSql } from "../../worker/db/feed";
import { EVENTS_SQL } from "../../worker/metrics/email-metrics";
import { RATE_SQL } from "../../worker/policy/complaint-brake";
import { throughputSql } from "../../worker/db/admin";
import { eventId } from "../../worker/webhooks/core/event-id";

const TENANT = "readers";
const TYPES = ["email.sent", "email.delivered", "email.bounced"];

/** Event `i` of an email: a transition, with an envelope unless i % 7 == 3. */
function event(email: string, i: number, at: number): LogRow {
  const type = TYPES[i % 3]!;
  const id = i % 7 === 3 ? null : eventId({ emailId: email, recipient: `r${i}@x.example`, attempt: i, type });
  return {
    source_seq: i + 1,
    part: 0,
    type,
    recipient: `r${i}@x.example`,
    created_at: at,
    data: "{}",
    event_id: id,
    event_type: id === null ? null : type,
    body: id === null ? null : JSON.stringify({ i }),
  };
}

/** Publications of emails with 1, 2, 5 and 2·(1+REST_MAX)+3 events, several emails per statement, at times 1 s apart. */
async function fill(): Promise<void> {
  const sizes = [1, 2, 5, 2 * (REST_MAX + 1) + 3, 1, 3];
  for (let p = 0; p < 4; p++) {
    const at = 10_000_000 + p * 1000;
    const logs = sizes.map((n, k) => {
      const email = newMessageId(p * 10 + k);
      return { tenant: TENANT, emailId: email, rows: Array.from({ length: n }, (_, i) => event(email, i, at)) };
    });
    await env.DB.batch(logInsertStatements(env.DB, logs, at));
  }
}

/** Every envelope of the tenant in seq order, from the view of the log. */
async function truth(): Promise<{ seq: number; event_id: string; type: string; created_at: number }[]> {
  return (
    await env.DB.prepare(
      "SELECT seq, event_id, event_type AS type, created_at FROM event_log WHERE tenant_id = ? AND event_id IS NOT NULL ORDER BY seq",
    )
      .bind(TENANT)
      .all<{ seq: number; event_id: string; type: string; created_at: number }>()
  ).results;
}

/** A plan's lines; every table is searched through a key (json_each's rows and co-routines are no table). */
async function searched(sql: string, ...binds: unknown[]): Promise<string[]> {
  const plan = (
    await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
      .bind(...binds)
      .all<{ detail: string }>()
  ).results.map((x) => x.detail);
  const scans = plan.filter(
    (d) => /^SCAN /.test(d) && !/VIRTUAL TABLE|^SCAN (e|ev|h|t|event_log|CONSTANT ROW)$/.test(d),
  );
  expect(scans, plan.join("\n")).toEqual([]);
  expect(plan.filter((d) => /^SCAN (event_runs|messages)\b/.test(d))).toEqual([]);
  return plan;
}

describe("readers of the event log over rows of runs (migration 0040)", () => {
  it("pages the feed in seq order, with and without a type filter, and replays a time range", async () => {
    await fill();
    const all = await truth();
    expect(all.length).toBeGreaterThan(300);
    expect(new Set(all.map((r) => r.seq)).size).toBe(all.length);
    const rows = (await env.DB.prepare("SELECT count(*) AS n FROM event_runs WHERE tenant_id = ?")
      .bind(TENANT)
      .first<{ n: number }>())!.n;
    expect(rows).toBe(4 * (6 + 2));

    for (const types of [undefined, ["email.bounced"], ["email.sent", "email.delivered"]]) {
      const want = all.filter((r) => types === undefined || types.includes(r.type));
      for (const limit of [2, 50]) {
        const got: string[] = [];
        let after = 0;
        for (;;) {
          const page = await listFeed(env.DB, TENANT, { afterSeq: after, limit, types });
          got.push(...page.rows.map((r) => r.event_id));
          if (!page.hasMore) break;
          expect(page.rows).toHaveLength(limit);
          after = page.rows[page.rows.length - 1]!.seq;
        }
        expect(got).toEqual(want.map((r) => r.event_id));
      }
      // From inside a row's rest: the page starts at the next event.
      const mid = want[Math.floor(want.length / 2)]!;
      const page = await listFeed(env.DB, TENANT, { afterSeq: mid.seq, limit: 2, types });
      expect(page.rows.map((r) => r.seq)).toEqual(
        want
          .filter((r) => r.seq > mid.seq)
          .slice(0, 2)
          .map((r) => r.seq),
      );
    }

    const [lo, hi] = [all[10]!.seq, all[all.length - 10]!.seq];
    const replay = await feedRange(env.DB, TENANT, {
      afterSeq: lo,
      untilSeq: hi,
      fromMs: 10_001_000,
      toMs: 10_002_000,
      limit: 1000,
    });
    expect(replay.map((r) => r.event_id)).toEqual(
      all
        .filter((r) => r.seq > lo && r.seq <= hi && r.created_at >= 10_001_000 && r.created_at <= 10_002_000)
        .map((r) => r.event_id),
    );
  }, 30_000);

  it("reads the rows of a page and of its cursor's row, not more as the log grows after the cursor", async () => {
    await fill();
    const sql = listFeedSql(false);
    await searched(sql, TENANT, 0, 4, Number.MAX_SAFE_INTEGER);
    const cursors = [0, (await truth())[100]!.seq, (await truth())[101]!.seq];
    const read = async () => {
      const out: number[] = [];
      for (const after of cursors)
        out.push((await env.DB.prepare(sql).bind(TENANT, after, 4, Number.MAX_SAFE_INTEGER).run()).meta.rows_read);
      return out;
    };
    const before = await read();
    await fill();
    expect(await read()).toEqual(before);
    // Rows of at most 1 + REST_MAX events each (each event a row read in json_each) and their look-ups.
    for (const n of before) expect(n).toBeLessThan(3 * (4 + 1) * (1 + REST_MAX));
  });

  it("counts by time from the seq floor through the primary key, every event once", async () => {
    await fill();
    const all = (
      await env.DB.prepare("SELECT type, created_at, data FROM event_log WHERE tenant_id = ?")
        .bind(TENANT)
        .all<{ type: string; created_at: number; data: string | null }>()
    ).results;
    const from = 10_001_000;
    const floor = seqFloor(from);
    await searched(EVENTS_SQL, TENANT, floor, from, from + 10_000);
    await searched(RATE_SQL, TENANT, floor);
    const tplan = await searched(throughputSql(3), from, from + 10_000, floor, ...TYPES);
    expect(tplan.join(" / ")).toContain("USING PRIMARY KEY (tenant_id=? AND seq>?)");

    const counted = (
      await env.DB.prepare(throughputSql(3))
        .bind(from, from + 10_000, floor, ...TYPES)
        .all<{ minute: number; type: string; n: number }>()
    ).results;
    for (const type of TYPES)
      expect(counted.filter((c) => c.type === type).reduce((n, c) => n + c.n, 0)).toBe(
        all.filter((e) => e.type === type && e.created_at >= from).length,
      );
  });

  it("counts a row whose claim was given up as waiting, when only its rest holds an envelope", async () => {
    const email = newMessageId(60);
    const queued: LogRow = { ...event(email, 3, 20_000_000), type: "email.queued" };
    const sent = event(email, 4, 20_000_000);
    await env.DB.batch(
      logInsertStatements(env.DB, [{ tenant: "claims-2", emailId: email, rows: [queued, sent] }], 20_000_000),
    );
    const waiting = () =>
      env.DB.prepare(
        "SELECT count(*) AS n FROM event_runs WHERE enqueued_at IS NULL AND (event_id IS NOT NULL OR rest_envelopes = 1)",
      ).first<{ n: number }>();
    expect((await waiting())!.n).toBe(0);
    await releaseFeedClaims(env.DB, [sent.event_id!], 20_000_000);
    expect((await waiting())!.n).toBe(1);
    // Through the partial index, which holds only such rows.
    const plan = await env.DB.prepare(
      "EXPLAIN QUERY PLAN SELECT 1 FROM event_runs WHERE enqueued_at IS NULL AND (event_id IS NOT NULL OR rest_envelopes = 1) LIMIT 10",
    ).all<{ detail: string }>();
    expect(plan.results.map((x) => x.detail)).toEqual(["SCAN event_runs USING INDEX event_runs_unclaimed"]);
  });
});
