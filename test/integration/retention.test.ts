/** D1 retention from the cron: rows past MESSAGE_RETENTION_DAYS go, newer and unfinished rows stay; every statement uses an index. */
import { createExecutionContext, createScheduledController, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import worker from "../../worker";
import { PURGE_SQL, purgeExpired } from "../../worker/db/retention";

const DAY = 86_400_000;

async function seedMessage(
  id: string,
  tenant: string,
  at: number,
  lastEvent: string,
  opts: { rcpts?: number; events?: number } = {},
): Promise<void> {
  const rcpts = opts.rcpts ?? 1;
  const events = opts.events ?? 3;
  await env.DB.batch([
    env.DB.prepare(
      "INSERT INTO messages (id, tenant_id, created_at, scheduled_at, from_addr, to_json, " +
        "subject, last_event, updated_at) VALUES (?, ?, ?, NULL, 'a@x.test', '[]', 's', ?, ?)",
    ).bind(id, tenant, at, lastEvent, at + 1000),
    env.DB.prepare(
      `INSERT INTO recipients (message_id, idx, tenant_id, address, status, updated_at)
      SELECT ?1, j.key, ?2, 'r' || j.key || '@example.com', 'delivered', ?3 FROM json_each(?4) AS j`,
    ).bind(id, tenant, at + 1000, JSON.stringify(Array.from({ length: rcpts }, () => 0))),
    env.DB.prepare("INSERT INTO message_tags (message_id, tenant_id, name, value) VALUES (?, ?, 'campaign', 'x')").bind(
      id,
      tenant,
    ),
    env.DB.prepare(
      "INSERT INTO webhook_delay_notices (email_id, recipient, deferrals, last_notice_ms, last_source_seq) VALUES (?, 'r0@example.com', 1, NULL, 1)",
    ).bind(id),
    env.DB.prepare(
      `INSERT INTO event_runs (tenant_id, seq, email_id, source_seq, part, type, recipient, created_at, data)
      SELECT ?1, (SELECT COALESCE(MAX(seq), 0) FROM event_runs WHERE tenant_id = ?1) + ?3 * 1000 + j.key + 1, ` +
        `?2, j.key, 0, 'email.delivered', 'r@example.com', ?3, '{}' FROM json_each(?4) AS j`,
    ).bind(tenant, id, at, JSON.stringify(Array.from({ length: events }, () => 0))),
  ]);
}

async function count(table: string, where: string, ...args: unknown[]): Promise<number> {
  return (
    (
      await env.DB.prepare(`SELECT count(*) AS n FROM ${table} WHERE ${where}`)
        .bind(...args)
        .first<{ n: number }>()
    )?.n ?? 0
  );
}

async function rowsOf(id: string): Promise<number[]> {
  return [
    await count("messages", "id = ?", id),
    await count("recipients", "message_id = ?", id),
    await count("message_tags", "message_id = ?", id),
    await count("webhook_delay_notices", "email_id = ?", id),
    await count("event_log", "email_id = ?", id),
  ];
}

describe("D1 retention", () => {
  it("the cron deletes a finished message's rows and old dead letters after MESSAGE_RETENTION_DAYS, and keeps the rest", async () => {
    const now = Date.now();
    const days = Number(env.MESSAGE_RETENTION_DAYS);
    const old = now - (days + 1) * DAY;
    const fresh = now - (days - 1) * DAY;
    await seedMessage("01old-finished", "ret-a", old, "delivered");
    await seedMessage("01old-big", "ret-b", old - 5000, "bounced", { rcpts: 600, events: 1200 });
    await seedMessage("01old-open", "ret-a", old, "delivery_delayed");
    await seedMessage("01fresh", "ret-a", fresh, "delivered");
    await env.DB.batch([
      env.DB.prepare(
        "INSERT INTO webhook_dead_letters (endpoint_id, event_id, tenant_id, type, attempts, " +
          "reason, created_at) VALUES ('we_ret', 'evt_old', 'ret-a', 'email.delivered', 8, 'x', ?)",
      ).bind(old),
      env.DB.prepare(
        "INSERT INTO webhook_dead_letters (endpoint_id, event_id, tenant_id, type, attempts, " +
          "reason, created_at) VALUES ('we_ret', 'evt_new', 'ret-a', 'email.delivered', 8, 'x', ?)",
      ).bind(fresh),
    ]);

    const ctx = createExecutionContext();
    await worker.scheduled(createScheduledController({ scheduledTime: now, cron: "*/10 * * * *" }), env, ctx);
    await waitOnExecutionContext(ctx);

    expect(await rowsOf("01old-finished")).toEqual([0, 0, 0, 0, 0]);
    expect(await rowsOf("01old-big")).toEqual([0, 0, 0, 0, 0]);
    expect(await rowsOf("01old-open")).toEqual([1, 1, 1, 1, 3]);
    expect(await rowsOf("01fresh")).toEqual([1, 1, 1, 1, 3]);
    expect(await count("webhook_dead_letters", "endpoint_id = 'we_ret'")).toBe(1);
    expect(await count("webhook_dead_letters", "event_id = 'evt_new'")).toBe(1);
    // A second run finds nothing more.
    expect(await purgeExpired(env.DB, now, days)).toMatchObject({
      messages: 0,
      rows: 0,
      deadLetters: 0,
      truncated: false,
    });
  });

  it("stops at its statement budget and continues on the next run", async () => {
    const now = Date.now();
    const old = now - 40 * DAY;
    await seedMessage("01budget", "ret-c", old, "delivered", { rcpts: 10, events: 1100 });
    const first = await purgeExpired(env.DB, now, 30, 4);
    expect(first.truncated).toBe(true);
    expect((await rowsOf("01budget"))[0]).toBe(1);
    const rest = await purgeExpired(env.DB, now, 30);
    expect(rest.truncated).toBe(false);
    expect(await rowsOf("01budget")).toEqual([0, 0, 0, 0, 0]);
  });

  it("finds every row through an index (no table scan)", async () => {
    const plans: string[] = [];
    const explain = async (sql: string, ...args: unknown[]) => {
      const r = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
        .bind(...args)
        .all<{ detail: string }>();
      plans.push(...r.results.map((x) => `${x.detail}`));
    };
    await explain(PURGE_SQL.tenants, "");
    await explain(PURGE_SQL.due, "t", 0, 100);
    for (const sql of PURGE_SQL.children) await explain(sql, "[]", 500);
    await explain(PURGE_SQL.messages, "[]");
    await explain(PURGE_SQL.endpoints, "");
    await explain(PURGE_SQL.deadLetters, "e", 0, 500);
    await explain(PURGE_SQL.inboundReports, 0, 500);
    // `SCAN event_rows_of_email` reads the view's co-routine (the rows its arms found through indexes), not a table.
    const scans = plans.filter(
      (p) =>
        /^SCAN (?!json_each|j\b|CONSTANT|event_rows_of_email$)/.test(p) &&
        !/USING (COVERING )?INDEX|USING PRIMARY KEY/.test(p),
    );
    expect(plans.filter((p) => /^SEARCH (h|m|e) /.test(p)).length).toBeGreaterThan(0);
    expect(scans, plans.join("\n")).toEqual([]);
  });
});
