/**
 * A message's text and HTML as the Outbox keeps them for GET /emails/:id (durable-objects/outbox/
 * content.ts): a large pair deflated in the row's `content` (the summary's JSON has them null in
 * their places), given back whole and in the same key order by the status API's view; a small pair
 * left in the summary; the index's view (the sync state) never inflates them.
 */
import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { outboxName, shardOf } from "../../worker/model/ids";
import type { MessageSummary } from "../../worker/model/message";
import { CONTENT_MIN_CHARS } from "../../durable-objects/outbox/content";
import { message } from "./outbox-messages";

const TENANT = "content";

/** A receipt-like HTML of about `rows` × 300 characters, inline styles and all. */
const receipt = (rows: number) =>
  `<table role="presentation" style="width:100%;border-collapse:collapse">` +
  Array.from(
    { length: rows },
    (_, k) =>
      `<tr><td style="padding:8px 12px;border-bottom:1px solid #e5e7eb;font-family:Helvetica,Arial,sans-serif">` +
      `Item ${k}: PRD-${k * 7919}, colour ${["slate", "amber", "teal"][k % 3]} ✓</td><td style="text-align:right">$${k}.99</td></tr>`,
  ).join("") +
  `</table>`;

async function accept(summary: Partial<MessageSummary>): Promise<{ id: string; stub: DurableObjectStub<never> }> {
  const id = `01${crypto.randomUUID().slice(2)}`;
  const stub = env.OUTBOX.getByName(outboxName(shardOf(id)));
  const m = message(id, ["r@example.com"], false, Date.now());
  const full: MessageSummary = {
    ...m.summary,
    from: "Acme <orders@acme.test>",
    subject: "Your receipt",
    text: null,
    tags: [{ name: "kind", value: "receipt" }],
    ...summary,
  };
  await stub.accept({
    tenant: TENANT,
    idempotency: null,
    response: { status: 200, body: "{}" },
    messages: [{ ...m, summary: full }],
  });
  return { id, stub: stub as unknown as DurableObjectStub<never> };
}

const stored = (stub: DurableObjectStub<never>, id: string) =>
  runInDurableObject(stub, (_i, state) =>
    state.storage.sql
      .exec<{ summary: string; content: ArrayBuffer | null }>("SELECT summary, content FROM message WHERE id = ?", id)
      .one(),
  );

describe("the Outbox's kept text and HTML", () => {
  it("keeps a large pair deflated and gives it back whole, keys in order, to the status API only", async () => {
    const html = receipt(60);
    const text = "Thank you for your order.\n".repeat(40);
    const { id, stub } = await accept({ html, text });
    const row = await stored(stub, id);
    expect(JSON.parse(row.summary)).toMatchObject({ html: null, text: null, subject: "Your receipt" });
    expect(row.content).not.toBeNull();
    // The markup repeats itself, as templates do: a fraction of its bytes.
    const bytes = new TextEncoder().encode(html + text).length;
    expect(row.content!.byteLength).toBeLessThan(bytes / 5);

    const view = await env.OUTBOX.getByName(outboxName(shardOf(id))).view(id, TENANT);
    expect(view!.summary.html).toBe(html);
    expect(view!.summary.text).toBe(text);
    expect(Object.keys(view!.summary)).toEqual([
      "from",
      "to",
      "cc",
      "bcc",
      "reply_to",
      "subject",
      "html",
      "text",
      "tags",
      "message_id",
    ]);
    // The index's view of the same message (what the classify consumer publishes) carries neither.
    const { sync } = await env.OUTBOX.getByName(outboxName(shardOf(id))).beginClassify(id);
    expect(sync!.view.summary).toMatchObject({ html: null, text: null, subject: "Your receipt" });
  });

  it("leaves a small pair in the summary", async () => {
    const html = "<p>Your code is 123456.</p>";
    expect(html.length).toBeLessThan(CONTENT_MIN_CHARS);
    const { id, stub } = await accept({ html, text: "Your code is 123456." });
    const row = await stored(stub, id);
    expect(row.content).toBeNull();
    expect(JSON.parse(row.summary)).toMatchObject({ html, text: "Your code is 123456." });
    const view = await env.OUTBOX.getByName(outboxName(shardOf(id))).view(id, TENANT);
    expect(view!.summary).toMatchObject({ html, text: "Your code is 123456." });
  });
});
