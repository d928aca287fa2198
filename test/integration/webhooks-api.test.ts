import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { openSecret, secretsKey } from "../../worker/lib/secrets";
import { callWithKey, newKey } from "./helpers";

async function json<T>(res: Response): Promise<T> {
  return (await res.json()) as T;
}

describe("webhook endpoints API (Resend's shape)", () => {
  it("creates an endpoint, shows its whsec_ secret once, and stores it only encrypted", async () => {
    const key = await newKey("hooks");
    const res = await callWithKey(key, "POST", "/webhooks", {
      endpoint: "https://hooks.example.com/cohort",
      events: ["email.delivered", "email.bounced"],
    });
    expect(res.status).toBe(201);
    const created = await json<{ object: string; id: string; signing_secret: string }>(res);
    expect(created).toMatchObject({ object: "webhook" });
    expect(created.signing_secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    const got = await json<Record<string, unknown>>(await callWithKey(key, "GET", `/webhooks/${created.id}`));
    expect(got).toEqual({
      object: "webhook",
      id: created.id,
      created_at: expect.any(String),
      status: "enabled",
      endpoint: "https://hooks.example.com/cohort",
      events: ["email.delivered", "email.bounced"],
    });
    const row = await env.DB.prepare("SELECT secret_enc FROM webhook_endpoints WHERE id = ?")
      .bind(created.id)
      .first<{ secret_enc: string }>();
    expect(row!.secret_enc).not.toContain(created.signing_secret.slice(6));
    expect(await openSecret(await secretsKey(env), row!.secret_enc)).toBe(created.signing_secret);
  });

  it.each([
    ["a private address", "https://10.0.0.5/hook"],
    ["the metadata address", "http://169.254.169.254/latest/meta-data"],
    ["credentials in the URL", "https://user:pw@hooks.example.com/"],
    ["an unsupported scheme", "ftp://hooks.example.com/"],
    ["not a URL", "hooks.example.com"],
  ])("refuses %s with 422", async (_what, endpoint) => {
    const res = await callWithKey(await newKey("hooks-ssrf"), "POST", "/webhooks", {
      endpoint,
      events: ["email.sent"],
    });
    expect(res.status).toBe(422);
    expect(await json<{ name: string }>(res)).toMatchObject({ name: "validation_error" });
  });

  it("allows a loopback receiver only because the test configuration is local", async () => {
    const res = await callWithKey(await newKey("hooks-local"), "POST", "/webhooks", {
      endpoint: "http://127.0.0.1:9/hook",
      events: ["email.sent"],
    });
    expect(res.status).toBe(201);
  });

  it("refuses unknown event types", async () => {
    const res = await callWithKey(await newKey("hooks-ev"), "POST", "/webhooks", {
      endpoint: "https://hooks.example.com/",
      events: ["email.opened"],
    });
    expect(res.status).toBe(422);
  });

  it("lists, updates, rotates and deletes; another tenant sees none of it", async () => {
    const key = await newKey("hooks-crud");
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push(
        (
          await json<{ id: string }>(
            await callWithKey(key, "POST", "/webhooks", {
              endpoint: `https://h${i}.example.com/`,
              events: ["email.sent"],
            }),
          )
        ).id,
      );
    const page1 = await json<{ has_more: boolean; data: { id: string }[] }>(
      await callWithKey(key, "GET", "/webhooks?limit=2"),
    );
    expect(page1.has_more).toBe(true);
    const page2 = await json<{ has_more: boolean; data: { id: string }[] }>(
      await callWithKey(key, "GET", `/webhooks?limit=2&after=${page1.data[1]!.id}`),
    );
    expect([...page1.data, ...page2.data].map((w) => w.id).sort()).toEqual([...ids].sort());
    expect(page2.has_more).toBe(false);

    const patched = await callWithKey(key, "PATCH", `/webhooks/${ids[0]}`, {
      status: "disabled",
      events: ["email.bounced"],
    });
    expect(patched.status).toBe(200);
    expect(await json(await callWithKey(key, "GET", `/webhooks/${ids[0]}`))).toMatchObject({
      status: "disabled",
      events: ["email.bounced"],
    });

    const before = await env.DB.prepare("SELECT secret_enc FROM webhook_endpoints WHERE id = ?")
      .bind(ids[1])
      .first<{ secret_enc: string }>();
    const rotated = await json<{ signing_secret: string }>(
      await callWithKey(key, "POST", `/webhooks/${ids[1]}/signing-secret/rotate`),
    );
    const after = await env.DB.prepare(
      "SELECT secret_enc, previous_secret_enc, previous_valid_until FROM webhook_endpoints WHERE id = ?",
    )
      .bind(ids[1])
      .first<{ secret_enc: string; previous_secret_enc: string; previous_valid_until: number }>();
    expect(after!.previous_secret_enc).toBe(before!.secret_enc);
    expect(await openSecret(await secretsKey(env), after!.secret_enc)).toBe(rotated.signing_secret);
    expect(after!.previous_valid_until).toBeGreaterThan(Date.now() + 23 * 3600 * 1000);

    const other = await newKey("hooks-other");
    expect((await callWithKey(other, "GET", `/webhooks/${ids[2]}`)).status).toBe(404);
    expect((await callWithKey(other, "DELETE", `/webhooks/${ids[2]}`)).status).toBe(404);
    expect(await json<{ data: unknown[] }>(await callWithKey(other, "GET", "/webhooks"))).toMatchObject({ data: [] });

    expect(await json(await callWithKey(key, "DELETE", `/webhooks/${ids[2]}`))).toEqual({
      object: "webhook",
      id: ids[2],
      deleted: true,
    });
    expect((await callWithKey(key, "GET", `/webhooks/${ids[2]}`)).status).toBe(404);
  });
});
