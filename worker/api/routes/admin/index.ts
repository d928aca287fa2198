/**
 * The admin API under /relay/ (issue 6): message search for every key, the queue, destination,
 * flush, suspension, policy, warm-up, egress, stats, inbound and provider-rule routes for operator
 * keys only. See queue.ts, suspensions.ts, inbound.ts, policies.ts, warmup.ts, egress.ts,
 * providers.ts and messages.ts.
 */
import { Hono } from "hono";
import { type AppEnv } from "../../http/context";
import { devRoutes } from "./dev";
import { messageRoutes } from "./messages";
import { RoleCache, requireOperator } from "../../http/operator";
import { queueRoutes } from "./queue";
import { suspensionRoutes } from "./suspensions";
import { inboundRoutes } from "./inbound";
import { providerRoutes } from "./providers";
import { policyRoutes } from "./policies";
import { warmupRoutes } from "./warmup";
import { egressRoutes } from "./egress";

/** The operator-only path prefixes (under /relay). */
export const OPERATOR_PATHS = [
  "/queue",
  "/destinations",
  "/flush",
  "/suspensions",
  "/stats",
  "/inbound",
  "/providers",
  "/policies",
  "/warmup",
  "/egress",
] as const;

/** The admin routes, mounted at /relay behind the API key middleware. */
export function adminRoutes() {
  const r = new Hono<AppEnv>();
  const roles = new RoleCache();
  const operator = requireOperator(roles);
  for (const p of OPERATOR_PATHS) {
    r.use(p, operator);
    r.use(`${p}/*`, operator);
  }
  r.route("/", devRoutes(roles));
  r.route("/", queueRoutes());
  r.route("/", suspensionRoutes());
  r.route("/", inboundRoutes());
  r.route("/", providerRoutes());
  r.route("/", policyRoutes());
  r.route("/", warmupRoutes());
  r.route("/", egressRoutes());
  r.route("/", messageRoutes(roles));
  return r;
}
