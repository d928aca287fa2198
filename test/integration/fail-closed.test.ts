/**
 * A production worker fails closed (issue 12): while WEBHOOK_SECRETS_KEY is missing or malformed,
 * or DKIM_KEYS is not a JSON array, every request gets a 503 naming the secret (never its value),
 * /health included; development and test run on embedded defaults, and never serve the world: a
 * request that came through Cloudflare's edge (CF-Ray) gets a 503 saying how to deploy, and mail
 * Email Routing delivered is not taken (issue 37).
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import worker from "../../worker";
import { handleInbound } from "../../worker/inbound/email";

async function get(path: string, e: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Response> {
  const ctx = createExecutionContext();
  const res = await worker.fetch(
    new Request(`http://relay.test${path}`, { headers }) as Request<unknown, IncomingRequestCfProperties>,
    { ...env, ...e } as Env,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return res;
}

const goodKey = btoa(String.fromCharCode(...Array.from({ length: 32 }, (_, i) => i * 7)));

describe("a production worker without its secrets", () => {
  it.each([
    [
      "WEBHOOK_SECRETS_KEY missing",
      { COHORT_ENV: "production", WEBHOOK_SECRETS_KEY: undefined },
      /WEBHOOK_SECRETS_KEY is not set/,
    ],
    [
      "WEBHOOK_SECRETS_KEY of 16 bytes",
      { COHORT_ENV: "production", WEBHOOK_SECRETS_KEY: btoa("sixteen-bytes!!!") },
      /WEBHOOK_SECRETS_KEY must be 32/,
    ],
    [
      "WEBHOOK_SECRETS_KEY not base64",
      { COHORT_ENV: "production", WEBHOOK_SECRETS_KEY: "not base64 at all!" },
      /WEBHOOK_SECRETS_KEY must be 32/,
    ],
    [
      "DKIM_KEYS not JSON",
      { COHORT_ENV: "production", WEBHOOK_SECRETS_KEY: goodKey, DKIM_KEYS: "MIIEvSECRET" },
      /DKIM_KEYS is set but is not a JSON array/,
    ],
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

describe("a development worker", () => {
  it("refuses every request that came through Cloudflare's edge with a 503 that says to deploy with --env production", async () => {
    const edge = { "cf-ray": "8f1e2d3c4b5a6978-AMS", "cf-connecting-ip": "198.51.100.7" };
    for (const e of [{ COHORT_ENV: "development" }, { COHORT_ENV: "test" }]) {
      for (const path of ["/health", "/emails", "/relay/dev/mailbox"]) {
        const res = await get(path, e, edge);
        expect(res.status).toBe(503);
        expect(await res.json()).toEqual({
          statusCode: 503,
          name: "application_error",
          message: expect.stringMatching(/development mode.*wrangler deploy --env production/),
        });
      }
    }
    // wrangler dev sets CF-Connecting-IP on local requests itself: it is no sign of the edge.
    expect((await get("/health", { COHORT_ENV: "development" }, { "cf-connecting-ip": "127.0.0.1" })).status).toBe(200);
    expect((await get("/health", { COHORT_ENV: "production", WEBHOOK_SECRETS_KEY: goodKey }, edge)).status).toBe(200);
  });

  it("takes no mail that Email Routing delivered: it throws, so the sender tries again later", async () => {
    const raw =
      "Received: from mx.example.net (192.0.2.7) by email.cloudflare.net (unknown) id x for " +
      "<b@bounces.test>\r\nFrom: a@example.net\r\nSubject: hi\r\n\r\nhi\r\n";
    const bytes = new TextEncoder().encode(raw);
    const message = {
      from: "a@example.net",
      to: "b@bounces.test",
      raw: new Response(bytes).body!,
      rawSize: bytes.length,
      setReject: () => undefined,
    };
    await expect(handleInbound(message, { ...env, COHORT_ENV: "development" } as Env)).rejects.toThrow(
      /development mode.*--env production/,
    );
  });
});
