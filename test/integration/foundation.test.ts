import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import worker from "../../worker";

async function call(path: string, init?: RequestInit) {
  const ctx = createExecutionContext();
  const req = new Request(`http://relay.test${path}`, init) as Request<unknown, IncomingRequestCfProperties>;
  const res = await worker.fetch(req, env, ctx);
  await waitOnExecutionContext(ctx);
  return res;
}

describe("the worker's foundation", () => {
  it("answers the health route without an API key", async () => {
    const res = await call("/health");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, service: "cohort" });
  });

  it("answers unknown routes with Resend's error shape and no stack trace", async () => {
    const res = await call("/nope");
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toContain("application/json");
    expect(await res.json()).toEqual({
      statusCode: 404,
      name: "not_found",
      message: "The requested endpoint was not found.",
    });
  });

  it("has the D1 migrations applied", async () => {
    const row = await env.DB.prepare("SELECT value FROM schema_meta WHERE key = 'created_by'").first<{
      value: string;
    }>();
    expect(row?.value).toBe("0001_create_schema_meta");
  });
});
