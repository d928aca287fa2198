/**
 * publishEvents' claims on the envelopes it pushes (indexing/publish.ts): a first publication
 * stores, reads its endpoints and enqueues in one D1 batch, with no takeover statement; a
 * repeated one enqueues nothing while the first one's claim holds, and enqueues the same
 * webhook-ids again once it lapsed (a second batch, for the envelopes it did not store); a tenant
 * with no enabled endpoint never takes a claim over.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { MessageView, SyncState } from "../../worker/model/message";
import { publishEvents } from "../../worker/indexing/publish";

const sent: unknown[] = [];
const queue = {
  send: async (b: unknown) => {
    sent.push(b);
  },
  sendBatch: async (bs: unknown[]) => {
    sent.push(...bs);
  },
} as unknown as Queue;

/** D1 with its batches counted: statements per batch call, in order. */
function countingDb(): { db: D1Database; batches: number[] } {
  const batches: number[] = [];
  const db = new Proxy(env.DB, {
    get(target, prop) {
      if (prop === "batch")
        return (stmts: D1PreparedStatement[]) => {
          batches.push(stmts.length);
          return target.batch(stmts);
        };
      const v = Reflect.get(target, prop) as unknown;
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { db, batches };
}

function state(tenant: string, id: string, at: number): SyncState {
  const view: MessageView = {
    id,
    tenant,
    created_at: at,
    scheduled_at: null,
    state: "done",
    summary: {
      from: "s@claims.test",
      to: ["r@example.com"],
      cc: null,
      bcc: null,
      reply_to: null,
      subject: "claims",
      html: null,
      text: "hi",
      tags: [],
      message_id: `<${id}@claims.test>`,
    },
    recipients: [
      {
        idx: 0,
        email: "r@example.com",
        status: "delivered",
        transport: "smtp",
        nexthop: "example.com",
        attempts: 1,
        next_attempt_at: null,
        last_response: null,
        blocked_by: null,
        updated_at: at,
      },
    ],
  };
  const ev = (seq: number, type: string, recipient: string | null, data: unknown) => ({
    seq,
    message_id: id,
    tenant,
    type,
    recipient,
    created_at: at,
    data: JSON.stringify(data),
  });
  return {
    view,
    events: [
      ev(1, "email.accepted", null, { recipients: 1, size: 100 }),
      ev(2, "email.queued", "r@example.com", { transport: "smtp", nexthop: "example.com" }),
      ev(3, "email.delivered", "r@example.com", { attempt: 1, response: { code: 250, text: "ok" } }),
    ],
  };
}

/** The webhook-ids enqueued since `from`, in order. */
function eventIds(from: number): string[] {
  return sent.slice(from).flatMap((m) => [...JSON.stringify(m).matchAll(/"eventId":"([^"]+)"/g)].map((x) => x[1]!));
}

async function publish(s: SyncState): Promise<{ batches: number[]; ids: string[] }> {
  const { db, batches } = countingDb();
  const from = sent.length;
  await publishEvents(
    { ...env, DB: db, WEBHOOKS: queue, WEBHOOKS_SLOW: queue } as Env,
    [s],
    [{ view: s.view, lastEvent: "delivered" }],
  );
  return { batches, ids: eventIds(from) };
}

async function endpoint(tenant: string): Promise<void> {
  await env.DB.prepare(
    "INSERT INTO webhook_endpoints (id, tenant_id, endpoint, events, status, secret_enc, created_at, updated_at) " +
      "VALUES (?1, ?2, 'https://hooks.example/claims', NULL, 'enabled', 'x', 0, 0)",
  )
    .bind(`we_${tenant}`, tenant)
    .run();
}

async function lapseClaims(emailId: string): Promise<void> {
  await env.DB.prepare("UPDATE event_runs SET enqueued_at = 1 WHERE email_id = ? AND enqueued_at IS NOT NULL")
    .bind(emailId)
    .run();
}

describe("publishEvents' claims", () => {
  it("enqueues a first publication from one batch, a repeat not while the claim holds, and again once it lapsed", async () => {
    await endpoint("claims-a");
    const s = state("claims-a", `01${crypto.randomUUID().slice(2)}`, Date.now());
    const first = await publish(s);
    expect(first.batches).toEqual([first.batches[0]]); // one batch: no takeover statement, no second batch
    expect(first.ids).toHaveLength(2); // email.sent (the queued transition) and email.delivered
    expect(new Set(first.ids).size).toBe(2);

    const held = await publish(s);
    expect(held.batches).toHaveLength(2); // the takeover of the envelopes it did not store
    expect(held.batches[1]).toBe(1);
    expect(held.ids).toEqual([]);

    await lapseClaims(s.view.id);
    const again = await publish(s);
    expect(again.ids.sort()).toEqual([...first.ids].sort()); // the same webhook-ids: receivers dedupe
    const afterTakeover = await publish(s);
    expect(afterTakeover.ids).toEqual([]); // the takeover claimed them anew
  });

  it("makes no takeover for a tenant with no enabled endpoint", async () => {
    const s = state("claims-b", `02${crypto.randomUUID().slice(2)}`, Date.now());
    const first = await publish(s);
    expect(first.batches).toHaveLength(1);
    expect(first.ids).toEqual([]);
    await lapseClaims(s.view.id);
    const repeat = await publish(s);
    expect(repeat.batches).toHaveLength(1);
    expect(repeat.ids).toEqual([]);
  });
});
