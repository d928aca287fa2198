/** Crash safety of the accept path: a stop at each step, then the sweeper (Outbox alarm) and retries; nothing accepted is lost, nothing admitted twice. */
import {
  createExecutionContext,
  createScheduledController,
  env,
  runDurableObjectAlarm,
  runInDurableObject,
  waitOnExecutionContext,
} from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newMessageId, outboxName } from "../../worker/model/ids";
import type { NewMessage } from "../../worker/model/message";
import worker from "../../worker";
import { BatchLookups } from "../../worker/classify/lookups";
import { admitPlan, classifyMessage, decideMessage } from "../../worker/classify/classify-message";
import { eventually, getEmail, newKey, settle } from "./helpers";
import { recipientsFrom } from "../../durable-objects/transport/sqlite-source";
import { readEvents } from "../../durable-objects/outbox/events";

const SHARD = 2;
const outbox = () => env.OUTBOX.getByName(outboxName(SHARD));
const transport = () => env.TRANSPORT_QUEUE.getByName("crash");
const lookups = new BatchLookups(env.DB);
let key: string;

beforeAll(async () => {
  key = await newKey("acme");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('crash', NULL)"),
    env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, '*.crash.test', 'crash')"),
  ]);
});
afterAll(() => settle());

/** An envelope as the API would have stored it, for `rcpts` on the crash transport. */
function message(rcpts: string[], createdAt = Date.now()): NewMessage {
  return {
    id: newMessageId(SHARD),
    createdAt,
    scheduledAt: null,
    mailFrom: "a@acme.test",
    rcptTo: rcpts,
    size: 20,
    summary: {
      from: "a@acme.test",
      to: rcpts,
      cc: null,
      bcc: null,
      reply_to: null,
      subject: "crash",
      html: null,
      text: "t",
      tags: null,
      message_id: "<c@acme.test>",
    },
  };
}

/** The API's accept path, stopped right after the envelope commit (no classify enqueue). */
async function acceptWithoutQueue(m: NewMessage): Promise<void> {
  await env.BODIES.put(`mess/${m.id}`, "From: a@acme.test\r\n\r\nbody\r\n");
  expect(
    await outbox().accept({ tenant: "acme", idempotency: null, messages: [m], response: { status: 200, body: "{}" } }),
  ).toMatchObject({ kind: "accepted", pauseMs: 0 });
}

/** Waits past the grace period and runs the sweeper (the Outbox alarm). */
async function sweep(): Promise<void> {
  await new Promise((r) => setTimeout(r, 1100));
  await outbox().ensureSweep(SHARD);
  await runDurableObjectAlarm(outbox());
}

async function statuses(id: string): Promise<string[]> {
  return (await getEmail(key, id)).body.recipients.map((r) => r.status);
}

/** Admissions of the message (one record per admitted core message) and its recipients in the backlog. */
function admittedRows(id: string): Promise<{ admissions: number; rcpts: number }> {
  return runInDurableObject(transport(), (_o, state) => ({
    admissions: state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM admission WHERE core_id = ?", id).one()
      .n,
    rcpts: recipientsFrom(state.storage.sql, id, 0).length,
  }));
}

/** Delivers everything the crash transport has selected, so messages leave its core. */
async function deliverAll(): Promise<string[]> {
  const { entries } = await transport().dispatch(1000);
  for (const e of entries) await transport().report(e.entryId, { status: "ok" });
  return entries.map((e) => e.messageId);
}

describe("crash safety of the accept path", () => {
  it("stop between body write and envelope: the sweeper deletes the orphan after the grace period, and only it", async () => {
    const orphan = newMessageId(SHARD);
    await env.BODIES.put(`mess/${orphan}`, "From: a@acme.test\r\n\r\norphan\r\n");
    const kept = message(["keep@x.crash.test"]);
    await acceptWithoutQueue(kept);
    await outbox().ensureSweep(SHARD);
    await runDurableObjectAlarm(outbox());
    expect(await env.BODIES.head(`mess/${orphan}`)).not.toBeNull(); // within the grace period: maybe in flight
    await sweep();
    await eventually(async () => ((await env.BODIES.head(`mess/${orphan}`)) === null ? true : undefined));
    expect(await env.BODIES.head(`mess/${kept.id}`)).not.toBeNull();
  });

  it("refuses an envelope whose body is older than the grace period (it may have been swept)", async () => {
    const late = message(["late@x.crash.test"], Date.now() - 5000);
    expect(
      await outbox().accept({
        tenant: "acme",
        idempotency: null,
        messages: [late],
        response: { status: 200, body: "{}" },
      }),
    ).toEqual({ kind: "stale" });
  });

  it("the cron wakes every shard's sweeper, also shards that never got an envelope", async () => {
    const ctx = createExecutionContext();
    await worker.scheduled(createScheduledController({ cron: "*/10 * * * *", scheduledTime: Date.now() }), env, ctx);
    await waitOnExecutionContext(ctx);
    expect(await runDurableObjectAlarm(env.OUTBOX.getByName(outboxName(3)))).toBe(true);
  });

  it("stop between envelope commit and classification: the sweeper re-queues it and it is classified once", async () => {
    const m = message(["a@one.crash.test", "b@two.crash.test"]);
    await acceptWithoutQueue(m);
    expect(await statuses(m.id)).toEqual(["incoming", "incoming"]);
    await sweep();
    await eventually(async () => ((await statuses(m.id)).every((s) => s === "ready") ? true : undefined));
    expect(await admittedRows(m.id)).toEqual({ admissions: 1, rcpts: 2 });
  });

  it("stop between classification and admission: decisions are reused, every recipient admitted exactly once", async () => {
    const m = message(["c@one.crash.test", "d@two.crash.test"]);
    await acceptWithoutQueue(m);
    const { plan } = await decideMessage(env, m.id, lookups); // decided, then the consumer stops
    expect(plan?.rcpts.map((r) => r.transport)).toEqual(["crash", "crash"]);
    expect(await admittedRows(m.id)).toEqual({ admissions: 0, rcpts: 0 });
    await sweep();
    await eventually(async () => ((await statuses(m.id)).every((s) => s === "ready") ? true : undefined));
    expect(await admittedRows(m.id)).toEqual({ admissions: 1, rcpts: 2 });
  });

  it("stop between admission and marking ready, after the transport already delivered: nothing is admitted twice", async () => {
    const m = message(["e@one.crash.test", "f@two.crash.test"]);
    await acceptWithoutQueue(m);
    const { plan } = await decideMessage(env, m.id, lookups);
    await admitPlan(env, plan!); // admitted, then the consumer stops before marking ready
    expect(await deliverAll()).toContain(m.id); // the message is delivered and leaves the transport's core
    await sweep();
    await eventually(async () => ((await statuses(m.id)).every((s) => s === "ready") ? true : undefined));
    expect((await admittedRows(m.id)).admissions).toBe(1);
    expect(await deliverAll()).not.toContain(m.id); // re-admission would have put it back in core
  });

  it("delivered before marking ready (the Outbox call held back): the outcome is kept, the message finishes and its body goes", async () => {
    const m = message(["j@one.crash.test", "k@two.crash.test"]);
    await acceptWithoutQueue(m);
    const { plan } = await decideMessage(env, m.id, lookups);
    await admitPlan(env, plan!);
    // The transport dispatches at once and the delivery agent records what happened, as the
    // deliver consumer does (outcomes in the Outbox first, then the report), while the classify
    // consumer's call that marks them ready has not reached the Outbox yet.
    const { entries } = await transport().dispatch(1000);
    const mine = entries.filter((e) => e.messageId === m.id);
    expect(mine.flatMap((e) => e.rcpts.map((r) => r.address)).sort()).toEqual(["j@one.crash.test", "k@two.crash.test"]);
    const done = await outbox().recordOutcome(
      m.id,
      [0, 1].map((idx) => ({ idx, status: "delivered" as const, attempt: 1, response: { code: 250, text: "ok" } })),
      true,
    );
    expect(done).toMatchObject({ applied: 2, done: true });
    for (const e of mine)
      await transport().report(
        e.entryId,
        { status: "ok" },
        e.rcpts.map((r) => r.idx),
      );
    // Now the held-back call lands, and the sweeper runs: nothing goes back.
    await outbox().classify(m.id, []);
    // Its unforwarded events: the queued ones in event rows, the finishing outcomes in the recipient rows.
    const types = await runInDurableObject(outbox(), (_o, state) =>
      readEvents(state.storage.sql, m.id).map((e) => e.type),
    );
    // Each recipient was queued (Resend's email.sent) before it was delivered, once.
    expect(types.filter((t) => t === "email.queued")).toHaveLength(2);
    expect(types.filter((t) => t === "email.delivered")).toHaveLength(2);
    expect(types.indexOf("email.queued")).toBeLessThan(types.indexOf("email.delivered"));
    await sweep();
    expect(await statuses(m.id)).toEqual(["delivered", "delivered"]);
    expect(await env.BODIES.head(`mess/${m.id}`)).toBeNull();
    expect(await deliverAll()).not.toContain(m.id);
  });

  it("concurrent redeliveries of one classification admit each recipient once and record one event each", async () => {
    const m = message(["g@one.crash.test", "h@two.crash.test", "i@three.crash.test"]);
    await acceptWithoutQueue(m);
    await Promise.all(Array.from({ length: 5 }, () => classifyMessage(env, m.id, lookups)));
    expect(await statuses(m.id)).toEqual(["ready", "ready", "ready"]);
    expect(await admittedRows(m.id)).toEqual({ admissions: 1, rcpts: 3 });
    // One email.queued event names all three (publication gives one email.sent each); it is kept
    // in the message row, which marking them ready wrote anyway.
    const queued = await runInDurableObject(outbox(), (_o, state) =>
      readEvents(state.storage.sql, m.id).filter((e) => e.type === "email.queued"),
    );
    expect(queued.map((q) => [q.recipient, JSON.parse(q.data)])).toEqual([
      [null, { recipients: ["g@one.crash.test", "h@two.crash.test", "i@three.crash.test"] }],
    ]);
    // Nothing forwarded these events to D1 (no consumer ran): the sweeper re-queues the message.
    await sweep();
    await settle();
    const d1 = await env.DB.prepare(
      "SELECT count(*) AS n FROM event_log WHERE email_id = ? AND type = 'email.queued' AND data IS NOT NULL",
    )
      .bind(m.id)
      .first<{ n: number }>();
    expect(d1?.n).toBe(1);
    const sent = await env.DB.prepare(
      "SELECT recipient FROM event_log WHERE email_id = ? AND event_type = 'email.sent' ORDER BY part",
    )
      .bind(m.id)
      .all<{ recipient: string | null }>();
    expect(sent.results.length).toBe(3);
  }, 20_000);
});
