/**
 * Delay warnings (delay_warning_time) on their way from a Transport DO to the Outboxes
 * (storage/outbox-notes.ts) and on to the senders: every message's warning of one command goes to
 * its Outbox shard with the shard's others, in one delayNotices() request, and each becomes a
 * `delayed` notice (DSN_NOTICES is on in this project) that reaches its sender through the sink.
 *
 * The messages wait in a suspended transport, so their recipients are in the Transport DO's
 * backlog as they are when the core warns; the core's decision to warn (retry-policy.ts) has unit
 * tests of its own, so the effects are written here, one per message.
 */
import { admissionsOf } from "../../../durable-objects/transport/admissions";
import { env, runInDurableObject } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import type { Effect } from "../../../durable-objects/core";
import { shardOf } from "../../../worker/model/ids";
import { OutboxNotes } from "../../../durable-objects/transport/outbox-notes";
import { callWithKey, email, eventually, newKey, settle } from "../helpers";
import { caught, recipientsWhen } from "./observe";

const sink = inject("sink");
let key: string;
/** The senders' mailbox, unique to this run: both delivery projects' runs may share one sink. */
const owner = `owner-${crypto.randomUUID().slice(0, 8)}@warn-sender.test`;
const N = 24;

beforeAll(async () => {
  key = await newKey("acme");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('warnq', ?), ('warnsink', ?)").bind(
      `[127.0.0.1]:${sink.smtpPort}`,
      `[127.0.0.1]:${sink.smtpPort}`,
    ),
    env.DB.prepare(
      "INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'warn-rcpt.test', 'warnq'), (NULL, 'warn-sender.test', 'warnsink')",
    ),
  ]);
});

const suspend = (on: boolean) =>
  env.TRANSPORT_QUEUE.getByName("warnq").setPolicy(
    "transport:warnq",
    on ? { suspendedUntil: Math.floor(Date.now() / 1000) + 3600 } : null,
  );

describe("delay warnings", () => {
  it("go to each Outbox shard in one request, and every sender gets its `delayed` notice", async () => {
    await suspend(true);
    // An Idempotency-Key picks the shard by its hash (an isolate otherwise keeps to one shard).
    const ids = await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const body = email({ from: `Owner <${owner}>`, to: [`w-${i}@warn-rcpt.test`], subject: `slow ${i}` });
        const res = await callWithKey(key, "POST", "/emails", body, { "Idempotency-Key": `${owner}-${i}` });
        expect(res.status).toBe(200);
        return (await res.json<{ id: string }>()).id;
      }),
    );
    for (const id of ids)
      await recipientsWhen(key, id, (r) => r.status === "ready", "waiting in the suspended transport");

    // The Outbox requests, by shard (a stand-in for env.OUTBOX that passes every call on).
    const calls: { name: string; ids: string[] }[] = [];
    const counting = {
      ...env,
      OUTBOX: {
        getByName: (name: string) => {
          const stub = env.OUTBOX.getByName(name);
          return {
            delayNotices: (items: { id: string }[], reason: string) => {
              calls.push({ name, ids: items.map((x) => x.id) });
              return stub.delayNotices(items as Parameters<typeof stub.delayNotices>[0], reason);
            },
          };
        },
      },
    } as unknown as Env;
    await runInDurableObject(env.TRANSPORT_QUEUE.getByName("warnq"), async (_obj, state) => {
      const sql = state.storage.sql;
      // Each message's attempt as the core names it (`<id>` or `<id>#<n>`): its record is kept with a
      // tiny core's snapshot (admissions.ts), else in an admission row.
      const effects: Effect[] = ids.map((id) => ({
        kind: "message-deferred",
        messageId:
          admissionsOf(sql).byMessage(id)?.coreId ??
          sql
            .exec<{ core_id: string }>("SELECT core_id FROM admission WHERE core_id >= ?1 AND core_id < ?1 || '$'", id)
            .one().core_id,
        nextAttemptAt: Math.floor(Date.now() / 1000) + 60,
        warn: true,
        warnTime: -1,
      }));
      const notes = new OutboxNotes();
      notes.collect(sql, effects, 5 * 86_400);
      await notes.deliver(counting);
    });

    const shards = new Set(ids.map(shardOf));
    expect(shards.size).toBeGreaterThan(1);
    expect(calls).toHaveLength(shards.size);
    for (const c of calls) expect(new Set(c.ids.map(shardOf)).size).toBe(1);
    expect(calls.flatMap((c) => c.ids).sort()).toEqual([...ids].sort());

    const notices = await eventually(
      async () => {
        const got = (await caught(sink.httpPort)).filter((m) => m.rcptTo.includes(owner));
        return got.length >= N ? got : undefined;
      },
      20_000,
      `${N} delayed notices at the sink`,
    );
    expect(notices).toHaveLength(N);
    const texts = notices.map((m) => atob(m.body));
    for (const m of notices) expect(m.mailFrom).toBe("");
    for (const t of texts) expect(t).toMatch(/Action: delayed/);
    for (let i = 0; i < N; i++) expect(texts.filter((t) => t.includes(`w-${i}@warn-rcpt.test`))).toHaveLength(1);

    // The originals were only waiting: they are delivered once the transport opens.
    await suspend(false);
    for (const id of ids)
      await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered once the transport opens", 20_000);
  });

  it("lets the queues settle", async () => {
    await settle();
  });
});
