/**
 * Pickup policies under /relay/policies (operator key only): caps, rates and connect intervals on
 * any policy key (core/policy.ts), beside the suspensions of /relay/suspensions.
 *
 * DESCRIPTION
 *   GET    /relay/policies        every key with a rule, in every Transport DO: its cap, rate,
 *                                 interval, suspension (and who set it), a reply rule's
 *                                 throttle, and the provider rule that set it, if one did.
 *   PUT    /relay/policies/:key   { concurrency?, rate?, interval_seconds? } → the key's rule in
 *                                 every transport that holds such keys (a dest:<transport>/…
 *                                 key only in its own); a suspension or throttle on the key
 *                                 stays. null (or absent) clears that limit. The key is a field
 *                                 ("tenant:acme", "jobid:acme/spring", "bulk:acme",
 *                                 "egress:ip1", "site:yahoo", "transport:smtp",
 *                                 "dest:smtp/example.com", "remoteip:192.0.2.7", a policy_tags tag:
 *                                 "tag:acme/region=eu") or a combination configured as
 *                                 policy_combinations ("egress:ip1+site:yahoo").
 *   DELETE /relay/policies/:key   its caps, rate and interval go (a suspension stays).
 *   A "/" in a key (dest:smtp/example.com, jobid:acme/spring) is sent as %2F.
 *
 * ERRORS
 *   422 validation_error for a malformed key or limit; 404 not_found for a DELETE of a key
 *   without limits.
 */
import { Hono } from "hono";
import { z } from "zod";
import { formatRate, parseRate, POLICY_FIELDS, type PolicyRule } from "../../../../durable-objects/core";
import { type AppEnv } from "../../http/context";
import { parseInput, readJson } from "../../http/body";
import { ApiError } from "../../../model/errors";
import { allTransports, inspectAll, transportStub } from "../../../policy/transports";

/** PUT /relay/policies/:key. */
export const PolicyLimitsSchema = z
  .object({
    concurrency: z
      .number()
      .int()
      .min(1)
      .max(100_000)
      .nullable()
      .optional()
      .describe("at most this many deliveries in flight with the key"),
    rate: z
      .string()
      .nullable()
      .optional()
      .describe('at most this many selections per interval, e.g. "300/m" (token bucket, burst = count)'),
    interval_seconds: z
      .number()
      .int()
      .min(1)
      .max(86_400)
      .nullable()
      .optional()
      .describe("Halon's connectinterval: at least this long between two selections with the key"),
  })
  .strict();

const PART = new RegExp(`^(${[...POLICY_FIELDS, "tag"].join("|")}):\\S+$`);

/** The key's parts, or null when malformed. */
function validKey(key: string): string[] | null {
  const parts = key.split("+");
  return key.length <= 512 && parts.every((p) => PART.test(p)) ? parts : null;
}

function view(transport: string, key: string, r: PolicyRule) {
  const iso = (s: number | undefined) => (s === undefined ? null : new Date(s * 1000).toISOString());
  return {
    object: "policy" as const,
    transport,
    key,
    concurrency: r.concurrency ?? null,
    rate: r.rate ? formatRate(r.rate) : null,
    interval_seconds: r.interval ?? null,
    suspended_until: iso(r.suspendedUntil),
    set_by: r.label ?? (r.provider ? `provider:${r.provider}` : null),
    throttle: r.throttle
      ? { rate: formatRate(r.throttle), until: iso(r.throttle.until), set_by: r.throttle.label }
      : null,
  };
}

/** The transports a key's rule goes to: its own for a dest: key, else every one. */
async function transportsOf(env: Env, parts: string[]): Promise<string[]> {
  const all = await allTransports(env);
  const dest = parts.find((p) => p.startsWith("dest:"));
  if (!dest) return all;
  const t = dest.slice("dest:".length, dest.indexOf("/") > 0 ? dest.indexOf("/") : undefined);
  if (!all.includes(t)) throw new ApiError(404, "not_found", `Transport ${JSON.stringify(t)} is not configured.`);
  return [t];
}

/** The limits of `rule` replaced by `limits` (absent or null: cleared); null when nothing is left. */
function withLimits(
  rule: PolicyRule | undefined,
  limits: { concurrency?: number | null; rate?: { count: number; perSec: number } | null; interval?: number | null },
): PolicyRule | null {
  const { concurrency: _c, rate: _r, interval: _i, provider: _p, ...rest } = rule ?? {};
  const next: PolicyRule = {
    ...rest,
    ...(limits.concurrency ? { concurrency: limits.concurrency } : {}),
    ...(limits.rate ? { rate: limits.rate } : {}),
    ...(limits.interval ? { interval: limits.interval } : {}),
  };
  return Object.keys(next).length === 0 ? null : next;
}

/** The /relay/policies routes (mounted behind the operator check). */
export function policyRoutes() {
  const r = new Hono<AppEnv>();

  r.get("/policies", async (c) => {
    const inspections = await inspectAll(c.env, await allTransports(c.env));
    return c.json({
      object: "list",
      data: inspections.flatMap((i) => i.policies.map((p) => view(i.transport, p.key, p.rule))),
    });
  });

  r.put("/policies/:key", async (c) => {
    const key = c.req.param("key");
    const parts = validKey(key);
    if (!parts)
      throw new ApiError(
        422,
        "validation_error",
        `Invalid policy key: ${POLICY_FIELDS.join(", ")} as <field>:<value>, or several joined by +.`,
      );
    const body = parseInput(PolicyLimitsSchema, (await readJson(c, 16 * 1024)).value);
    const rate = body.rate ? parseRate(body.rate) : null;
    if (body.rate && !rate)
      throw new ApiError(422, "validation_error", 'Invalid `rate`: "<count>/<unit>", e.g. "300/m" (s, m, h or d).');
    const names = await transportsOf(c.env, parts);
    const inspections = await inspectAll(c.env, names);
    const rules = inspections.map((i) => ({
      transport: i.transport,
      rule: withLimits(i.policies.find((p) => p.key === key)?.rule, {
        concurrency: body.concurrency ?? null,
        rate,
        interval: body.interval_seconds ?? null,
      }),
    }));
    await Promise.all(rules.map((x) => transportStub(c.env, x.transport).setPolicy(key, x.rule)));
    return c.json({ object: "list", data: rules.flatMap((x) => (x.rule ? [view(x.transport, key, x.rule)] : [])) });
  });

  r.delete("/policies/:key", async (c) => {
    const key = c.req.param("key");
    const parts = validKey(key);
    if (!parts) throw new ApiError(422, "validation_error", "Invalid policy key.");
    const inspections = await inspectAll(c.env, await transportsOf(c.env, parts));
    const holders = inspections
      .map((i) => ({ transport: i.transport, rule: i.policies.find((p) => p.key === key)?.rule }))
      .filter(
        (h) =>
          h.rule && (h.rule.concurrency !== undefined || h.rule.rate !== undefined || h.rule.interval !== undefined),
      );
    if (holders.length === 0) throw new ApiError(404, "not_found", "No limits on this key.");
    await Promise.all(holders.map((h) => transportStub(c.env, h.transport).setPolicy(key, withLimits(h.rule, {}))));
    return c.json({ object: "policy", key, deleted: true });
  });

  return r;
}
