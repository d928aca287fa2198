/**
 * Resend's /topics, the contacts' topic calls, sends with `topic_id`, and Resend's
 * /suppressions over the relay's suppression store (one mechanism: the scope 'bulk:<topic>').
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { callWithKey, email, getEmail, newKey } from "../helpers";

type Json = Record<string, unknown>;
const json = async (r: Response) => (await r.json()) as Json;
const statusOf = async (key: string, id: string) => (await getEmail(key, id)).body.recipients[0]!.status;

async function send(key: string, body: Json): Promise<string> {
  const res = await callWithKey(key, "POST", "/emails", email(body));
  expect(res.status).toBe(200);
  return (await json(res)).id as string;
}

describe("topics", () => {
  it("hold a topic's next email back for a contact who opted out, through the suppression scope", async () => {
    const key = await newKey("topic-a");
    const created = await callWithKey(key, "POST", "/topics", {
      name: "Weekly Newsletter",
      default_subscription: "opt_in",
    });
    expect(created.status).toBe(201);
    const topic = (await json(created)).id as string;
    expect(await json(await callWithKey(key, "GET", `/topics/${topic}`))).toMatchObject({
      id: topic,
      name: "Weekly Newsletter",
      default_subscription: "opt_in",
    });
    expect(await statusOf(key, await send(key, { to: "ann@example.com", topic_id: topic }))).not.toBe("suppressed");

    const upd = await callWithKey(key, "PATCH", "/contacts/Ann@Example.com/topics", [
      { id: topic, subscription: "opt_out" },
    ]);
    expect(await json(upd)).toEqual({ id: "ann@example.com" });
    expect(await json(await callWithKey(key, "GET", "/contacts/ann@example.com/topics"))).toMatchObject({
      object: "list",
      data: [{ id: topic, subscription: "opt_out" }],
    });
    // The opt-out is the relay's suppression of scope bulk:<topic>: one store.
    const entries = await json(await callWithKey(key, "GET", "/relay/suppressions?address=ann@example.com"));
    expect(entries.data).toMatchObject([{ address: "ann@example.com", scope: `bulk:${topic}` }]);

    const held = await send(key, { to: "ann@example.com", topic_id: topic });
    expect(await statusOf(key, held)).toBe("suppressed");
    // Mail without the topic, and another contact's, still go.
    expect(await statusOf(key, await send(key, { to: "ann@example.com" }))).not.toBe("suppressed");
    expect(await statusOf(key, await send(key, { to: "bob@example.com", topic_id: topic }))).not.toBe("suppressed");

    await callWithKey(key, "PATCH", "/contacts/ann@example.com/topics", [{ id: topic, subscription: "opt_in" }]);
    expect(await statusOf(key, await send(key, { to: "ann@example.com", topic_id: topic }))).not.toBe("suppressed");
  });

  it("send an opt_out topic only to contacts who opted in", async () => {
    const key = await newKey("topic-b");
    const topic = (
      await json(await callWithKey(key, "POST", "/topics", { name: "Beta", default_subscription: "opt_out" }))
    ).id as string;
    expect(await statusOf(key, await send(key, { to: "ann@example.com", topic_id: topic }))).toBe("suppressed");
    await callWithKey(key, "PATCH", "/contacts/ann@example.com/topics", [{ id: topic, subscription: "opt_in" }]);
    expect(await json(await callWithKey(key, "GET", "/contacts/ann@example.com/topics"))).toMatchObject({
      data: [{ id: topic, subscription: "opt_in" }],
    });
    expect(await statusOf(key, await send(key, { to: "ann@example.com", topic_id: topic }))).not.toBe("suppressed");
  });

  it("give a one-recipient topic email a one-click link for the topic, and refuse an unknown topic", async () => {
    const key = await newKey("topic-c");
    const topic = (
      await json(await callWithKey(key, "POST", "/topics", { name: "News", default_subscription: "opt_in" }))
    ).id as string;
    const id = await send(key, { to: "ann@example.com", topic_id: topic });
    const view = await env.OUTBOX.getByName(`outbox-${id.slice(0, 2)}`).view(id, "topic-c");
    expect(view?.summary).toMatchObject({ bulk: true, unsubscribe_topic: topic, topic_id: topic });
    const bad = await callWithKey(key, "POST", "/emails", email({ topic_id: "not-a-topic" }));
    expect(bad.status).toBe(422);
    expect((await json(bad)).message).toMatch(/topic_id/);
    const other = await newKey("topic-c2");
    expect((await callWithKey(other, "GET", `/topics/${topic}`)).status).toBe(404);
    expect((await callWithKey(key, "PATCH", `/topics/${topic}`, { default_subscription: "opt_out" })).status).toBe(422);
    expect(await json(await callWithKey(key, "DELETE", `/topics/${topic}`))).toEqual({
      object: "topic",
      id: topic,
      deleted: true,
    });
    expect((await callWithKey(key, "GET", "/contacts/c_1234/topics")).status).toBe(404);
  });
});

describe("Resend's suppressions", () => {
  it("add, get, list and remove entries of the relay's store, by email or by id", async () => {
    const key = await newKey("rsup-a");
    const added = await callWithKey(key, "POST", "/suppressions", { email: "Ann@Example.com" });
    expect(added.status).toBe(201);
    const { id } = (await json(added)) as { id: string };
    expect(await json(await callWithKey(key, "GET", "/suppressions/ann%40example.com"))).toMatchObject({
      object: "suppression",
      id,
      email: "ann@example.com",
      origin: "manual",
      source_id: null,
      scope: "all",
    });
    expect(await json(await callWithKey(key, "GET", `/suppressions/${id}`))).toMatchObject({
      id,
      email: "ann@example.com",
    });
    // Bounces and complaints in the same store show their origin; /relay/suppressions sees the Resend-added entry.
    const now = Date.now();
    await env.DB.batch([
      env.DB.prepare(
        "INSERT INTO suppressions (tenant_id, address, scope, reason, created_at, expires_at) " +
          "VALUES ('rsup-a', 'b@x.example', '', 'bounce:invalid_recipient', ?, ?)",
      ).bind(now, now + 86_400_000),
      env.DB.prepare(
        "INSERT INTO suppressions (tenant_id, address, scope, reason, created_at, expires_at) VALUES ('rsup-a', 'c@x.example', '', 'complaint', ?, NULL)",
      ).bind(now),
    ]);
    expect(
      (await json(await callWithKey(key, "GET", "/relay/suppressions?address=ann@example.com"))).data,
    ).toMatchObject([{ address: "ann@example.com", scope: "all", reason: "manual" }]);
    const bounces = await json(await callWithKey(key, "GET", "/suppressions?origin=bounce"));
    expect(bounces).toMatchObject({
      object: "list",
      has_more: false,
      data: [{ email: "b@x.example", origin: "bounce" }],
    });
    const page1 = await json(await callWithKey(key, "GET", "/suppressions?limit=2"));
    expect(page1.has_more).toBe(true);
    const last = (page1.data as { id: string; email: string }[])[1]!;
    const page2 = await json(await callWithKey(key, "GET", `/suppressions?limit=2&after=${last.id}`));
    expect([...(page1.data as Json[]), ...(page2.data as Json[])].map((d) => d.email)).toEqual([
      "ann@example.com",
      "b@x.example",
      "c@x.example",
    ]);
    expect(await json(await callWithKey(key, "DELETE", `/suppressions/${id}`))).toEqual({
      object: "suppression",
      id,
      deleted: true,
    });
    expect((await callWithKey(key, "GET", `/suppressions/${id}`)).status).toBe(404);
    expect((await callWithKey(key, "DELETE", "/suppressions/c%40x.example")).status).toBe(200);
    expect((await callWithKey(key, "GET", "/suppressions/not-an-id")).status).toBe(404);
  });

  it("add and remove in batches, and a suppressed address holds back the next email", async () => {
    const key = await newKey("rsup-b");
    const added = await json(
      await callWithKey(key, "POST", "/suppressions/batch/add", {
        emails: ["x@y.example", "Z@y.example", "x@y.example"],
      }),
    );
    expect((added.data as Json[]).map((d) => d.object)).toEqual(["suppression", "suppression"]);
    expect(await statusOf(key, await send(key, { to: "z@y.example" }))).toBe("suppressed");
    const removed = await json(
      await callWithKey(key, "POST", "/suppressions/batch/remove", { emails: ["x@y.example", "none@y.example"] }),
    );
    expect((removed.data as Json[]).map((d) => d.deleted)).toEqual([true, false]);
    const ids = (added.data as { id: string }[]).map((d) => d.id);
    const byId = await json(await callWithKey(key, "POST", "/suppressions/batch/remove", { ids: [ids[1]] }));
    expect(byId.data).toEqual([{ object: "suppression", id: ids[1], deleted: true }]);
    expect((await callWithKey(key, "POST", "/suppressions/batch/add", { emails: ["bad"] })).status).toBe(422);
    expect((await callWithKey(key, "POST", "/suppressions", { address: "a@b.example" })).status).toBe(422);
  });
});

describe("key rename and domain update", () => {
  it("rename an API key, and refuse another tenant's", async () => {
    const key = await newKey("keys-a");
    const { id } = (await json(await callWithKey(key, "POST", "/api-keys", { name: "first" }))) as { id: string };
    expect(await json(await callWithKey(key, "PATCH", `/api-keys/${id}`, { name: "renamed" }))).toEqual({
      object: "api_key",
      id,
    });
    expect(
      ((await json(await callWithKey(key, "GET", "/api-keys"))).data as Json[]).find((k) => k.id === id),
    ).toMatchObject({ name: "renamed" });
    expect((await callWithKey(await newKey("keys-b"), "PATCH", `/api-keys/${id}`, { name: "mine" })).status).toBe(404);
    expect((await callWithKey(key, "PATCH", `/api-keys/${id}`, { name: "" })).status).toBe(422);
  });

  it("take every field domains.update sends, turning receiving on, and refuse what the relay does not do by name", async () => {
    const key = await newKey("dom-upd");
    const d = (await json(await callWithKey(key, "POST", "/domains", { name: "upd.example" }))) as { id: string };
    expect(
      await json(
        await callWithKey(key, "PATCH", `/domains/${d.id}`, {
          capabilities: { receiving: "enabled" },
          tls: "opportunistic",
          open_tracking: false,
        }),
      ),
    ).toEqual({ object: "domain", id: d.id });
    expect(await json(await callWithKey(key, "GET", `/domains/${d.id}`))).toMatchObject({
      capabilities: { sending: "enabled", receiving: "enabled" },
    });
    for (const [body, field] of [
      [{ click_tracking: true }, "click_tracking"],
      [{ tracking_subdomain: "links" }, "tracking_subdomain"],
      [{ tls: "enforced" }, "tls"],
      [{ capabilities: { sending: "disabled" } }, "capabilities.sending"],
      [{ region: "eu-west-1" }, "region"],
    ] as const) {
      const res = await callWithKey(key, "PATCH", `/domains/${d.id}`, body);
      expect(res.status).toBe(422);
      expect((await json(res)).message).toContain(field);
    }
  });
});
