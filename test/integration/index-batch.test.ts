/**
 * The D1 index and event log are written a statement per table for a whole batch of messages
 * (json_each over all of them), not a statement per message: the message rows, the recipient
 * rows, the tags, and the log rows of each tenant. Each row still only moves forward, an unchanged
 * one is not rewritten, and a log row is stored once, in the order given, its envelope dropped
 * when the same webhook-id is already stored for its email.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { newMessageId } from "../../worker/model/ids";
import { logInsertStatements, returnedEvents, type FeedRow, type LogRow } from "../../worker/db/events";
import { indexStatements } from "../../worker/db/messages";
import { view } from "./index-views";

const written = async (stmts: D1PreparedStatement[]) =>
  (await env.DB.batch(stmts)).reduce((n, r) => n + r.meta.rows_written, 0);

describe("index statements for a batch of messages", () => {
  it("writes 30 messages of two tenants in one statement per table, moves rows forward only, and rewrites nothing unchanged", async () => {
    const views = Array.from({ length: 30 }, (_, i) =>
      view(
        newMessageId(i % 4),
        i % 2 === 0 ? "t-even" : "t-odd",
        1 + (i % 3),
        "ready",
        2_000,
        i % 5 === 0
          ? {
              tags: [{ name: "campaign", value: `c${i}` }],
              message_id: `<own-${i}@sender.test>`,
              cc: [`cc${i}@x.example`],
            }
          : {},
      ),
    );
    const queued = indexStatements(
      env.DB,
      views.map((v) => ({ view: v, lastEvent: "queued" })),
    );
    // messages; tags (every message's recipients are in its row: migrations 0035, 0039, 0041)
    expect(queued).toHaveLength(2);
    expect(await written(queued)).toBeGreaterThan(0);

    const ids = views.map((v) => v.id);
    const rows = await env.DB.prepare(
      `SELECT id, tenant_id, to_json, cc_json, subject, last_event, updated_at, message_id FROM messages WHERE id IN (SELECT value FROM json_each(?))`,
    )
      .bind(JSON.stringify(ids))
      .all<{
        id: string;
        tenant_id: string;
        to_json: string;
        cc_json: string | null;
        subject: string;
        last_event: string;
        updated_at: number;
        message_id: string | null;
      }>();
    expect(rows.results).toHaveLength(30);
    for (const v of views) {
      const r = rows.results.find((x) => x.id === v.id)!;
      expect(r).toMatchObject({
        tenant_id: v.tenant,
        to_json: JSON.stringify(v.summary.to),
        cc_json: v.summary.cc ? JSON.stringify(v.summary.cc) : null,
        subject: v.summary.subject,
        last_event: "queued",
        updated_at: 2_000,
        message_id: v.summary.message_id ?? null,
      });
    }
    const rcpts = await env.DB.prepare(
      "SELECT count(*) AS n FROM recipients_all WHERE message_id IN (SELECT value FROM json_each(?)) AND status = 'ready'",
    )
      .bind(JSON.stringify(ids))
      .first<{ n: number }>();
    expect(rcpts!.n).toBe(views.reduce((n, v) => n + v.recipients.length, 0));
    const tags = await env.DB.prepare(
      "SELECT count(*) AS n FROM message_tags WHERE message_id IN (SELECT value FROM json_each(?))",
    )
      .bind(JSON.stringify(ids))
      .first<{ n: number }>();
    expect(tags!.n).toBe(6);

    // The same state again writes nothing; an older one applied late changes nothing.
    expect(
      await written(
        indexStatements(
          env.DB,
          views.map((v) => ({ view: v, lastEvent: "queued" })),
        ),
      ),
    ).toBe(0);
    const older = views.map((v) => ({
      view: view(v.id, v.tenant, v.recipients.length, "deferred", 1_500),
      lastEvent: "delivery_delayed",
    }));
    expect(await written(indexStatements(env.DB, older))).toBe(0);

    // Half of them delivered: only their rows move.
    const delivered = views
      .filter((_, i) => i % 2 === 0)
      .map((v) => ({ view: view(v.id, v.tenant, v.recipients.length, "delivered", 3_000), lastEvent: "delivered" }));
    expect(await written(indexStatements(env.DB, delivered))).toBeGreaterThan(0);
    const states = await env.DB.prepare(
      "SELECT last_event, count(*) AS n FROM messages WHERE id IN (SELECT value FROM json_each(?)) GROUP BY last_event ORDER BY last_event",
    )
      .bind(JSON.stringify(ids))
      .all<{ last_event: string; n: number }>();
    expect(states.results).toEqual([
      { last_event: "delivered", n: 15 },
      { last_event: "queued", n: 15 },
    ]);
  });

  it("keeps the later of two views of one message written in the same ms out of order: the one with more recipients final", async () => {
    const id = newMessageId(0);
    const final = view(id, "tenant-tie", 10, "delivered", 5_000);
    const earlier = view(id, "tenant-tie", 10, "delivered", 5_000);
    // Recipient 3 still in delivery (changed before): another recipient's outcome is this view's ms.
    earlier.recipients[3] = { ...earlier.recipients[3]!, status: "active", updated_at: 4_000 };
    earlier.state = "open";
    await written(indexStatements(env.DB, [{ view: final, lastEvent: "delivered" }]));
    expect(await written(indexStatements(env.DB, [{ view: earlier, lastEvent: "queued" }]))).toBe(0);
    const row = await env.DB.prepare("SELECT last_event FROM messages WHERE id = ?")
      .bind(id)
      .first<{ last_event: string }>();
    expect(row?.last_event).toBe("delivered");
  });

  it("logs the rows of several messages in one statement per tenant, in order, each envelope id once per email", async () => {
    const [a, b, c] = [newMessageId(0), newMessageId(1), newMessageId(2)];
    const row = (sourceSeq: number, id: string | null, at: number): LogRow => ({
      source_seq: sourceSeq,
      part: 0,
      type: "email.sent",
      recipient: "r@x.example",
      created_at: at,
      data: "{}",
      event_id: id,
      event_type: id === null ? null : "email.sent",
      body: id === null ? null : JSON.stringify({ s: sourceSeq }),
    });
    // a's envelope `evt_a` is stored already.
    await logInsertStatements(
      env.DB,
      [{ tenant: "log-1", emailId: a, rows: [row(1, `evt_${a}_x`, 5_000)] }],
      5_000,
    )[0]!.run();

    const stmts = logInsertStatements(
      env.DB,
      [
        { tenant: "log-1", emailId: a, rows: [row(2, `evt_${a}_x`, 5_001), row(3, `evt_${a}_y`, 5_001)] },
        { tenant: "log-2", emailId: b, rows: [row(1, `evt_${b}_x`, 5_001)] },
        { tenant: "log-1", emailId: c, rows: [row(1, `evt_${c}_x`, 5_001), row(2, null, 5_001)] },
      ],
      6_000,
    );
    // One per tenant: a row per email with no event stored (c; b), a row per event of the others (a).
    expect(stmts).toHaveLength(2);
    const returned = returnedEvents((await env.DB.batch(stmts)).flatMap((r) => r.results as FeedRow[]));
    // a's second `evt_a_x` keeps its transition without the envelope; every other row is stored with its own.
    expect(returned.map((r) => r.event_id)).toEqual([null, `evt_${a}_y`, `evt_${c}_x`, null, `evt_${b}_x`]);
    const log1 = returned.filter((r) => r.tenant_id === "log-1").map((r) => r.seq);
    expect(log1).toEqual([...log1].sort((x, y) => x - y));
    expect(new Set(log1).size).toBe(4);
    expect(Math.min(...log1)).toBeGreaterThan(5_000_000);
    // Every look-up goes through an index: the envelope ids of the statement's emails through
    // event_log_by_source, never a scan of the log.
    for (const stmt of stmts) {
      const { statement, params } = stmt as unknown as { statement: string; params: unknown[] };
      const plan = (
        await env.DB.prepare(`EXPLAIN QUERY PLAN ${statement}`)
          .bind(...params)
          .all<{ detail: string }>()
      ).results.map((x) => x.detail);
      expect(plan.join(" / ")).toContain("event_log_by_source");
      // `SCAN k`: the view's co-routine (what its arms found through indexes), not a table.
      expect(plan.join(" / ")).not.toMatch(/SCAN (e|h|m|event_runs|event_of_email)\b(?! USING)/);
    }
    // Again: nothing stored twice.
    expect(
      (
        await env.DB.batch(
          logInsertStatements(
            env.DB,
            [
              { tenant: "log-1", emailId: a, rows: [row(2, `evt_${a}_x`, 5_001), row(3, `evt_${a}_y`, 5_001)] },
              { tenant: "log-2", emailId: b, rows: [row(1, `evt_${b}_x`, 5_001)] },
            ],
            7_000,
          ),
        )
      ).reduce((n, r) => n + r.meta.rows_written, 0),
    ).toBe(0);
  });

  it("keeps a one-recipient message's recipient in its message row (no recipients row)", async () => {
    const one = view(newMessageId(1), "t-one", 1, "ready", 2_000);
    const two = view(newMessageId(1), "t-one", 2, "ready", 2_000);
    const rows = async (stmts: D1PreparedStatement[]) => (await env.DB.batch(stmts)).map((r) => r.meta.rows_written);
    // A message row and its entry in messages_by_tenant_time; the open recipient adds one in messages_r_open.
    expect((await rows(indexStatements(env.DB, [{ view: one, lastEvent: "queued" }])))[0]).toBe(3);
    // Two recipients, in the message row too (migration 0039): the row, its time entry and its
    // entry in messages_rcpts_open while one is open; no recipients row.
    expect(await rows(indexStatements(env.DB, [{ view: two, lastEvent: "queued" }]))).toEqual([3]);
    const recipients = (id: string) =>
      env.DB.prepare("SELECT count(*) AS n FROM recipients WHERE message_id = ?").bind(id).first<{ n: number }>();
    expect([(await recipients(one.id))!.n, (await recipients(two.id))!.n]).toEqual([0, 0]);
    const delivered = view(one.id, "t-one", 1, "delivered", 3_000);
    await rows(indexStatements(env.DB, [{ view: delivered, lastEvent: "delivered" }]));
    const all = (id: string) =>
      env.DB.prepare("SELECT idx, address, status, attempts FROM recipients_all WHERE message_id = ?").bind(id).all();
    expect((await all(one.id)).results).toEqual([
      { idx: 0, address: one.summary.to[0], status: "delivered", attempts: 1 },
    ]);
  });
});
