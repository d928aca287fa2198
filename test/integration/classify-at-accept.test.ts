/**
 * Classification at accept (CLASSIFY_AT_ACCEPT_MAX_RCPTS, here 10): the accepting worker decides (routes, suppressions) beside the body
 * write, and the Outbox stores the decisions in its accept request and admits the message to its
 * Transport DO (AdmissionBatch: at once when the shard is idle, else with the shard's other
 * accepts, one run per ADMIT_BATCH_MS). No classify queue message is sent for it; the queue still
 * takes what could not be decided (a failed look-up) and scheduled messages.
 */
import { createExecutionContext, env, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { outboxName, shardOf } from "../../worker/model/ids";
import { readView } from "../../durable-objects/outbox/store";
import { recipientsFrom } from "../../durable-objects/transport/sqlite-source";
import worker from "../../worker";
import { email, newKey, settle } from "./helpers";

let key: string;
beforeAll(async () => {
  key = await newKey("acc");
  await env.DB.prepare(
    "INSERT INTO suppressions (tenant_id, address, reason, created_at, expires_at) VALUES ('acc', 'gone@example.com', 'hard_bounce', ?1, NULL)",
  )
    .bind(Date.now())
    .run();
});

const held: { body: unknown }[] = [];
afterAll(async () => {
  // What the stub queue held goes to the real one, whose consumer decides and indexes it.
  if (held.length > 0) await env.CLASSIFY.sendBatch(held.splice(0) as MessageSendRequest[]);
  await settle();
});

/**
 * POSTs through the Worker with `over` replacing bindings; returns the answer and what the classify
 * queue was sent, and its bulk lane (`classify-bulk`, messages of more than 10 recipients); both
 * held until the file ends, then sent to the real classify queue.
 */
async function post(
  path: string,
  body: unknown,
  over: Partial<Env> = {},
): Promise<{ status: number; json: Record<string, unknown>; classify: unknown[]; bulk: unknown[] }> {
  const classify: unknown[] = [];
  const bulk: unknown[] = [];
  const stub = (into: unknown[]) =>
    ({
      send: async (b: unknown) => {
        into.push(b);
        held.push({ body: b });
      },
      sendBatch: async (bs: MessageSendRequest[]) => {
        into.push(...bs.map((b) => b.body));
        held.push(...bs);
      },
    }) as unknown as Queue;
  const queue = stub(classify);
  const ctx = createExecutionContext();
  const req = new Request(`http://relay.test${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const res = await worker.fetch(
    req as Request<unknown, IncomingRequestCfProperties>,
    { ...env, CLASSIFY: queue, CLASSIFY_BULK: stub(bulk), CLASSIFY_AT_ACCEPT_MAX_RCPTS: "10", ...over } as Env,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return { status: res.status, json: await res.json(), classify, bulk };
}

/** The message's recipients as its Outbox holds them (readView: a decided recipient of an admitted message is ready), read the moment the API answered. */
function outboxRcpts(id: string): Promise<{ address: string; status: string; transport: string | null }[]> {
  return runInDurableObject(env.OUTBOX.getByName(outboxName(shardOf(id))), (_o, state) =>
    (readView(state.storage.sql, id, Date.now())?.recipients ?? []).map((r) => ({
      address: r.email,
      status: r.status,
      transport: r.transport,
    })),
  );
}

describe("classification at accept", () => {
  it("an email is decided and stored in the accept request, and admitted by its idle shard at once, with no classify queue message", async () => {
    const r = await post("/emails", email({ to: ["ann@example.com", "gone@example.com"] }));
    expect(r.status).toBe(200);
    const id = r.json.id as string;
    expect(r.classify).toEqual([]);
    // Decided when the API answered; the admission run starts as the accept answers (it may be done already).
    const [ann, gone] = await outboxRcpts(id);
    expect(["incoming", "ready"]).toContain(ann!.status);
    expect({ ann: ann!.transport, gone }).toEqual({
      ann: "smtp",
      gone: { address: "gone@example.com", status: "suppressed", transport: null },
    });
    await vi.waitFor(async () => expect((await outboxRcpts(id))[0]!.status).toBe("ready"), {
      timeout: 10_000,
      interval: 100,
    });
    const admitted = await runInDurableObject(env.TRANSPORT_QUEUE.getByName("smtp"), (_o, state) =>
      recipientsFrom(state.storage.sql, id, 0).map((x) => x.address),
    );
    expect(admitted).toEqual(["ann@example.com"]);
  });

  it("a batch of 100 and a send in the same window are admitted together, with no classify queue message", async () => {
    const [r, one] = await Promise.all([
      post(
        "/emails/batch",
        Array.from({ length: 100 }, (_, i) => email({ to: `b${i}@example.com` })),
      ),
      post("/emails", email({ to: "single@example.com" })),
    ]);
    expect(r.status).toBe(200);
    expect(one.status).toBe(200);
    expect([...r.classify, ...one.classify]).toEqual([]);
    const ids = [...(r.json.data as { id: string }[]).map((d) => d.id), one.json.id as string];
    await vi.waitFor(
      async () => {
        const states = await Promise.all(ids.map(async (id) => (await outboxRcpts(id))[0]?.status));
        expect(new Set(states)).toEqual(new Set(["ready"]));
      },
      { timeout: 10_000, interval: 200 },
    );
  });

  it("a message whose look-ups fail is stored undecided and handed to the classify queue", async () => {
    // Authentication and the sender check read D1 too: only the classify stage's look-ups fail.
    const db = new Proxy(env.DB, {
      get: (t, p) =>
        p === "prepare"
          ? (sql: string) => {
              if (/\broutes\b|\bsuppressions\b/.test(sql)) throw new Error("D1 is down");
              return t.prepare(sql);
            }
          : Reflect.get(t, p),
    });
    const r = await post("/emails", email({ to: "carl@example.com" }), { DB: db });
    expect(r.status).toBe(200);
    const id = r.json.id as string;
    expect(await outboxRcpts(id)).toEqual([{ address: "carl@example.com", status: "incoming", transport: null }]);
    expect(r.classify).toEqual([{ batch: [{ id, tenant: "acc", rcpts: ["carl@example.com"] }] }]);
  });

  it("a message of more recipients than CLASSIFY_AT_ACCEPT_MAX_RCPTS goes through the classify queue's bulk lane", async () => {
    const to = Array.from({ length: 11 }, (_, i) => `many${i}@example.com`);
    const r = await post("/emails", email({ to }));
    expect(r.status).toBe(200);
    const id = r.json.id as string;
    expect((await outboxRcpts(id)).map((x) => x.status)).toEqual(to.map(() => "incoming"));
    expect(r.bulk).toEqual([{ batch: [{ id, tenant: "acc", rcpts: to }] }]);
    expect(r.classify).toEqual([]);
    const ten = await post("/emails", email({ to: to.slice(0, 10) }));
    expect(ten.classify).toEqual([]);
  });

  it("with CLASSIFY_AT_ACCEPT_MAX_RCPTS 0 (the default) every message goes through the classify queue", async () => {
    const r = await post("/emails", email({ to: "dee@example.com" }), {
      CLASSIFY_AT_ACCEPT_MAX_RCPTS: "0",
    } as Partial<Env>);
    const id = r.json.id as string;
    expect(await outboxRcpts(id)).toEqual([{ address: "dee@example.com", status: "incoming", transport: null }]);
    expect(r.classify).toEqual([{ batch: [{ id, tenant: "acc", rcpts: ["dee@example.com"] }] }]);
    expect(r.bulk).toEqual([]);
  });

  it("with classification at accept off, a request's small and large messages go to their own lanes", async () => {
    const big = Array.from({ length: 11 }, (_, i) => `lane${i}@example.com`);
    const r = await post("/emails/batch", [email({ to: "small@example.com" }), email({ to: big })], {
      CLASSIFY_AT_ACCEPT_MAX_RCPTS: "0",
    } as Partial<Env>);
    expect(r.status).toBe(200);
    const [small, large] = (r.json.data as { id: string }[]).map((d) => d.id);
    expect(r.classify).toEqual([{ batch: [{ id: small, tenant: "acc", rcpts: ["small@example.com"] }] }]);
    expect(r.bulk).toEqual([{ batch: [{ id: large, tenant: "acc", rcpts: big }] }]);
  });

  it("a scheduled message is not decided before it is due", async () => {
    const r = await post(
      "/emails",
      email({ to: "later@example.com", scheduled_at: new Date(Date.now() + 3600_000).toISOString() }),
    );
    expect(r.status).toBe(200);
    const id = r.json.id as string;
    expect(await outboxRcpts(id)).toEqual([{ address: "later@example.com", status: "incoming", transport: null }]);
    expect(r.classify).toEqual([{ id }]);
  });
});
