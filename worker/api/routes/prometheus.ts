/**
 * GET /metrics (operator key): the relay's state in Prometheus' text format (worker/metrics/).
 *
 * ERRORS
 *   401 without a key, 403 restricted_api_key for a tenant key.
 */
import { Hono } from "hono";
import { type AppEnv } from "../http/context";
import { RoleCache, requireOperator } from "../http/operator";
import { metricsText } from "../../metrics/prometheus";

export function prometheusRoutes() {
  const r = new Hono<AppEnv>();
  r.get("/", requireOperator(new RoleCache()), async (c) =>
    c.body(await metricsText(c.env), 200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" }),
  );
  return r;
}
