/**
 * Migration 0041 moves the recipients rows of messages indexed before migrations 0035 and 0039
 * into their message rows: every reader (recipients_all, the open recipients) sees the same
 * recipients before and after, the rows are gone, a message whose idx are not 0, 1, 2, … keeps
 * its rows, and the index writes that name no recipients row keep the moved messages current.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import migration from "../../migrations/0041_old_recipients_into_messages.sql?raw";
import { statements } from "./migration-sql";
import { newMessageId } from "../../worker/model/ids";
import { indexStatements } from "../../worker/db/messages";
import { view } from "./index-views";

/** A message row as the index wrote it before migration 0035, with recipients rows of `statuses` at `idx`. */
function oldMessage(id: string, statuses: string[], idx = statuses.map((_, i) => i)): D1PreparedStatement[] {
  return [
    env.DB.prepare(
      "INSERT INTO messages (id, tenant_id, created_at, from_addr, to_json, last_event, updated_at) VALUES (?, 't-0041', 1000, 's@sender.test', '[]', 'queued', 2000)",
    ).bind(id),
    ...statuses.map((status, i) =>
      env.DB.prepare(
        "INSERT INTO recipients (message_id, idx, tenant_id, address, status, transport, nexthop, attempts, next_attempt_at, updated_at) " +
          "VALUES (?, ?, 't-0041', ?, ?, 'smtp', 'mx.example', ?, ?, ?)",
      ).bind(
        id,
        idx[i],
        `r${idx[i]}@${id.slice(-6)}.example`,
        status,
        i,
        status === "deferred" ? 9_000 : null,
        2_000 + i,
      ),
    ),
  ];
}

const readers = (ids: string[]) =>
  Promise.all([
    env.DB.prepare(
      "SELECT message_id, idx, tenant_id, address, status, transport, nexthop, attempts, next_attempt_at, updated_at " +
        "FROM recipients_all WHERE message_id IN (SELECT value FROM json_each(?)) ORDER BY message_id, idx",
    )
      .bind(JSON.stringify(ids))
      .all()
      .then((r) => r.results),
    env.DB.prepare(
      "SELECT message_id, idx, status FROM recipients_open_all WHERE message_id IN (SELECT value FROM json_each(?)) ORDER BY message_id, idx",
    )
      .bind(JSON.stringify(ids))
      .all()
      .then((r) => r.results),
  ]);

describe("migration 0041", () => {
  it("moves old recipients rows into their message rows, leaving what every reader sees unchanged", async () => {
    const [one, many, done, odd] = [1, 2, 3, 4].map((n) => newMessageId(n));
    const current = view(newMessageId(5), "t-0041", 3, "ready", 2_000);
    await env.DB.batch([
      ...oldMessage(one!, ["deferred"]),
      ...oldMessage(many!, ["delivered", "ready", "deferred"]),
      ...oldMessage(done!, ["delivered", "bounced"]),
      ...oldMessage(odd!, ["ready", "ready"], [0, 2]),
      ...indexStatements(env.DB, [{ view: current, lastEvent: "queued" }]),
    ]);
    const ids = [one!, many!, done!, odd!, current.id];
    const before = await readers(ids);
    expect(before[0]).toHaveLength(1 + 3 + 2 + 2 + 3);

    await env.DB.batch(statements(migration).map((s) => env.DB.prepare(s)));

    expect(await readers(ids)).toEqual(before);
    const left = await env.DB.prepare(
      "SELECT message_id, idx FROM recipients WHERE message_id IN (SELECT value FROM json_each(?)) ORDER BY message_id, idx",
    )
      .bind(JSON.stringify(ids))
      .all();
    expect(left.results).toEqual([
      { message_id: odd, idx: 0 },
      { message_id: odd, idx: 2 },
    ]);
    const forms = await env.DB.prepare(
      "SELECT id, r_status, rcpts IS NOT NULL AS listed, rcpts_open FROM messages WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id",
    )
      .bind(JSON.stringify([one, many, done, odd]))
      .all();
    expect(forms.results).toEqual([
      { id: one, r_status: "deferred", listed: 0, rcpts_open: null },
      { id: many, r_status: null, listed: 1, rcpts_open: 1 },
      { id: done, r_status: null, listed: 1, rcpts_open: null },
      { id: odd, r_status: null, listed: 0, rcpts_open: null },
    ]);

    // Indexed again as today's writers do: the moved recipients follow.
    const viewOf = (id: string, n: number) => {
      const v = view(id, "t-0041", n, "delivered", 5_000);
      return { ...v, recipients: v.recipients.map((r) => ({ ...r, nexthop: "mx.example", updated_at: 5_000 })) };
    };
    await env.DB.batch(
      indexStatements(env.DB, [
        { view: viewOf(one!, 1), lastEvent: "delivered" },
        { view: viewOf(many!, 3), lastEvent: "delivered" },
      ]),
    );
    const after = await env.DB.prepare(
      "SELECT message_id, idx, status FROM recipients_all WHERE message_id IN (?, ?) ORDER BY message_id, idx",
    )
      .bind(one, many)
      .all();
    expect(after.results.map((r) => r.status)).toEqual(["delivered", "delivered", "delivered", "delivered"]);
    expect(
      await env.DB.prepare("SELECT rcpts_open FROM messages WHERE id = ?").bind(many).first("rcpts_open"),
    ).toBeNull();
  });
});
