import { describe, expect, it } from "vitest";
import { createApp } from "../../worker/api/app";
import { ROUTES } from "../../worker/api/openapi/document";
import { call, callWithKey, newKey } from "./helpers";

describe("GET /openapi.json", () => {
  it("lists exactly the routes the app serves", () => {
    const served = new Set(
      createApp()
        .routes.filter((r) => r.method !== "ALL")
        .map((r) => `${r.method.toLowerCase()} ${r.path.replace(/:(\w+)/g, "{$1}")}`),
    );
    const documented = new Set(ROUTES.map((r) => `${r.method} ${r.path}`));
    expect([...served].filter((r) => !documented.has(r))).toEqual([]);
    expect([...documented].filter((r) => !served.has(r))).toEqual([]);
  });

  it("needs an API key and serves the document with one", async () => {
    expect((await call("/openapi.json")).status).toBe(401);
    const res = await callWithKey(await newKey("docs"), "GET", "/openapi.json");
    expect(res.status).toBe(200);
    const doc = (await res.json()) as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toBe("3.1.0");
    expect(Object.keys(doc.paths)).toContain("/emails/{id}/cancel");
  });
});
