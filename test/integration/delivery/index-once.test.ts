/**
 * One D1 index write per message on the happy path (consumers/classify.ts): a message whose
 * recipients go into an active queue is not indexed by the classify stage; the deliver consumer
 * writes it once, with email.queued (email.sent) and the outcome. When no report comes (here the
 * destination is suspended), the Outbox sweeper forwards the waiting events after
 * INDEX_LAG_SECONDS (2 s in this project), so the index and email.sent are never held back for
 * long.
 */
import { env, runInDurableObject } from "cloudflare:test";
import { outboxName, shardOf } from "../../../worker/model/ids";
import {
  CURSOR_SAVE_EVERY,
  finishedLagging,
  forwardCursor,
  ForwardWalk,
} from "../../../durable-objects/outbox/forward";
import { eventAcksOf } from "../../../worker/model/message";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { callWithKey, email, eventually, getEmail, newKey } from "../helpers";
import { recipientsWhen } from "./observe";

/** The Outbox's walk of finished messages, whose cursor this life is kept in memory (forward.ts ForwardWalk). */
type WalkProbe = { sweeper: { walk: ForwardWalk } };

const sink = inject("sink");
let key: string;

beforeAll(async () => {
  key = await newKey("acme");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('once', ?), ('lag', ?)").bind(
      `[127.0.0.1]:${sink.smtpPort}`,
      `[127.0.0.1]:${sink.smtpPort}`,
    ),
    env.DB.prepare(
      "INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'once.test', 'once'), (NULL, 'lag.test', 'lag')",
    ),
  ]);
});

async function send(to: string): Promise<string> {
  const res = await callWithKey(key, "POST", "/emails", email({ to: [to], subject: "index once" }));
  expect(res.status).toBe(200);
  return (await res.json<{ id: string }>()).id;
}

const logged = async (id: string) =>
  (
    await env.DB.prepare("SELECT type FROM event_log WHERE email_id = ? AND data IS NOT NULL ORDER BY seq")
      .bind(id)
      .all<{ type: string }>()
  ).results.map((r) => r.type);
const indexRow = (id: string) =>
  env.DB.prepare("SELECT last_event FROM messages WHERE id = ?").bind(id).first<{ last_event: string }>();

describe("the index of a message handed straight to delivery", () => {
  it("is written by the delivery stage, with email.queued and email.delivered together", async () => {
    const id = await send("a@once.test");
    await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered");
    const types = await eventually(
      async () => {
        const t = await logged(id);
        return t.length === 2 ? t : undefined;
      },
      5000,
      "both events in D1",
    );
    expect(types).toEqual(["email.queued", "email.delivered"]);
    expect((await indexRow(id))?.last_event).toBe("delivered");
    const rcpt = await env.DB.prepare("SELECT status, transport FROM recipients_all WHERE message_id = ?")
      .bind(id)
      .first();
    expect(rcpt).toEqual({ status: "delivered", transport: "once" });
  });

  it("is not written by the classify stage; when delivery waits, the sweeper forwards the events after the lag", async () => {
    const transport = env.TRANSPORT_QUEUE.getByName("lag");
    await transport.setPolicy("transport:lag", { suspendedUntil: Math.floor(Date.now() / 1000) + 3600 });
    try {
      const t0 = Date.now();
      const id = await send("b@lag.test");
      // Admitted into an active queue and not marked ready (its outcome would mark it in the write it
      // makes anyway: unmarked.ts), out of the index of waiting messages (the accept answered after
      // the admission: the Transport DO holds it), and nothing in D1 yet: the delivery stage was to write it.
      const outbox = env.OUTBOX.getByName(outboxName(shardOf(id)));
      const row = () =>
        runInDurableObject(outbox, (_o, state) => ({
          events: state.storage.sql
            .exec<{ n: number }>("SELECT count(*) AS n FROM event WHERE message_id = ?", id)
            .one().n,
          ...state.storage.sql
            .exec<{ waiting: number; unclassified: number; queued: string | null }>(
              "SELECT waiting, unclassified, queued_event AS queued FROM message WHERE id = ?",
              id,
            )
            .one(),
        }));
      expect(await row()).toEqual({ events: 0, waiting: 0, unclassified: 1, queued: null });
      expect(await indexRow(id)).toBeNull();
      expect(await logged(id)).toEqual([]);
      // At the index lag the sweeper marks it ready, keeps email.queued (dated at admission) in that
      // write (no event row), and forwards it.
      const indexed = await eventually(async () => (await indexRow(id)) ?? undefined, 10_000, "indexed by the sweeper");
      expect(Date.now() - t0).toBeGreaterThan(500); // not at once: after the lag
      expect(indexed.last_event).toBe("queued");
      expect(await logged(id)).toEqual(["email.queued"]);
      const queuedAt = (await env.DB.prepare("SELECT created_at FROM event_log WHERE email_id = ?")
        .bind(id)
        .first<{ created_at: number }>())!.created_at;
      expect(queuedAt).toBeLessThan(t0 + 1500); // at admission, not at the mark (the lag is 2 s)
      // Acknowledged: cleared, and out of the index, in one write.
      await eventually(async () => ((await row()).waiting === 0 ? true : undefined), 5000, "acknowledged");
      expect(await row()).toEqual({ events: 0, waiting: 0, unclassified: 0, queued: null });
      expect((await getEmail(key, id)).body.recipients[0]!.status).toBe("ready");
    } finally {
      await transport.setPolicy("transport:lag", null);
    }
  });

  const finishingOutcomeTitle =
    "a finishing outcome keeps its event in the recipient row; if the delivery stage never " +
    "indexes it, the sweeper forwards it after the lag, once";
  it(finishingOutcomeTitle, async () => {
    const transport = env.TRANSPORT_QUEUE.getByName("lag");
    await transport.setPolicy("transport:lag", { suspendedUntil: Math.floor(Date.now() / 1000) + 3600 });
    try {
      const id = await send("c@lag.test");
      await recipientsWhen(key, id, (r) => r.status === "ready", "admitted", 5000);
      await eventually(
        async () => ((await logged(id)).length === 1 ? true : undefined),
        10_000,
        "email.queued forwarded after the lag",
      );
      // ...and acknowledged: the Outbox hears of the D1 write after it lands, and until then keeps
      // email.queued to hand over again (with the outcome below, had it come first).
      const outbox = env.OUTBOX.getByName(outboxName(shardOf(id)));
      const acked = () =>
        runInDurableObject(
          outbox,
          (_o, state) =>
            state.storage.sql
              .exec<{ n: number }>(
                "SELECT count(*) AS n FROM message WHERE id = ? AND waiting = 0 AND queued_event IS NULL",
                id,
              )
              .one().n === 1,
        );
      await eventually(async () => ((await acked()) ? true : undefined), 5000, "email.queued acknowledged");
      // A delivery agent records the outcome (it indexes itself), then stops before its D1 write.
      const r = await outbox.recordOutcome(
        id,
        [{ idx: 0, status: "delivered", attempt: 1, response: { code: 250, text: "ok" } }],
        true,
      );
      expect(r).toMatchObject({ applied: 1, done: true });
      expect(r.sync!.events.map((e) => e.type)).toEqual(["email.delivered"]);
      const rows = await runInDurableObject(outbox, (_o, state) => ({
        events: state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM event WHERE message_id = ?", id).one()
          .n,
        kept: state.storage.sql
          .exec<{ e: string | null }>("SELECT pending_event AS e FROM rcpt_all WHERE message_id = ?", id)
          .one().e,
      }));
      expect(rows.events).toBe(0); // no event row written for the outcome, none left to delete
      expect(JSON.parse(rows.kept!)).toMatchObject({
        type: "email.delivered",
        data: { attempt: 1, response: { code: 250 } },
      });
      const t0 = Date.now();
      await eventually(
        async () => ((await indexRow(id))?.last_event === "delivered" ? true : undefined),
        10_000,
        "indexed by the sweeper",
      );
      expect(Date.now() - t0).toBeGreaterThan(500); // not at once: after the lag
      expect(await logged(id)).toEqual(["email.queued", "email.delivered"]);
      // The walk passed it; the events stay in the rows (nothing to delete) until the purge.
      await eventually(
        async () =>
          (await runInDurableObject(outbox, (o) => (o as unknown as WalkProbe).sweeper.walk.cursor)).id === id
            ? true
            : undefined,
        5000,
        "cursor passed",
      );
      expect((await outbox.beginClassify(id)).sync!.events.map((e) => [e.type, e.kept])).toEqual([
        ["email.delivered", true],
      ]);
      expect(await logged(id)).toEqual(["email.queued", "email.delivered"]);
    } finally {
      await transport.setPolicy("transport:lag", null);
    }
  });

  it("a finished message the delivery stage indexed needs no acknowledgement: the walk finds its events in D1 and passes it", async () => {
    const id = await send("d@once.test");
    await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered");
    await eventually(async () => ((await logged(id)).length === 2 ? true : undefined), 5000, "both events in D1");
    const outbox = env.OUTBOX.getByName(outboxName(shardOf(id)));
    const sync = (await outbox.beginClassify(id)).sync!;
    expect(eventAcksOf([sync])).toEqual([]); // all kept in rows: no ackEventsMany for it
    // The walk's cursor of this life (kept in meta only every CURSOR_SAVE_EVERY messages).
    const cursor = () => runInDurableObject(outbox, (o) => (o as unknown as WalkProbe).sweeper.walk.cursor);
    const doneAt = await runInDurableObject(
      outbox,
      (_o, state) => state.storage.sql.exec<{ t: number }>("SELECT done_at AS t FROM message WHERE id = ?", id).one().t,
    );
    await eventually(async () => ((await cursor()).at >= doneAt ? true : undefined), 5000, "walked past");
    expect(await logged(id)).toEqual(["email.queued", "email.delivered"]);
    // Walked again from before it: D1 holds its events, so it is not handed over; without its
    // email.delivered in D1, it is.
    const walk = () =>
      runInDurableObject(outbox, async (_o, state) => {
        state.storage.sql.exec(
          "UPDATE meta SET value = ? WHERE key = 'forward_cursor'",
          JSON.stringify({ at: doneAt - 1, id: "" }),
        );
        return finishedLagging(state.storage.sql, env.DB, Date.now(), 0);
      });
    expect((await walk()).ids).not.toContain(id);
    await env.DB.prepare(
      "DELETE FROM event_runs WHERE (tenant_id, seq) IN " +
        "(SELECT tenant_id, head_seq FROM event_of_email WHERE of_email = ? AND type = 'email.delivered')",
    )
      .bind(id)
      .run();
    expect((await walk()).ids).toContain(id);
    // Past its retention it is passed unasked: D1's purge takes such events first (the cron purges
    // D1, then wakes the sweepers), and a walk that starts again behind it must not bring them back.
    const expired = await runInDurableObject(outbox, async (_o, state) => {
      const from = { at: doneAt - 1, id: "" };
      return finishedLagging(state.storage.sql, env.DB, Date.now(), 0, from, Date.now() - doneAt);
    });
    expect(expired.ids).not.toContain(id);
    expect(expired.cursor.at).toBeGreaterThanOrEqual(doneAt);
  });

  it("keeps the walk's cursor in meta only every CURSOR_SAVE_EVERY messages passed, and a new life walks on from there", async () => {
    const outbox = env.OUTBOX.getByName("walk-cursor");
    const r = await runInDurableObject(outbox, async (_o, state) => {
      const sql = state.storage.sql;
      const stored = () => forwardCursor(sql);
      const start = stored();
      // Finished messages without kept events (nothing to look up in D1), done one ms apart.
      const done = (from: number, n: number) => {
        for (let i = from; i < from + n; i++)
          sql.exec(
            "INSERT INTO message (id, tenant, created_at, state, mail_from, size, summary, done_at) VALUES (?, 't', 0, 'done', 'a@b.test', 1, '{}', ?)",
            `w${String(i).padStart(4, "0")}`,
            start.at + 1 + i,
          );
      };
      const walk = new ForwardWalk(sql);
      done(0, 3);
      await walk.walk(env.DB, Date.now(), 0);
      const afterFew = { life: walk.cursor.id, stored: stored().id };
      done(3, CURSOR_SAVE_EVERY);
      await walk.walk(env.DB, Date.now(), 0);
      const afterMany = { life: walk.cursor.id, stored: stored().id };
      // A new life (the Outbox restarted) starts from what meta holds.
      return { afterFew, afterMany, next: new ForwardWalk(sql).cursor.id };
    });
    const last = `w${String(2 + CURSOR_SAVE_EVERY).padStart(4, "0")}`;
    expect(r.afterFew).toEqual({ life: "w0002", stored: "" });
    expect(r.afterMany).toEqual({ life: last, stored: last });
    expect(r.next).toBe(last);
  });
});
