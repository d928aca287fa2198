/**
 * The Outbox's notice machinery (storage/outbox-dsn.ts) on a real Outbox and R2: a delay
 * warning becomes an RFC 3464 `delayed` notice stored as a new null-sender message of the same
 * tenant; bounced/expired outcomes plan a `failed` notice; a null-sender message plans none;
 * a pending notice keeps the original's body until it is sent.
 */
import { env, runInDurableObject } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { bodyKey, outboxName, shardOf } from "../../worker/model/ids";
import { planDelayNotice, planDsn, sendPendingDsns } from "../../durable-objects/outbox/dsn";
import { deleteDoneBodies } from "../../durable-objects/outbox/sweep";
import { callWithKey, classified, email, newKey } from "./helpers";

let key: string;
beforeAll(async () => {
  key = await newKey("acme");
});

async function accepted(body: Record<string, unknown>, path = "/emails"): Promise<string> {
  const res = await callWithKey(key, "POST", path, body);
  expect(res.status).toBe(200);
  const { id } = await res.json<{ id: string }>();
  return id;
}

const stub = (id: string) => env.OUTBOX.getByName(outboxName(shardOf(id)));

describe("delivery status notices in the Outbox", () => {
  it("a delay warning becomes a `delayed` multipart/report from MAILER-DAEMON, as a new message of the tenant", async () => {
    const id = await accepted(
      email({ from: "Owner <owner@acme.test>", to: ["slow@example.com"], subject: "Slow one" }),
    );
    await classified(key, id);
    const now = Date.now();
    const ids = await runInDurableObject(stub(id), async (_o, state) => {
      planDelayNotice(
        state.storage.sql,
        id,
        ["slow@example.com"],
        "connect to example.com: timed out",
        now + 5 * 86_400_000,
        now,
      );
      return sendPendingDsns(state.storage, env.BODIES, "relay.test", now);
    });
    expect(ids).toHaveLength(1);
    const noticeId = ids[0]!;
    expect(shardOf(noticeId)).toBe(shardOf(id));
    const text = await (await env.BODIES.get(bodyKey(noticeId)))!.text();
    expect(text).toMatch(/^From: .*<MAILER-DAEMON@relay\.test>/m);
    expect(text).toMatch(/^Subject: Delayed Mail \(still being retried\)/m);
    expect(text).toMatch(/Action: delayed/);
    expect(text).toMatch(/Status: 4\.4\.7/);
    expect(text).toMatch(/Will-Retry-Until: /);
    expect(text).toContain("Subject: Slow one");
    const view = await stub(noticeId).view(noticeId, "acme");
    expect(view).toMatchObject({ summary: { to: ["owner@acme.test"] }, recipients: [{ email: "owner@acme.test" }] });
    const envelope = await stub(noticeId).envelope(noticeId);
    expect(envelope?.mailFrom).toBe("");
  });

  it("a null-sender message never gets a notice, and a pending notice keeps the original's body", async () => {
    const raw = "From: MAILER-DAEMON@elsewhere.test\r\nTo: a@example.com\r\nSubject: a bounce\r\n\r\nbody\r\n";
    const bounce = await accepted({ mail_from: "", rcpt_to: ["a@example.com"], message: raw }, "/relay/messages/raw");
    const normal = await accepted(email({ from: "owner@acme.test", to: ["b@example.com"] }));
    const now = Date.now();
    const counts = await runInDurableObject(stub(bounce), async (_o, state) => {
      const sql = state.storage.sql;
      planDsn(
        sql,
        bounce,
        [{ idx: 0, status: "bounced", attempt: 1, response: { code: 550, enhanced: "5.1.1", text: "no such user" } }],
        now,
      );
      return sql.exec<{ n: number }>("SELECT count(*) AS n FROM dsn_pending WHERE message_id = ?", bounce).one().n;
    });
    expect(counts).toBe(0);
    const kept = await runInDurableObject(stub(normal), async (_o, state) => {
      const sql = state.storage.sql;
      planDsn(sql, normal, [{ idx: 0, status: "expired", attempt: 3 }], now);
      sql.exec("UPDATE message SET state = 'done', done_at = ? WHERE id = ?", now, normal);
      const deleted = await deleteDoneBodies(sql, env.BODIES, [normal], now);
      const pending = sql
        .exec<{ n: number }>("SELECT count(*) AS n FROM dsn_pending WHERE message_id = ?", normal)
        .one().n;
      sql.exec("DELETE FROM dsn_pending WHERE message_id = ?", normal); // leave the shard clean for the next test
      return { pending, deleted };
    });
    expect(kept.pending).toBe(1);
    expect(kept.deleted).not.toContain(normal);
    expect(await env.BODIES.head(bodyKey(normal))).not.toBeNull();
  });

  it("a notice that cannot be composed (a sender with a non-ASCII local part) is dropped, not kept to block the others", async () => {
    // The API refuses such senders; an older record (or another path) could still hold one.
    const bad = await accepted(email({ from: "john@acme.test", to: ["x@example.com"] }));
    const now = Date.now();
    const out = await runInDurableObject(stub(bad), async (_o, state) => {
      const sql = state.storage.sql;
      sql.exec("UPDATE message SET mail_from = 'jöhn@acme.test' WHERE id = ?", bad);
      planDsn(
        sql,
        bad,
        [{ idx: 0, status: "bounced", attempt: 1, response: { code: 550, enhanced: "5.1.1", text: "no such user" } }],
        now,
      );
      const planned = sql
        .exec<{ n: number }>("SELECT count(*) AS n FROM dsn_pending WHERE message_id = ?", bad)
        .one().n;
      const sent = await sendPendingDsns(state.storage, env.BODIES, "relay.test", now);
      return {
        planned,
        sent,
        left: sql.exec<{ n: number }>("SELECT count(*) AS n FROM dsn_pending WHERE message_id = ?", bad).one().n,
      };
    });
    expect(out).toEqual({ planned: 1, sent: [], left: 0 });
  });
});
