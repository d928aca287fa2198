/**
 * A production worker fails closed (issue 12): while WEBHOOK_SECRETS_KEY is missing or malformed,
 * or DKIM_KEYS is not a JSON array, every request gets a 503 naming the secret (never its value),
 * /health included; development and test run on embedded defaults.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import worker from "../../worker";

async function get(path: string, e: Record<string, unknown>): Promise<Response> {
  const ctx = createExecutionContext();
  const res = await worker.fetch(new Request(`http://relay.test${path}`) as Request<unknown, IncomingRequestCfProperties>, { ...env, ...e } as Env, ctx);
  await waitOnExecutionContext(ctx);
  return res;
}

const goodKey = btoa(String.fromCharCode(...Array.from({ length: 32 }, (_, i) => i * 7)));

describe("a production worker without its secrets", () => {
  it.each([
    ["WEBHOOK_SECRETS_KEY missing", { COHORT_ENV: "production", WEBHOOK_SECRETS_KEY: undefined }, /WEBHOOK_SECRETS_KEY is not set/],
    ["WEBHOOK_SECRETS_KEY of 16 bytes", { COHORT_ENV: "production", WEBHOOK_SECRETS_KEY: btoa("sixteen-bytes!!!") }, /WEBHOOK_SECRETS_KEY must be 32/],
    ["WEBHOOK_SECRETS_KEY not base64", { COHORT_ENV: "production", WEBHOOK_SECRETS_KEY: "not base64 at all!" }, /WEBHOOK_SECRETS_KEY must be 32/],
    ["DKIM_KEYS not JSON", { COHORT_ENV: "production", WEBHOOK_SECRETS_KEY: goodKey, DKIM_KEYS: "MIIEvSECRET" }, /DKIM_KEYS is set but is not a JSON array/],
  ])("%s: every request is a 503 naming it, without its value", async (_, e, message) => {
    for (const path of ["/health", "/emails", "/relay/dashboard/"]) {
      const res = await get(path, e);
      expect(res.status).toBe(503);
      const body = await res.json<{ name: string; message: string }>();
      expect(body).toMatchObject({ name: "application_error", message: expect.stringMatching(message) });
      expect(body.message).not.toMatch(/sixteen|not base64 at all|MIIEv/);
    }
  });

  it("with its secrets it serves (the API key check answers)", async () => {
    expect((await get("/health", { COHORT_ENV: "production", WEBHOOK_SECRETS_KEY: goodKey })).status).toBe(200);
    expect((await get("/emails", { COHORT_ENV: "production", WEBHOOK_SECRETS_KEY: goodKey })).status).toBe(401);
  });

  it("an unknown COHORT_ENV is production, not development: no fallback key", async () => {
    expect((await get("/health", { COHORT_ENV: "staging", WEBHOOK_SECRETS_KEY: undefined })).status).toBe(503);
  });

  it("development and test need no secret", async () => {
    expect((await get("/health", { COHORT_ENV: "development", WEBHOOK_SECRETS_KEY: undefined })).status).toBe(200);
    expect((await get("/health", { COHORT_ENV: "test", WEBHOOK_SECRETS_KEY: undefined })).status).toBe(200);
  });
});
