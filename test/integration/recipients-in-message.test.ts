/**
 * A message of two or more recipients keeps them in its own D1 row (migration 0039): no
 * recipients row is written or deleted for it, every reader sees them as before (recipients_all,
 * the queue's counts and ages, the search, the cancel filter), the open ones through a partial
 * index; a message whose recipients' idx are not 0, 1, 2, … keeps recipients rows (those of
 * messages indexed before moved into their rows: migration-0041.test.ts).
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { newMessageId } from "../../worker/model/ids";
import { indexStatements } from "../../worker/db/messages";
import { OPEN_SQL, openAges, searchMessages, stateCounts } from "../../worker/db/admin";
import { purgeExpired } from "../../worker/db/retention";
import type { MessageView, RcptStatus } from "../../worker/model/message";
import { view } from "./index-views";

const write = async (views: MessageView[], lastEvent = "delivered") =>
  (
    await env.DB.batch(
      indexStatements(
        env.DB,
        views.map((v) => ({ view: v, lastEvent })),
      ),
    )
  ).map((r) => r.meta.rows_written);
const count = async (sql: string, ...args: unknown[]) =>
  (await env.DB.prepare(sql)
    .bind(...args)
    .first<{ n: number }>())!.n;
const all = (id: string) =>
  env.DB.prepare("SELECT idx, address, status, attempts, nexthop FROM recipients_all WHERE message_id = ? ORDER BY idx")
    .bind(id)
    .all<{ idx: number; address: string; status: string; attempts: number; nexthop: string }>()
    .then((r) => r.results);
/** `v` with the recipients at `idx` in `status` (attempted once), changed at `at`. */
function withStatus(v: MessageView, status: RcptStatus, at: number, idx: number[]): MessageView {
  return {
    ...v,
    recipients: v.recipients.map((r) =>
      idx.includes(r.idx)
        ? { ...r, status, attempts: 1, updated_at: at }
        : { ...r, updated_at: Math.max(r.updated_at, 1) },
    ),
  };
}

describe("recipients in their message's row", () => {
  it("writes a ten-recipient email delivered at once as its message row alone, and deletes it as one", async () => {
    const v = view(newMessageId(3), "t-rim", 10, "delivered", 2_000);
    // The row and its time entry, one statement; no recipients row (the form before wrote 10 more,
    // and deleted 10).
    expect(await write([v])).toEqual([2]);
    expect(await count("SELECT count(*) AS n FROM recipients WHERE message_id = ?", v.id)).toBe(0);
    expect(await all(v.id)).toEqual(
      v.recipients.map((r) => ({ idx: r.idx, address: r.email, status: "delivered", attempts: 1, nexthop: r.nexthop })),
    );
    // The same view again changes nothing.
    expect(await write([v])).toEqual([0]);
    const report = await purgeExpired(env.DB, 10 * 86_400_000, 1);
    expect(report).toBeDefined();
    expect(await count("SELECT count(*) AS n FROM messages WHERE id = ?", v.id)).toBe(0);
    expect(await all(v.id)).toEqual([]);
  });

  it("counts the open ones in the queue through messages_rcpts_open, and forgets them once final", async () => {
    const base = view(newMessageId(4), "t-rim-q", 5, "ready", 2_000);
    expect(await write([base])).toEqual([3]); // the row, its time entry, its open entry
    const deferred = withStatus(base, "deferred", 3_000, [1, 3]);
    const partly = withStatus(deferred, "delivered", 3_000, [0, 2, 4]);
    // The row rewritten, and its open entry with it (SQLite rewrites the entries of an index whose
    // column an update sets, and the upsert sets rcpts_open); the form before rewrote the
    // changed recipients rows, their open entries and the message row.
    expect(await write([partly])).toEqual([2]);
    const mine = (await stateCounts(env.DB)).filter((r) => r.nexthop === base.recipients[0]!.nexthop);
    expect(mine).toEqual([{ status: "deferred", transport: "smtp", nexthop: base.recipients[0]!.nexthop, n: 2 }]);
    expect((await openAges(env.DB, 10_000, [50])).count).toBeGreaterThanOrEqual(2);
    const open = await env.DB.prepare("SELECT idx FROM recipients_open_all WHERE message_id = ? ORDER BY idx")
      .bind(base.id)
      .all<{ idx: number }>();
    expect(open.results.map((r) => r.idx)).toEqual([1, 3]);

    // An older view applied late changes nothing; the newer one closes the message.
    expect(await write([deferred])).toEqual([0]);
    const done = withStatus(partly, "delivered", 4_000, [1, 3]);
    expect(await write([done])).toEqual([1]); // as D1 counts the row leaving messages_rcpts_open
    expect(await count("SELECT count(*) AS n FROM recipients_open_all WHERE message_id = ?", base.id)).toBe(0);
    expect((await all(base.id)).map((r) => r.status)).toEqual(Array(5).fill("delivered"));
  });

  it("finds such a message by a recipient's address and state in the search", async () => {
    const v = withStatus(view(newMessageId(5), "t-rim-s", 3, "delivered", 2_000), "bounced", 2_500, [2]);
    await write([v]);
    const hit = await searchMessages(env.DB, {
      tenant: "t-rim-s",
      address: v.recipients[2]!.email.toUpperCase(),
      limit: 10,
    });
    expect(hit!.data.map((m) => m.id)).toEqual([v.id]);
    expect(hit!.data[0]!.recipients.map((r) => r.status)).toEqual(["delivered", "delivered", "bounced"]);
    const byState = await searchMessages(env.DB, { tenant: "t-rim-s", state: "bounced", limit: 10 });
    expect(byState!.data.map((m) => m.id)).toEqual([v.id]);
    const none = await searchMessages(env.DB, {
      tenant: "t-rim-s",
      address: v.recipients[0]!.email,
      state: "bounced",
      limit: 10,
    });
    expect(none!.data).toEqual([]);
  });

  it("keeps recipients rows for a message whose recipients' idx are not 0, 1, 2, …", async () => {
    const base = view(newMessageId(6), "t-rim-o", 3, "ready", 2_000);
    const odd = { ...base, recipients: base.recipients.filter((r) => r.idx !== 1) }; // idx 0 and 2
    expect(await write([odd], "queued")).toHaveLength(2); // the message row, then its recipients rows
    expect(await count("SELECT count(*) AS n FROM messages WHERE id = ? AND rcpts IS NULL", odd.id)).toBe(1);
    await write([withStatus(odd, "delivered", 3_000, [0, 2])]);
    expect(
      await count("SELECT count(*) AS n FROM recipients WHERE message_id = ? AND status = 'delivered'", odd.id),
    ).toBe(2);
    expect((await all(odd.id)).map((r) => [r.idx, r.status])).toEqual([
      [0, "delivered"],
      [2, "delivered"],
    ]);
  });

  it("reads the open recipients of every form through an index, never a scan of messages or recipients", async () => {
    const plans: [string, unknown[]][] = [
      [
        `SELECT status, transport, nexthop, count(*) AS n FROM recipients_open_all WHERE status IN (${OPEN_SQL}) GROUP BY status, transport, nexthop`,
        [],
      ],
      [
        `SELECT ?1 - m.created_at AS age FROM recipients_open_all r JOIN messages m ON m.id = r.message_id WHERE r.status IN (${OPEN_SQL}) ORDER BY m.created_at DESC LIMIT 1 OFFSET ?2`,
        [0, 0],
      ],
      ["SELECT idx FROM recipients_all WHERE message_id = ?", ["x"]],
    ];
    for (const [q, args] of plans) {
      const plan = (
        await env.DB.prepare(`EXPLAIN QUERY PLAN ${q}`)
          .bind(...args)
          .all<{ detail: string }>()
      ).results.map((r) => r.detail);
      expect(plan.join(" / ")).not.toMatch(/SCAN (recipients|messages|m)\b(?! USING)/);
    }
  });
});
