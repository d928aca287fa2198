/**
 * What one email costs in D1 rows written (design/cost.md): a one-recipient message driven
 * through accepted → queued → delivered as the consumers index it (the classify consumer, then
 * the deliver consumer's indexMessages), with one webhook endpoint subscribed to every event.
 * Every D1 result of those writes is summed (`meta.rows_written`; first() has no meta, so the
 * counting wrapper reads it through all()). The budget below fails a regression.
 */
import { createExecutionContext, createMessageBatch, env, getQueueResult, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { outboxName, shardOf } from "../../worker/model/ids";
import worker from "../../worker";
import { indexMessages } from "../../worker/indexing/writes";
import { prepareJobs, readEnvelopes } from "../../worker/delivery/session";
import { isWebhookBundle, jobsOfBundle } from "../../worker/webhooks/jobs";

/**
 * D1 rows written by one 1-recipient message's happy path: 42 at 3da0cee, 16 since migration 0007,
 * 13 since 0009 (a final recipient holds no state index entry), 11 since 0010 (no index of event ids),
 * 8 since 0035 (the one recipient in the message row: no recipients row and no address index entry).
 */
const ROWS_WRITTEN_BUDGET = 8;

/** A D1 binding that sums rows written/read of every statement run through it. */
export function countingDb(db: D1Database): {
  db: D1Database;
  totals: { written: number; read: number; statements: number; log: string[] };
} {
  const totals = { written: 0, read: 0, statements: 0, log: [] as string[] };
  const real = new WeakMap<object, D1PreparedStatement>();
  const add = (meta: { rows_written?: number; rows_read?: number } | undefined, sql = "") => {
    if (meta?.rows_written) totals.log.push(`${meta.rows_written}\t${sql.replace(/\s+/g, " ").slice(0, 90)}`);
    totals.written += meta?.rows_written ?? 0;
    totals.read += meta?.rows_read ?? 0;
    totals.statements++;
  };
  const sqlOf = new WeakMap<object, string>();
  const wrap = (stmt: D1PreparedStatement, sql: string): D1PreparedStatement => {
    const w = {
      bind: (...args: unknown[]) => wrap(stmt.bind(...args), sql),
      run: async () => {
        const r = await stmt.run();
        add(r.meta, sql);
        return r;
      },
      all: async () => {
        const r = await stmt.all();
        add(r.meta, sql);
        return r;
      },
      raw: (o?: { columnNames?: boolean }) => stmt.raw(o as { columnNames: true }),
      first: async (col?: string) => {
        const r = await stmt.all<Record<string, unknown>>();
        add(r.meta, sql);
        const row = r.results[0];
        return row === undefined ? null : col === undefined ? row : row[col];
      },
    } as unknown as D1PreparedStatement;
    real.set(w as object, stmt);
    sqlOf.set(w as object, sql);
    return w;
  };
  const wrapped = {
    prepare: (sql: string) => wrap(db.prepare(sql), sql),
    batch: async (stmts: D1PreparedStatement[]) => {
      const rs = await db.batch(stmts.map((s) => real.get(s as object) ?? s));
      rs.forEach((r, i) => add(r.meta, sqlOf.get(stmts[i] as object)));
      return rs;
    },
    exec: (sql: string) => db.exec(sql),
    withSession: () => {
      throw new Error("not counted");
    },
    dump: () => db.dump(),
  } as unknown as D1Database;
  return { db: wrapped, totals };
}

describe("D1 rows written per message", () => {
  it("a one-recipient email delivered at the first try, one webhook endpoint on every event", async () => {
    const tenant = "cost";
    await env.DB.prepare(
      "INSERT INTO webhook_endpoints (id, tenant_id, endpoint, events, status, secret_enc, " +
        "created_at, updated_at) VALUES ('we_cost', ?, 'https://hooks.example/cost', NULL, " +
        "'enabled', 'x', 0, 0)",
    )
      .bind(tenant)
      .run();
    const counted = countingDb(env.DB);
    const jobs: unknown[] = [];
    const webhooks = {
      send: async (b: unknown) => {
        jobs.push(b);
      },
      sendBatch: async (bs: unknown[]) => {
        jobs.push(...bs);
      },
    } as unknown as Queue;
    const cenv = { ...env, DB: counted.db, WEBHOOKS: webhooks, WEBHOOKS_SLOW: webhooks } as Env;

    const id = `01${crypto.randomUUID().slice(2)}`;
    const stub = env.OUTBOX.getByName(outboxName(shardOf(id)));
    await stub.accept({
      tenant,
      idempotency: null,
      response: { status: 200, body: "{}" },
      messages: [
        {
          id,
          createdAt: Date.now(),
          scheduledAt: null,
          mailFrom: "a@acme.test",
          rcptTo: ["r@example.com"],
          size: 10,
          summary: {
            from: "a@acme.test",
            to: ["r@example.com"],
            cc: null,
            bcc: null,
            reply_to: null,
            subject: "s",
            html: null,
            text: "t",
            tags: null,
            message_id: `<${id}@acme.test>`,
          },
        },
      ],
    });

    // The classify consumer: accepted + queued, the message and recipient rows.
    const batch = createMessageBatch("classify", [{ id: "c1", timestamp: new Date(), attempts: 1, body: { id } }]);
    const ctx = createExecutionContext();
    await worker.queue(batch, cenv, ctx);
    expect((await getQueueResult(batch, ctx)).explicitAcks).toEqual(["c1"]);
    const afterClassify = counted.totals.written;

    // The deliver consumer: the outcome, then the index write of its batch.
    const outcome = await stub.recordOutcome(
      id,
      [{ idx: 0, status: "delivered", attempt: 1, response: { code: 250, text: "ok" } }],
      true,
    );
    await indexMessages(cenv, [outcome.sync!]);

    const row = await env.DB.prepare("SELECT last_event FROM messages WHERE id = ?")
      .bind(id)
      .first<{ last_event: string }>();
    expect(row?.last_event).toBe("delivered");
    // Each publish is one bundle per endpoint (the events in it, in order).
    const types = jobs.flatMap((j) => {
      const body = (j as { body: unknown }).body;
      return isWebhookBundle(body) ? jobsOfBundle(body).map((x) => x.type) : [(body as { type: string }).type];
    });
    expect(types).toEqual(["email.sent", "email.delivered"]);
    console.log(
      `D1 per 1-recipient message: ${counted.totals.written} rows written ` +
        `(classify ${afterClassify}, ` +
        `delivery ${counted.totals.written - afterClassify}), ${counted.totals.read} rows ` +
        `read, ${counted.totals.statements} statements`,
    );
    console.log(counted.totals.log.join("\n"));
    expect(counted.totals.written).toBeLessThanOrEqual(ROWS_WRITTEN_BUDGET);
  });
  const ackPerShardTitle =
    "the delivery stage acknowledges a batch's events with one Outbox request per shard, " +
    "and every message's events are forgotten; finished messages need none";
  it(ackPerShardTitle, async () => {
    const tenant = "ack";
    const webhooks = { send: async () => undefined, sendBatch: async () => undefined } as unknown as Queue;
    const calls: string[] = [];
    const outbox = {
      getByName: (name: string) => {
        const stub = env.OUTBOX.getByName(name);
        return new Proxy(stub, {
          get: (t, k) => {
            if (typeof k === "string" && k.startsWith("ack")) calls.push(`${name} ${k}`);
            return Reflect.get(t, k);
          },
        });
      },
    } as unknown as Env["OUTBOX"];
    const cenv = { ...env, OUTBOX: outbox, WEBHOOKS: webhooks, WEBHOOKS_SLOW: webhooks } as Env;
    // Six messages in two shards (an id's first two hex digits name its shard).
    const ids = ["00", "00", "00", "01", "01", "01"].map((shard) => `${shard}${crypto.randomUUID().slice(2)}`);
    for (const id of ids) {
      await env.OUTBOX.getByName(outboxName(shardOf(id))).accept({
        tenant,
        idempotency: null,
        response: { status: 200, body: "{}" },
        messages: [
          {
            id,
            createdAt: Date.now(),
            scheduledAt: null,
            mailFrom: "a@acme.test",
            rcptTo: ["r@example.com"],
            size: 10,
            summary: {
              from: "a@acme.test",
              to: ["r@example.com"],
              cc: null,
              bcc: null,
              reply_to: null,
              subject: "s",
              html: null,
              text: "t",
              tags: null,
              message_id: `<${id}@acme.test>`,
            },
          },
        ],
      });
    }
    const batch = createMessageBatch(
      "classify",
      ids.map((id, i) => ({ id: `c${i}`, timestamp: new Date(), attempts: 1, body: { id } })),
    );
    const ctx = createExecutionContext();
    await worker.queue(batch, cenv, ctx);
    await getQueueResult(batch, ctx);
    calls.length = 0;
    const report = async (r: {
      status: "deferred" | "delivered";
      attempt: number;
      nextAttemptAt?: number;
      response: { code: number; text: string };
    }) => {
      const states = [];
      for (const id of ids)
        states.push(
          (await env.OUTBOX.getByName(outboxName(shardOf(id))).recordOutcome(id, [{ idx: 0, ...r }], true)).sync!,
        );
      calls.length = 0;
      await indexMessages(cenv, states);
      return calls.sort();
    };
    // A deferral is an event row: acknowledged, one request per shard, and forgotten.
    expect(
      await report({
        status: "deferred",
        attempt: 1,
        nextAttemptAt: Date.now() + 60_000,
        response: { code: 451, text: "later" },
      }),
    ).toEqual([`${outboxName(0)} ackEventsMany`, `${outboxName(1)} ackEventsMany`]);
    for (const id of ids) {
      const left = await runInDurableObject(
        env.OUTBOX.getByName(outboxName(shardOf(id))),
        (_o, state) =>
          state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM event WHERE message_id = ?", id).one().n,
      );
      expect(left).toBe(0);
    }
    // The outcome that finishes each message is kept in its recipient row: nothing to acknowledge.
    expect(await report({ status: "delivered", attempt: 2, response: { code: 250, text: "ok" } })).toEqual([]);
    const logged = await env.DB.prepare(
      "SELECT count(*) AS n FROM event_log WHERE email_id IN (SELECT value FROM json_each(?)) AND type = 'email.delivered' AND data IS NOT NULL",
    )
      .bind(JSON.stringify(ids))
      .first<{ n: number }>();
    expect(logged?.n).toBe(ids.length);
  });
  const envelopesPerShardTitle =
    "the delivery stage reads a batch's envelopes with one Outbox request per shard, each " +
    "job with its own message's; a session given them reads none";
  it(envelopesPerShardTitle, async () => {
    const calls: string[] = [];
    const outbox = {
      getByName: (name: string) => {
        const stub = env.OUTBOX.getByName(name);
        return new Proxy(stub, {
          get: (t, k) => {
            if (typeof k === "string" && k.startsWith("envelope")) calls.push(`${name} ${k}`);
            return Reflect.get(t, k);
          },
        });
      },
    } as unknown as Env["OUTBOX"];
    const ids = ["02", "02", "03"].map((shard) => `${shard}${crypto.randomUUID().slice(2)}`);
    for (const id of ids) {
      await env.OUTBOX.getByName(outboxName(shardOf(id))).accept({
        tenant: "env",
        idempotency: null,
        response: { status: 200, body: "{}" },
        messages: [
          {
            id,
            createdAt: Date.now(),
            scheduledAt: null,
            mailFrom: `from-${id}@acme.test`,
            rcptTo: ["r@example.com"],
            size: 10,
            summary: {
              from: "a@acme.test",
              to: ["r@example.com"],
              cc: null,
              bcc: null,
              reply_to: null,
              subject: "s",
              html: null,
              text: "t",
              tags: null,
              message_id: `<${id}@acme.test>`,
            },
          },
        ],
      });
    }
    // The first message twice (two entries of it), and one message no shard knows.
    const unknown = `02${crypto.randomUUID().slice(2)}`;
    const job = (messageId: string, entryId: number) => ({
      entryId,
      messageId,
      attempt: 1,
      transport: "smtp",
      nexthop: "[127.0.0.1]:25",
      rcpts: [{ idx: 0, address: "r@example.com" }],
      leaseUntil: 0,
    });
    const prepared = await prepareJobs({ ...env, OUTBOX: outbox } as Env, [
      job(ids[0]!, 1),
      job(ids[1]!, 2),
      job(ids[2]!, 3),
      job(ids[0]!, 4),
      job(unknown, 5),
    ]);
    expect(calls.sort()).toEqual([`${outboxName(2)} envelopes`, `${outboxName(3)} envelopes`]);
    expect(prepared.map((p) => p.envelope?.mailFrom ?? null)).toEqual([
      `from-${ids[0]}@acme.test`,
      `from-${ids[1]}@acme.test`,
      `from-${ids[2]}@acme.test`,
      `from-${ids[0]}@acme.test`,
      null,
    ]);
    // The batch reads them once (handleDeliverBatch); each session then matches without a request.
    calls.length = 0;
    const known = await readEnvelopes({ ...env, OUTBOX: outbox } as Env, ids);
    const again = await prepareJobs({ ...env, OUTBOX: outbox } as Env, [job(ids[2]!, 3)], known);
    expect(again[0]!.envelope?.mailFrom).toBe(`from-${ids[2]}@acme.test`);
    expect(calls.sort()).toEqual([`${outboxName(2)} envelopes`, `${outboxName(3)} envelopes`]);
  });
});
