/**
 * Provider rules under /relay/providers (issue 13, item 2; operator key only): the rules the
 * delivery stage matches destinations' MX hosts against (worker/net/core/providers.ts), kept in
 * D1 (migrations/0015 seeds the shipped ones, each value with its source).
 *
 * DESCRIPTION
 *   GET    /relay/providers         { object: "list", data: [rule…] } by name.
 *   GET    /relay/providers/:name   one rule.
 *   PUT    /relay/providers/:name   { mx, window?, messages_per_session?, recipients_per_message?,
 *                                   rate?, require_tls?, sources? } → the rule (created or
 *                                   replaced whole; the name comes from the path). Delivery
 *                                   uses it within PROVIDER_RULES_TTL_MS.
 *   DELETE /relay/providers/:name   → { object: "provider", name, deleted: true }.
 *   providerOfDestination(env, nexthop)  which rule a destination falls under and why: its MX
 *                                   lookup and the host and suffix that matched (for GET
 *                                   /relay/destinations/:transport/:queue).
 *
 * ERRORS
 *   422 validation_error naming each problem; 404 not_found for an unknown rule.
 */
import { Hono } from "hono";
import { deleteProviderRule, listProviderRules, putProviderRule } from "../../../db/providers";
import { matchProvider, parseProviderRule, type ProviderRule } from "../../../net/core/providers";
import { createMxLookup, mxSettingsOf } from "../../../delivery/mx";
import { relayTarget } from "../../../delivery/plan";
import { type AppEnv } from "../../http/context";
import { readJson } from "../../http/body";
import { ApiError } from "../../../model/errors";

function view(rule: ProviderRule) {
  return { object: "provider" as const, ...rule };
}

/** The /relay/providers routes (mounted behind the operator check). */
export function providerRoutes() {
  const r = new Hono<AppEnv>();

  r.get("/providers", async (c) => c.json({ object: "list", data: (await listProviderRules(c.env.DB)).map(view) }));

  r.get("/providers/:name", async (c) => {
    const rule = (await listProviderRules(c.env.DB)).find((x) => x.name === c.req.param("name"));
    if (!rule) throw new ApiError(404, "not_found", "Provider rule not found.");
    return c.json(view(rule));
  });

  r.put("/providers/:name", async (c) => {
    const body = (await readJson(c, 64 * 1024)).value;
    if (body === null || typeof body !== "object" || Array.isArray(body))
      throw new ApiError(422, "validation_error", "Expected a provider rule object.");
    const parsed = parseProviderRule({ ...body, name: c.req.param("name") });
    if (!parsed.ok) throw new ApiError(422, "validation_error", `Invalid provider rule: ${parsed.errors.join("; ")}.`);
    await putProviderRule(c.env.DB, parsed.rule, Date.now());
    return c.json(view(parsed.rule));
  });

  r.delete("/providers/:name", async (c) => {
    const name = c.req.param("name");
    if (!(await deleteProviderRule(c.env.DB, name))) throw new ApiError(404, "not_found", "Provider rule not found.");
    return c.json({ object: "provider", name, deleted: true });
  });

  return r;
}

/** Which provider rule a destination falls under, and why (see the header); null for a relay nexthop. */
export async function providerOfDestination(
  env: Env,
  nexthop: string,
): Promise<{
  rule: string | null;
  mx_hosts: string[];
  matched: { mx_host: string; suffix: string } | null;
  error?: string;
} | null> {
  if (relayTarget(nexthop) || nexthop === "cf-email" || !nexthop.includes(".")) return null;
  try {
    const resolution = await createMxLookup(mxSettingsOf(env))(nexthop);
    if (resolution.kind !== "hosts")
      return { rule: null, mx_hosts: [], matched: null, error: `MX lookup: ${resolution.kind}` };
    const hosts = resolution.hosts.map((h) => h.host);
    const m = matchProvider(await listProviderRules(env.DB), hosts);
    return { rule: m?.rule.name ?? null, mx_hosts: hosts, matched: m ? { mx_host: m.host, suffix: m.suffix } : null };
  } catch (e) {
    return { rule: null, mx_hosts: [], matched: null, error: e instanceof Error ? e.message : String(e) };
  }
}
