/**
 * The meter's development endpoints (worker/api/routes/admin/dev.ts): served to an operator key
 * while the meter counts (METER "on", this project's wrangler.toml development vars), and 404
 * with the reason where it is off (production's "off", and the throughput benchmarks).
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import worker from "../../worker";
import { hashApiKey } from "../../worker/db/api-keys";
import { setKeyRole } from "../../worker/db/admin";
import { newKey } from "./helpers";

async function devCall(devEnv: Env, method: string, path: string, as: string): Promise<Response> {
  const ctx = createExecutionContext();
  const req = new Request(`http://relay.test${path}`, {
    method,
    headers: { authorization: `Bearer ${as}` },
  }) as Request<unknown, IncomingRequestCfProperties>;
  const res = await worker.fetch(req, devEnv, ctx);
  await waitOnExecutionContext(ctx);
  return res;
}

describe("/relay/dev/meter", () => {
  let operator: string;
  let tenant: string;
  beforeAll(async () => {
    operator = await newKey("meter-operator");
    await setKeyRole(env.DB, await hashApiKey(operator), "operator");
    tenant = await newKey("meter-tenant");
  });

  it("answers the counters to an operator while the meter is on, and a tenant key gets 403", async () => {
    expect(env.METER).toBe("on");
    const reset = await devCall(env, "POST", "/relay/dev/meter/reset", operator);
    expect(reset.status).toBe(200);
    expect(await reset.json()).toMatchObject({ worker_invocations: 0, do_requests: 0 });
    const got = await devCall(env, "GET", "/relay/dev/meter", operator);
    expect(got.status).toBe(200);
    expect(await got.json()).toHaveProperty("rows_written_by_statement");
    expect((await devCall(env, "GET", "/relay/dev/meter", tenant)).status).toBe(403);
  });

  it("is 404 not_found, saying why, where the meter is off", async () => {
    for (const [method, path] of [
      ["GET", "/relay/dev/meter"],
      ["POST", "/relay/dev/meter/reset"],
    ] as const) {
      const res = await devCall({ ...env, METER: "off" }, method, path, operator);
      expect(res.status).toBe(404);
      const body = await res.json<{ name: string; message: string }>();
      expect(body.name).toBe("not_found");
      expect(body.message).toContain("METER");
    }
  });
});
