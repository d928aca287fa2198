/**
 * Envelopes are stored without the fields their messages row holds (webhooks/core/stored-body.ts)
 * and read whole: what the webhooks queue carries, the pull feed, replay and a look-up by event id
 * give the same bytes, each with the email's whole `to` list. Stored so, no envelope of a
 * ten-recipient email passes SQLite's local payload of a WITHOUT ROWID row (about 1,000 bytes).
 * Since migration 0040 the ten envelopes of such an email's publication are one row, whose
 * payload past that takes overflow pages (4 KiB each) of its own.
 */
import { createExecutionContext, createMessageBatch, env, getQueueResult } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { outboxName, shardOf } from "../../worker/model/ids";
import worker from "../../worker";
import { indexMessages } from "../../worker/indexing/writes";
import { feedBodyOf, feedRange, listFeed } from "../../worker/db/feed";
import { isWebhookBundle, jobsOfBundle } from "../../worker/webhooks/jobs";
import { message } from "./outbox-messages";

const TENANT = "stored";

/** Sends one message of `n` recipients through classify and delivery as the consumers do; returns its id. */
async function sendAndDeliver(cenv: Env, n: number): Promise<{ id: string; to: string[] }> {
  const id = `01${crypto.randomUUID().slice(2)}`;
  const to = Array.from({ length: n }, (_, i) => `someone.${i}@mail-${i}.receiver-domain.example`);
  const stub = env.OUTBOX.getByName(outboxName(shardOf(id)));
  const m = message(id, to, false, Date.now());
  const summary = {
    ...m.summary,
    from: "Acme Notifications <notifications@send.acme.example>",
    subject: "Your weekly report is ready",
    tags: [{ name: "kind", value: "report" }],
  };
  await stub.accept({
    tenant: TENANT,
    idempotency: null,
    response: { status: 200, body: "{}" },
    messages: [{ ...m, summary }],
  });
  const batch = createMessageBatch("classify", [{ id: `c-${id}`, timestamp: new Date(), attempts: 1, body: { id } }]);
  const ctx = createExecutionContext();
  await worker.queue(batch, cenv, ctx);
  expect((await getQueueResult(batch, ctx)).explicitAcks).toEqual([`c-${id}`]);
  const outcome = await stub.recordOutcome(
    id,
    to.map((_, idx) => ({
      idx,
      status: "delivered" as const,
      attempt: 1,
      response: {
        code: 250,
        enhanced: "2.0.0",
        text: "250 2.0.0 Ok: queued as 4XyZ12abc",
        mx: "mx.example",
        tls: true,
      },
    })),
    true,
  );
  if (!outcome.sync) throw new Error(JSON.stringify(outcome));
  await indexMessages(cenv, [outcome.sync]);
  return { id, to };
}

describe("stored envelopes", () => {
  it("a ten-recipient email's envelopes: stored compact, in the row's page; pushed, listed, replayed and looked up whole and alike", async () => {
    await env.DB.prepare(
      "INSERT INTO webhook_endpoints (id, tenant_id, endpoint, events, status, secret_enc, created_at, updated_at) " +
        "VALUES ('we_stored', ?, 'https://hooks.example/stored', NULL, 'enabled', 'x', 0, 0)",
    )
      .bind(TENANT)
      .run();
    const pushed = new Map<string, string>();
    const collect = (b: unknown) => {
      const body = (b as { body: unknown }).body;
      for (const j of isWebhookBundle(body) ? jobsOfBundle(body) : [body as { eventId: string; body?: string }])
        if (j.body !== undefined) pushed.set(j.eventId, j.body);
    };
    const webhooks = {
      send: async (b: unknown) => collect({ body: b }),
      sendBatch: async (bs: unknown[]) => bs.forEach(collect),
    } as unknown as Queue;
    const cenv = { ...env, WEBHOOKS: webhooks, WEBHOOKS_SLOW: webhooks } as Env;

    const before = await env.DB.prepare("SELECT 1").run();
    const sent = [];
    for (let i = 0; i < 20; i++) sent.push(await sendAndDeliver(cenv, 10));
    const after = await env.DB.prepare("SELECT 1").run();

    const rows = (
      await env.DB.prepare(
        "SELECT email_id, event_id, body, length(CAST(body AS BLOB)) AS body_bytes, " +
          "length(CAST(tenant_id AS BLOB)) + length(CAST(email_id AS BLOB)) + length(CAST(type AS BLOB)) + " +
          "IFNULL(length(CAST(recipient AS BLOB)), 0) + IFNULL(length(CAST(data AS BLOB)), 0) + " +
          "IFNULL(length(CAST(event_id AS BLOB)), 0) + IFNULL(length(CAST(event_type AS BLOB)), 0) + " +
          "IFNULL(length(CAST(body AS BLOB)), 0) AS row_bytes FROM event_log WHERE tenant_id = ? AND event_id IS NOT NULL",
      )
        .bind(TENANT)
        .all<{ email_id: string; event_id: string; body: string; body_bytes: number; row_bytes: number }>()
    ).results;
    // email.sent and email.delivered of each recipient.
    expect(rows).toHaveLength(20 * 20);
    for (const r of rows) {
      expect(r.body.startsWith("^")).toBe(true);
      // The text columns; the seven integers and the record header take at most 62 bytes more,
      // within SQLite's 1,002 bytes of such a row kept in its page.
      expect(r.row_bytes).toBeLessThan(940);
    }
    const to = new Map(sent.map((s) => [s.id, s.to]));
    const { rows: feed, hasMore } = await listFeed(env.DB, TENANT, { afterSeq: 0, limit: 500 });
    expect(hasMore).toBe(false);
    const replay = await feedRange(env.DB, TENANT, {
      afterSeq: 0,
      untilSeq: Number.MAX_SAFE_INTEGER,
      fromMs: 0,
      toMs: Number.MAX_SAFE_INTEGER,
      limit: 500,
    });
    expect(feed.map((r) => r.event_id).sort()).toEqual(rows.map((r) => r.event_id).sort());
    expect(replay).toEqual(feed);
    for (const f of feed) {
      expect(pushed.get(f.event_id)).toBe(f.body);
      expect(await feedBodyOf(env.DB, f.event_id)).toBe(f.body);
      const e = JSON.parse(f.body) as { data: { email_id: string; to: string[]; subject: string; tags: object } };
      expect(e.data).toMatchObject({
        email_id: f.email_id,
        subject: "Your weekly report is ready",
        tags: { kind: "report" },
      });
      expect(e.data.to).toEqual(to.get(f.email_id));
    }
    // Two rows per email: its ten email.sent, published at classify, and its ten deliveries.
    expect(
      (await env.DB.prepare("SELECT count(*) AS n FROM event_runs WHERE tenant_id = ?")
        .bind(TENANT)
        .first<{ n: number }>())!.n,
    ).toBe(40);
    // What D1 grew by for the 20 emails (pages: rows, overflow pages, index entries, the messages rows).
    const perEmail = ((after.meta.size_after ?? 0) - (before.meta.size_after ?? 0)) / 20;
    console.log(`D1 bytes per ten-recipient email: ${Math.round(perEmail)}`);
    expect(perEmail).toBeLessThan(24_000);
  });
});
