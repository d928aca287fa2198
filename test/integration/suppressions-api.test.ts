import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { callWithKey, newKey } from "./helpers";

describe("GET/POST/DELETE /relay/suppressions", () => {
  it("lists the tenant's live suppressions in address order, and removes them", async () => {
    const key = await newKey("supp");
    const now = Date.now();
    await env.DB.batch([
      env.DB.prepare(
        "INSERT INTO suppressions (tenant_id, address, reason, created_at, expires_at) VALUES ('supp', 'b@x.example', 'hard_bounce', ?, NULL)",
      ).bind(now),
      env.DB.prepare(
        "INSERT INTO suppressions (tenant_id, address, reason, created_at, expires_at) VALUES ('supp', 'a@x.example', 'complaint', ?, NULL)",
      ).bind(now),
      env.DB.prepare(
        "INSERT INTO suppressions (tenant_id, address, reason, created_at, expires_at) VALUES ('supp', 'old@x.example', 'hard_bounce', ?, ?)",
      ).bind(now, now - 1),
      env.DB.prepare(
        "INSERT INTO suppressions (tenant_id, address, reason, created_at, expires_at) VALUES ('other', 'c@x.example', 'manual', ?, NULL)",
      ).bind(now),
    ]);
    const list = (await (await callWithKey(key, "GET", "/relay/suppressions?limit=1")).json()) as {
      has_more: boolean;
      data: { address: string; reason: string }[];
    };
    expect(list).toMatchObject({ has_more: true, data: [{ address: "a@x.example", reason: "complaint" }] });
    const rest = (await (await callWithKey(key, "GET", "/relay/suppressions?after=a@x.example")).json()) as {
      has_more: boolean;
      data: { address: string }[];
    };
    expect(rest.data.map((d) => d.address)).toEqual(["b@x.example"]); // expired and other tenants' entries are not listed
    expect((await callWithKey(key, "DELETE", "/relay/suppressions/c%40x.example")).status).toBe(404);
    expect((await callWithKey(key, "DELETE", "/relay/suppressions/B%40X.example")).status).toBe(200);
    expect((await callWithKey(key, "DELETE", "/relay/suppressions/b%40x.example")).status).toBe(404);
  });

  it("adds a manual suppression with an expiry, lower-cased, and refuses bad input", async () => {
    const key = await newKey("supp-add");
    const res = await callWithKey(key, "POST", "/relay/suppressions", {
      address: "Ann@Example.com",
      expires_at: "2099-01-01T00:00:00Z",
    });
    expect(res.status).toBe(201);
    expect(await res.json()).toMatchObject({
      object: "suppression",
      address: "ann@example.com",
      reason: "manual",
      expires_at: "2099-01-01T00:00:00.000Z",
    });
    expect((await callWithKey(key, "POST", "/relay/suppressions", { address: "nobody" })).status).toBe(422);
    expect(
      (await callWithKey(key, "POST", "/relay/suppressions", { address: "x@y.example", expires_at: "soon" })).status,
    ).toBe(422);
    expect(
      (await callWithKey(key, "POST", "/relay/suppressions", { address: "x@y.example", scope: "bulk:has space" }))
        .status,
    ).toBe(422);
  });

  it("keeps one entry per scope, and pages whole addresses", async () => {
    const key = await newKey("supp-scope");
    for (const [address, scope] of [
      ["a@s.example", "bulk:news"],
      ["a@s.example", "all"],
      ["a@s.example", "bulk"],
      ["b@s.example", "bulk:offers"],
      ["c@s.example", "all"],
    ]) {
      const res = await callWithKey(key, "POST", "/relay/suppressions", { address, scope });
      expect(res.status).toBe(201);
      expect(await res.json()).toMatchObject({ address, scope });
    }
    type Page = { has_more: boolean; data: { address: string; scope: string }[] };
    const first = (await (await callWithKey(key, "GET", "/relay/suppressions?limit=1")).json()) as Page;
    expect(first.has_more).toBe(true);
    expect(first.data.map((d) => `${d.address} ${d.scope}`)).toEqual([
      "a@s.example all",
      "a@s.example bulk",
      "a@s.example bulk:news",
    ]);
    const second = (await (
      await callWithKey(key, "GET", "/relay/suppressions?limit=2&after=a@s.example")
    ).json()) as Page;
    expect(second).toMatchObject({
      has_more: false,
      data: [
        { address: "b@s.example", scope: "bulk:offers" },
        { address: "c@s.example", scope: "all" },
      ],
    });
    // The scope's entry alone, then the rest of the address.
    expect(await (await callWithKey(key, "DELETE", "/relay/suppressions/a@s.example?scope=bulk")).json()).toMatchObject(
      { deleted: true, count: 1 },
    );
    expect(await (await callWithKey(key, "DELETE", "/relay/suppressions/a@s.example")).json()).toMatchObject({
      deleted: true,
      count: 2,
    });
  });
});
