/**
 * A message with 400 recipients (MAX_RECIPIENTS raised) is indexed and published without error.
 * Each pushed envelope repeats the message's `to`, so its 400 envelopes weigh about 10 MB: bound
 * as one JSON string (as event_feed's insert did) that is SQLITE_TOOBIG (D1 refuses strings above
 * 2,000,000 bytes), so the log insert and the recipient upsert bind chunks of at most 1 MB.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { MessageView, OutboxEvent, RcptStatus, SyncState } from "../../worker/model/message";
import { LOG_CHUNK_BYTES } from "../../worker/db/events";
import { listFeed } from "../../worker/db/feed";
import { publishEvents } from "../../worker/indexing/publish";

const N = 400;
const tenant = "big";

function view(id: string, status: RcptStatus, at: number): MessageView {
  const to = Array.from(
    { length: N },
    (_, i) => `recipient-number-${i}.with-a-longish-local-part@subdomain-${i % 7}.example.com`,
  );
  return {
    id,
    tenant,
    created_at: at,
    scheduled_at: null,
    state: status === "ready" ? "open" : "done",
    summary: {
      from: "Big Sender <news@big.test>",
      to,
      cc: null,
      bcc: null,
      reply_to: null,
      subject: "Four hundred",
      html: null,
      text: "hi",
      tags: [{ name: "campaign", value: "big" }],
      message_id: `<${id}@big.test>`,
    },
    recipients: to.map((email, idx) => ({
      idx,
      email,
      status,
      transport: "smtp",
      nexthop: email.split("@")[1]!,
      attempts: status === "delivered" ? 1 : 0,
      next_attempt_at: null,
      last_response: null,
      blocked_by: null,
      updated_at: at,
    })),
  };
}

function events(
  id: string,
  from: number,
  type: string,
  at: number,
  data: (i: number) => unknown,
  recipients: (string | null)[],
): OutboxEvent[] {
  return recipients.map((recipient, i) => ({
    seq: from + i,
    message_id: id,
    tenant,
    type,
    recipient,
    created_at: at,
    data: JSON.stringify(data(i)),
  }));
}

const jobs: unknown[] = [];
const queue = {
  send: async (b: unknown) => {
    jobs.push(b);
  },
  sendBatch: async (bs: unknown[]) => {
    jobs.push(...bs);
  },
} as unknown as Queue;
const qenv = { ...env, WEBHOOKS: queue, WEBHOOKS_SLOW: queue } as Env;

async function index(state: SyncState, lastEvent: string): Promise<void> {
  await publishEvents(qenv, [state], [{ view: state.view, lastEvent }]);
}

async function count(sql: string, ...args: unknown[]): Promise<number> {
  return (
    (
      await env.DB.prepare(sql)
        .bind(...args)
        .first<{ n: number }>()
    )?.n ?? 0
  );
}

describe("a 400-recipient message in D1", () => {
  it("indexes, logs and publishes accepted → queued → delivered", async () => {
    await env.DB.prepare(
      "INSERT INTO webhook_endpoints (id, tenant_id, endpoint, events, status, secret_enc, " +
        "created_at, updated_at) VALUES ('we_big', ?, 'https://hooks.example/big', NULL, " +
        "'enabled', 'x', 0, 0)",
    )
      .bind(tenant)
      .run();
    const id = `01${crypto.randomUUID().slice(2)}`;
    const t0 = Date.now();
    const ready = view(id, "ready", t0);
    const addrs = ready.recipients.map((r) => r.email);
    const queued: SyncState = {
      view: ready,
      events: [
        ...events(id, 1, "email.accepted", t0, () => ({ recipients: N, size: 1000 }), [null]),
        ...events(id, 2, "email.queued", t0, () => ({ transport: "smtp", nexthop: "example.com" }), addrs),
      ],
    };
    await index(queued, "queued");
    const done = view(id, "delivered", t0 + 1000);
    const response = {
      code: 250,
      enhanced: "2.0.0",
      text: "2.0.0 Ok: queued as ABCDEF0123456789 — a long enough SMTP reply to make each row weigh something",
      mx: "mx.subdomain.example.com",
      tls: true,
    };
    await index(
      { view: done, events: events(id, 2 + N, "email.delivered", t0 + 1000, () => ({ attempt: 1, response }), addrs) },
      "delivered",
    );
    // A redelivery changes nothing.
    await index(
      { view: done, events: events(id, 2 + N, "email.delivered", t0 + 1000, () => ({ attempt: 1, response }), addrs) },
      "delivered",
    );

    expect(await count("SELECT count(*) AS n FROM messages WHERE id = ? AND last_event = 'delivered'", id)).toBe(1);
    expect(
      await count("SELECT count(*) AS n FROM recipients_all WHERE message_id = ? AND status = 'delivered'", id),
    ).toBe(N);
    expect(await count("SELECT count(*) AS n FROM event_log WHERE email_id = ? AND data IS NOT NULL", id)).toBe(
      1 + 2 * N,
    );
    expect(await count("SELECT count(*) AS n FROM event_log WHERE email_id = ? AND event_id IS NOT NULL", id)).toBe(
      2 * N,
    );
    expect(jobs).toHaveLength(2 * N);
    const feed = await listFeed(env.DB, tenant, { afterSeq: 0, limit: 100, types: ["email.delivered"] });
    expect(feed.rows).toHaveLength(100);
    expect(feed.hasMore).toBe(true);
  }, 60_000);

  it("expands a message-level email.canceled of 400 recipients into 400 envelopes on one transition", async () => {
    const id = `02${crypto.randomUUID().slice(2)}`;
    const t0 = Date.now();
    const cancelled = view(id, "cancelled", t0);
    jobs.length = 0;
    await index(
      {
        view: cancelled,
        events: [
          ...events(id, 1, "email.accepted", t0, () => ({ recipients: N, size: 1000 }), [null]),
          ...events(id, 2, "email.canceled", t0, () => ({}), [null]),
        ],
      },
      "canceled",
    );
    expect(
      await count("SELECT count(*) AS n FROM event_log WHERE email_id = ? AND event_type = 'email.canceled'", id),
    ).toBe(N);
    expect(
      await count(
        "SELECT count(*) AS n FROM event_log WHERE email_id = ? AND type = 'email.canceled' AND data IS NOT NULL",
        id,
      ),
    ).toBe(1);
    expect(jobs).toHaveLength(N);
  }, 30_000);

  it("D1 (local) refuses a bound string above about 2 MB: the chunks stay well below", async () => {
    const fits = async (bytes: number) => {
      try {
        await env.DB.prepare("SELECT length(?) AS n").bind("x".repeat(bytes)).first();
        return true;
      } catch {
        return false;
      }
    };
    let lo = 1024;
    let hi = 8 * 1024 * 1024;
    if (await fits(hi)) lo = hi;
    while (hi - lo > 1024) {
      const mid = Math.floor((lo + hi) / 2);
      if (await fits(mid)) lo = mid;
      else hi = mid;
    }
    console.log(`largest bound string D1 (local) accepts: about ${lo} bytes`);
    expect(lo).toBeGreaterThan(LOG_CHUNK_BYTES);
  });
});
