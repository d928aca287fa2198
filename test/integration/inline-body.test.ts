/**
 * Small bodies kept in the Outbox row instead of R2 (INLINE_BODY_BYTES): no R2 object is written,
 * the delivery stage gets the text with the envelope, the row's copy goes in the write that
 * finishes the message (or, when a notice must quote it, once the notice is out), and larger
 * bodies still go to R2. The rest of this project runs with INLINE_BODY_BYTES "0"; these tests
 * pass the Worker an env with the default.
 */
import { createExecutionContext, env, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { outboxName, shardOf } from "../../worker/model/ids";
import { deleteDoneBodies } from "../../durable-objects/outbox/sweep";
import { sendPendingDsns } from "../../durable-objects/outbox/dsn";
import worker from "../../worker";
import { classified, email, newKey } from "./helpers";

const inlineEnv = { ...env, INLINE_BODY_BYTES: "32768" } as typeof env;
let key: string;
beforeAll(async () => {
  key = await newKey("inline");
});

async function send(body: Record<string, unknown>): Promise<string> {
  const ctx = createExecutionContext();
  const req = new Request("http://relay.test/emails", {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  }) as Request<unknown, IncomingRequestCfProperties>;
  const res = await worker.fetch(req, inlineEnv, ctx);
  await waitOnExecutionContext(ctx);
  expect(res.status).toBe(200);
  return (await res.json<{ id: string }>()).id;
}

const outboxOf = (id: string) => env.OUTBOX.getByName(outboxName(shardOf(id)));
const row = (id: string) =>
  runInDurableObject(outboxOf(id), (_i, state) =>
    state.storage.sql
      .exec<{ body: string | ArrayBuffer | null; body_r2: number; state: string }>(
        "SELECT body, body_r2, state FROM message WHERE id = ?",
        id,
      )
      .one(),
  );

describe("bodies kept in the Outbox row", () => {
  it("a small message: no R2 object; the envelope carries the text; finishing drops it in the same write", async () => {
    const id = await send(email({ to: ["a@example.com"], subject: "inline please" }));
    expect(await env.BODIES.head(`mess/${id}`)).toBeNull();
    const before = await row(id);
    expect(before.body_r2).toBe(0);
    await classified(key, id);
    const envelope = await outboxOf(id).envelope(id);
    expect(typeof envelope!.body).toBe("string");
    expect(envelope!.body as string).toMatch(/^[\s\S]*Subject: inline please\r\n[\s\S]*\r\n\r\n[\s\S]*Hi there/);
    const r = await outboxOf(id).recordOutcome(id, [{ idx: 0, status: "delivered", attempt: 1 }]);
    expect(r).toMatchObject({ applied: 1, done: true });
    expect(await row(id)).toEqual({ body: null, body_r2: 0, state: "done" });
    expect((await outboxOf(id).envelope(id))!.body).toBeUndefined();
  });

  it("a message over the limit goes to R2 as before", async () => {
    const id = await send(email({ to: ["b@example.com"], text: "x".repeat(40_000) }));
    expect(await env.BODIES.head(`mess/${id}`)).not.toBeNull();
    expect(await row(id)).toMatchObject({ body: null, body_r2: 1 });
    expect((await outboxOf(id).envelope(id))!.body).toBeUndefined();
  });

  it("multi-byte text is measured in UTF-8 bytes: 12,000 three-byte characters (36,000 bytes) go to R2", async () => {
    const id = await send(email({ to: ["c@example.com"], text: "€".repeat(12_000) }));
    expect(await row(id)).toMatchObject({ body_r2: 1 });
  });

  it("a notice keeps the row's body until it has quoted its headers, then the body goes", async () => {
    const id = await send(email({ to: ["d@example.com"], subject: "quote me" }));
    await classified(key, id);
    const now = Date.now();
    const quoted = await runInDurableObject(outboxOf(id), async (_i, state) => {
      const sql = state.storage.sql;
      // As recordOutcome does with DSN_NOTICES on: finish keeping the body, with a notice pending.
      const { applyOutcome } = await import("../../durable-objects/outbox/outcomes");
      const { planDsn } = await import("../../durable-objects/outbox/dsn");
      const report = {
        idx: 0,
        status: "bounced" as const,
        attempt: 1,
        response: { code: 550, enhanced: "5.1.1", text: "no such user" },
      };
      expect(applyOutcome(sql, id, report, now, true)).toBe(true);
      planDsn(sql, id, [report], now);
      expect(await deleteDoneBodies(sql, env.BODIES, [id], now)).toEqual([]); // the notice still needs it
      expect(sql.exec<{ body: string | null }>("SELECT body FROM message WHERE id = ?", id).one().body).not.toBeNull();
      const [notice] = await sendPendingDsns(state.storage, env.BODIES, "relay.test", now);
      return {
        notice,
        body: sql.exec<{ body: string | null }>("SELECT body FROM message WHERE id = ?", id).one().body,
      };
    });
    expect(quoted.body).toBeNull();
    const text = await (await env.BODIES.get(`mess/${quoted.notice}`))!.text();
    expect(text).toContain("Subject: quote me");
  });

  it("with notices on, a message finished by a delivery keeps its body only if a recipient bounced or expired", async () => {
    const [plain, mixed] = [
      await send(email({ to: ["e@example.com"] })),
      await send(email({ to: ["f@example.com", "g@example.com"], subject: "half bounced" })),
    ];
    await classified(key, plain);
    await classified(key, mixed);
    const now = Date.now();
    const { applyOutcomes } = await import("../../durable-objects/outbox/outcomes");
    const bodyOf = (id: string) =>
      runInDurableObject(outboxOf(id), (_i, state) => {
        const sql = state.storage.sql;
        if (id === plain)
          expect(applyOutcomes(sql, id, [{ idx: 0, status: "delivered", attempt: 1 }], now, true)).toMatchObject({
            done: true,
          });
        else {
          // The bounce's notice is still pending (say its send failed) when the delivery finishes the message.
          expect(applyOutcomes(sql, id, [{ idx: 0, status: "bounced", attempt: 1 }], now, true)).toMatchObject({
            done: false,
          });
          expect(applyOutcomes(sql, id, [{ idx: 1, status: "delivered", attempt: 1 }], now, true)).toMatchObject({
            done: true,
          });
        }
        return sql.exec<{ body: string | null }>("SELECT body FROM message WHERE id = ?", id).one().body;
      });
    expect(await bodyOf(plain)).toBeNull();
    expect(await bodyOf(mixed)).toMatch(/Subject: half bounced/);
  });
});
